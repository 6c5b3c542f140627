import os

import pytest
import torch

from agent.evaluate import tensor_file
from agent.evaluate.tensor_file import TensorFileError, TensorFileReader, TensorFileWriter


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


def test_it_refuses_outputs_beyond_the_capacity_the_parent_gave(fd):
    writer = TensorFileWriter(fd)
    writer.put(["small"], torch.ones(1024))
    with pytest.raises(TensorFileError, match="exceed"):
        writer.put(["big"], torch.ones(1 << 20))


def test_device_tensors_hand_back_the_stored_values_on_the_requested_device(fd):
    writer = TensorFileWriter(fd)
    tensors = [torch.randn(64, 64), torch.empty(0, 2)]
    for j, t in enumerate(tensors):
        writer.put(["trial", 0, j], t)
    got = TensorFileReader(fd, writer.layout).device_tensors("cpu", "trial", 0)
    assert [g.shape for g in got] == [t.shape for t in tensors] and torch.equal(got[0], tensors[0])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: page-locking is for device copies")
def test_large_gpu_outputs_cross_through_locked_pages_bit_for_bit():
    from agent.evaluate.page_lock import page_locked

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
