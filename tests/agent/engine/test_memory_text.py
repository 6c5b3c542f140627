"""One way to speak of memory (agent/engine/memory_text.py), shared by the engine's verdicts and the studio's upload
check: sizes in words, and which error texts mean the process ran out of memory."""
from agent.engine.memory_text import ran_out_of_memory, size_text


def test_sizes_are_written_in_the_largest_unit_that_fits():
    assert size_text(0) == "0 bytes" and size_text(512) == "512 bytes"
    assert size_text(1536) == "1.5 KiB" and size_text(6 << 30) == "6.0 GiB" and size_text(3 << 40) == "3.0 TiB"


def test_every_process_s_way_of_running_out_of_memory_is_recognised_and_nothing_else():
    for text in ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 6.00 GiB",
                 "RuntimeError: [enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory",
                 "OSError: [Errno 12] Cannot allocate memory", "MemoryError",
                 "the problem exceeded the memory limit and was killed"):
        assert ran_out_of_memory(text), text
    for text in ("", "RuntimeError: shape mismatch", "IndexError: index 7 is out of bounds for dimension 0"):
        assert not ran_out_of_memory(text), text
