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
