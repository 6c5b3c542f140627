from agent.builtin.codegen import register_fit


def test_a_row_is_held_in_registers_only_when_it_splits_evenly_within_the_budget():
    assert register_fit(4096, 256, 4)  # 16 values a thread
    assert register_fit(32768, 1024, 1)  # 32 values a thread: the most a 1024-thread block may hold
    assert not register_fit(32768, 256, 4)  # 128 values a thread would spill
    assert not register_fit(1000, 256, 4)  # uneven: some threads would need bounds checks
    assert not register_fit(4096, 96, 1)  # not a whole number of warps
