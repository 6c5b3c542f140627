from agent.loop.runner import reward


def _summary(status="accepted", eager=None, compiled=None):
    return {"status": status, "speedup_vs_eager": eager, "speedup_vs_compile": compiled}


def test_it_gives_nothing_for_a_turn_without_an_evaluation():
    assert reward(None) == 0.0


def test_it_gates_the_reward_on_acceptance():
    for status in ("incorrect", "build_error", "runtime_error", "timeout", "rejected"):
        assert reward(_summary(status, eager=10.0, compiled=10.0)) == -1.0


def test_it_rewards_milestones_for_beating_eager_and_torch_compile_by_a_margin():
    assert reward(_summary(eager=None)) == 1.0
    assert reward(_summary(eager=1.02, compiled=2.0)) == 1.0
    assert reward(_summary(eager=1.5, compiled=None)) == 2.0
    assert reward(_summary(eager=1.5, compiled=1.01)) == 2.0
    assert reward(_summary(eager=1.5, compiled=1.2)) == 3.0


def test_an_accepted_verdict_on_a_constant_reference_earns_nothing_however_fast():
    summary = {**_summary(eager=50.0, compiled=40.0), "flags": ["constant_reference"]}
    assert reward(summary) == 0.0
    assert reward({**summary, "flags": []}) == 3.0


def test_a_fast_figure_whose_timing_is_not_established_earns_only_acceptance():
    # noisy_timing: an interval that stayed wide, or baselines slowed by other work on the device (which a candidate's
    # own leftover GPU work can be): never a headline, so never a speed reward either.
    summary = {**_summary(eager=50.0, compiled=40.0), "flags": ["noisy_timing"]}
    assert reward(summary) == 1.0
    assert reward({**summary, "flags": []}) == 3.0
