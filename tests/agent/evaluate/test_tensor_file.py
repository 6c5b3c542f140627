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
