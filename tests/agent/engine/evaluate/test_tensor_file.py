import os

import pytest
import torch

from agent.engine.evaluate import tensor_file
from agent.engine.evaluate.tensor_file import TensorFileError, TensorFileReader, TensorFileWriter


@pytest.fixture
def fd():
    descriptor = tensor_file.create(1 << 20, "test")
    yield descriptor
    os.close(descriptor)


def test_it_hands_back_every_tensor_bit_for_bit_in_order(fd):
    writer = TensorFileWriter(fd)
    tensors = [torch.randn(3, 5), torch.arange(7, dtype=torch.int64), torch.randn(4).to(torch.bfloat16),
               torch.empty(0, 3), torch.randn(6, 4).t()]  # the last is not contiguous
    for j, t in enumerate(tensors):
        writer.put(["trial", 0, j], t)
    reader = TensorFileReader(fd, writer.layout)
    got = reader.tensors("trial", 0)
    assert len(got) == len(tensors)
    for want, have in zip(tensors, got):
        assert have.dtype == want.dtype and have.shape == want.shape and torch.equal(have, want)
    assert reader.tensors("trial", 1) == []


def test_writes_to_what_it_read_do_not_reach_the_file(fd):
    writer = TensorFileWriter(fd)
    writer.put(["x"], torch.ones(1024))
    first = TensorFileReader(fd, writer.layout).get(("x",))
    first.zero_()
    assert torch.equal(TensorFileReader(fd, writer.layout).get(("x",)), torch.ones(1024))


@pytest.mark.parametrize("tamper, message", [
    (lambda e: e.update(offset=e["offset"] + 1 << 30), "outside"),
    (lambda e: e.update(nbytes=e["nbytes"] * 2), "claims"),
    (lambda e: e.update(shape=[-4, -256]), "negative"),
    (lambda e: e.update(dtype="object"), "malformed"),
    (lambda e: e.update(key=[["nested"]]), "not a list of strings"),
])
def test_it_refuses_a_layout_that_does_not_describe_the_file(fd, tamper, message):
    writer = TensorFileWriter(fd)
    writer.put(["x"], torch.ones(1024))
    entry = dict(writer.layout[0])
    tamper(entry)
    with pytest.raises(TensorFileError, match=message):
        TensorFileReader(fd, [entry])


@pytest.mark.parametrize("size", [0, 4096, 2 << 20])
def test_a_job_can_neither_shrink_nor_grow_the_file_it_was_handed(fd, size):
    # The reference's job reads while the candidate's still runs: a shrunk file would SIGBUS the reader.
    with pytest.raises(PermissionError):
        os.ftruncate(fd, size)
    assert os.fstat(fd).st_size == 1 << 20


def test_entries_added_later_are_read_and_the_first_entry_for_a_key_wins(fd):
    writer = TensorFileWriter(fd)
    writer.put(["trial", 0, 0], torch.ones(8))
    reader = TensorFileReader(fd)
    assert reader.add(writer.layout) == [("trial", 0, 0)]
    writer.put(["trial", 1, 0], torch.full((8,), 2.0))
    writer.put(["trial", 0, 0], torch.zeros(8))  # a second claim for a key already taken
    assert reader.add(writer.layout[1:]) == [("trial", 1, 0)]
    assert torch.equal(reader.get(("trial", 0, 0)), torch.ones(8))
    assert torch.equal(reader.get(("trial", 1, 0)), torch.full((8,), 2.0))


def test_what_the_reader_compares_does_not_change_when_the_writer_writes_again(fd):
    writer = TensorFileWriter(fd)
    writer.put(["trial", 0, 0], torch.ones(1024))
    got = TensorFileReader(fd, writer.layout).device_tensors("cpu", "trial", 0)
    tensor_file._shared(fd, 0, torch.float32, [1024]).zero_()  # the still-running writer overwrites its output
    assert torch.equal(got[0], torch.ones(1024))


def test_it_refuses_outputs_beyond_the_capacity_the_parent_gave(fd):
    writer = TensorFileWriter(fd)
    writer.put(["small"], torch.ones(1024))
    with pytest.raises(TensorFileError, match="exceed"):
        writer.put(["big"], torch.ones(1 << 20))


def test_a_file_holds_what_its_writer_put_there_and_a_layout_allows_only_the_entries_a_reader_reads(fd):
    """The parent's bound on what a job may hold in a lent file (session._hold_files_to_the_protocol): what the writer
    put there fits what its layout needs; entries no reader's tensors("out") reads (another key, or past a gap in the
    outputs' positions) make no room, so a job cannot announce room for pages it keeps for itself."""
    writer = TensorFileWriter(fd)
    writer.put(["out", 0], torch.ones(3000))
    writer.put(["out", 1], torch.ones(10))
    assert 0 < tensor_file.held_bytes(fd) <= tensor_file.needed_bytes(writer.layout, 1 << 20, "out")
    out0 = tensor_file.needed_bytes(writer.layout[:1], 1 << 20, "out")
    room = [{"key": ["junk", 0], "shape": [65536], "dtype": "torch.float32", "offset": 0, "nbytes": 1 << 18},
            {"key": ["out", 2], "shape": [65536], "dtype": "torch.float32", "offset": 0, "nbytes": 1 << 18}]
    assert tensor_file.needed_bytes(writer.layout[:1] + room, 1 << 20, "out") == out0
    assert tensor_file.needed_bytes([{"key": ["out", 0], "offset": -4096}], 1 << 20, "out") == 0, "not a layout"
    assert tensor_file.needed_bytes([], 1 << 20) == 0


def test_device_tensors_hand_back_the_stored_values_on_the_requested_device(fd):
    writer = TensorFileWriter(fd)
    tensors = [torch.randn(64, 64), torch.empty(0, 2)]
    for j, t in enumerate(tensors):
        writer.put(["trial", 0, j], t)
    got = TensorFileReader(fd, writer.layout).device_tensors("cpu", "trial", 0)
    assert [g.shape for g in got] == [t.shape for t in tensors] and torch.equal(got[0], tensors[0])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: page-locking is for device copies")
def test_large_gpu_outputs_cross_through_locked_pages_bit_for_bit():
    from agent.engine.evaluate.page_lock import page_locked

    descriptor = tensor_file.create(64 << 20, "test-gpu")
    try:
        out = torch.randn(4096, 1024, device="cuda")  # 16 MiB: above the size where locking pays
        writer = TensorFileWriter(descriptor)
        writer.put(["trial", 0, 0], out)
        reader = TensorFileReader(descriptor, writer.layout)
        view = tensor_file._shared(descriptor, 0, torch.float32, [4096, 1024])
        with page_locked(view) as locked:
            assert locked, "the driver refused to lock a shared memfd mapping"
        got = reader.device_tensors("cuda", "trial", 0)
        assert got[0].is_cuda and torch.equal(got[0], out)
        torch.cuda.synchronize()  # no CUDA error was left behind by the registrations
    finally:
        os.close(descriptor)
