import os
import threading

import torch

from agent.engine.evaluate import file_pool, tensor_file
from agent.engine.evaluate.file_pool import FilePool, scrub
from agent.engine.evaluate.tensor_file import TensorFileReader, TensorFileWriter

CAPACITY = 8 << 20


def _held_bytes(fd: int) -> int:
    return os.fstat(fd).st_blocks * 512


def test_scrub_zeroes_what_the_last_job_wrote_and_keeps_the_pages():
    fd = tensor_file.create(CAPACITY)
    try:
        writer = TensorFileWriter(fd)
        secret = torch.randn(512, 1024)
        writer.put(["trial", 0, 0], secret)
        held = _held_bytes(fd)
        scrub(fd)
        again = TensorFileReader(fd, writer.layout).tensors("trial", 0)[0]
        assert torch.count_nonzero(again) == 0
        assert _held_bytes(fd) == held  # the pages stay: the next writer does not allocate them again
    finally:
        os.close(fd)


def test_a_returned_file_is_lent_again_clean():
    pool = FilePool()
    try:
        with pool.lend(CAPACITY) as fd:
            TensorFileWriter(fd).put(["trial", 0, 0], torch.full((1024, 1024), 7.0))
        first = fd
        pool.settle()
        with pool.lend(CAPACITY) as fd:
            assert fd == first, "the scrubbed file was not reused"
            assert os.fstat(fd).st_size == CAPACITY
            view = tensor_file._shared(fd, 0, torch.float32, [1024, 1024])
            assert torch.count_nonzero(view) == 0
            del view
    finally:
        pool.close()


def test_concurrent_evaluations_never_share_a_file():
    pool = FilePool()
    try:
        with pool.lend(CAPACITY) as a, pool.lend(CAPACITY) as b:
            assert a != b
    finally:
        pool.close()


def test_files_of_another_size_are_not_lent():
    pool = FilePool()
    try:
        with pool.lend(CAPACITY):
            pass
        pool.settle()
        with pool.lend(2 * CAPACITY) as fd:
            assert os.fstat(fd).st_size == 2 * CAPACITY
    finally:
        pool.close()


def test_back_to_back_evaluations_alternate_between_two_files_and_each_is_clean(monkeypatch):
    pool = FilePool()
    slow = threading.Event()
    real_scrub = file_pool.scrub

    def slow_scrub(fd: int) -> None:
        slow.wait(0.5)  # a scrub still running when the next evaluation starts
        real_scrub(fd)

    monkeypatch.setattr(file_pool, "scrub", slow_scrub)
    try:
        seen = []
        for value in range(4):
            with pool.lend(CAPACITY) as fd:
                view = tensor_file._shared(fd, 0, torch.float32, [1024])
                assert torch.count_nonzero(view) == 0, "a lent file still held the last evaluation's outputs"
                view.fill_(value + 1)
                del view
                seen.append(fd)
        # Which of the two comes back first depends on which scrub ends first; never a third file.
        assert len(set(seen)) == 2, f"expected two files in turn, got {seen}"
        assert seen[0] != seen[1]
    finally:
        slow.set()
        pool.close()


def _write_through_a_mapping(fd: int, offset: int, nbytes: int) -> None:
    """What a job can do that its file-size rlimit does not stop: stores through a shared mapping, one byte a page,
    unmapped after (the pages stay in the file and leave the writer's resident memory)."""
    import mmap

    window = mmap.mmap(fd, nbytes, flags=mmap.MAP_SHARED, offset=offset)
    for at in range(0, nbytes, mmap.PAGESIZE):
        window[at] = 120
    window.close()


def test_a_returned_file_keeps_only_the_pages_its_protocol_needed_and_frees_the_rest_before_its_block_ends():
    """Zeroed and kept whole, pages a job wrote anywhere in the file through a mapping stayed outside every limit
    between evaluations and were zeroed while the next one was timed (the third red team's h3). What the protocol put
    there (keep_pages) is still zeroed and kept for the next writer; the rest is freed at once."""
    pool = FilePool()
    try:
        with pool.lend(4 * CAPACITY) as fd:
            TensorFileWriter(fd).put(["out", 0], torch.full((256, 1024), 7.0))  # 1 MiB, what the protocol needed
            _write_through_a_mapping(fd, 3 * CAPACITY, 4 << 20)  # far past it
            assert _held_bytes(fd) >= 5 << 20
            pool.keep_pages(fd, 1 << 20)
        assert _held_bytes(fd) <= tensor_file.HUGE_PAGE, "the pages past the protocol's were not freed at once"
        pool.settle()
        assert (1 << 20) <= _held_bytes(fd) <= tensor_file.HUGE_PAGE, "the protocol's pages are kept for the next writer"
        with pool.lend(4 * CAPACITY) as again:
            assert again == fd
            whole = tensor_file._shared(again, 0, torch.uint8, [4 * CAPACITY])
            assert torch.count_nonzero(whole) == 0
            del whole
    finally:
        pool.close()


def test_a_file_whose_pages_cannot_be_freed_is_closed_not_lent_again(monkeypatch):
    """Without hole punching (a C library or file system that lacks it) a file is closed, which frees its pages as
    well, and the next evaluation gets a new one."""
    monkeypatch.setattr(file_pool, "_fallocate", None)
    pool = FilePool()
    try:
        with pool.lend(CAPACITY) as fd:
            inode = os.fstat(fd).st_ino
            _write_through_a_mapping(fd, CAPACITY // 2, 1 << 20)
        with pool.lend(CAPACITY) as again:
            assert os.fstat(again).st_ino != inode
            assert _held_bytes(again) == 0
    finally:
        pool.close()
