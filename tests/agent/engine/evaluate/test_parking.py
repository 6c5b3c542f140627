"""The sequential fallback's shelf (agent/engine/evaluate/parking.py): parked values come back unchanged, and a
job's parks reuse one page-locked host buffer per slot instead of fresh host memory each time."""
import pytest
import torch

from agent.engine.evaluate.parking import Shelf

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: the shelf holds device state")


def test_on_the_cpu_nothing_is_copied_and_values_pass_through():
    shelf = Shelf()
    x = torch.randn(8, 4)
    parked = shelf.park_sets("inputs", [[x, 3, "mean"]])
    assert parked[0][0] is x and parked[0][1:] == [3, "mean"]
    assert shelf.held_bytes == 0


@cuda
def test_parked_sets_come_back_to_the_device_bit_for_bit():
    shelf = Shelf()
    sets = [[torch.randn(1 << 20, device="cuda"), 7], [torch.randint(0, 9, (3, 5), device="cuda"),
                                                        torch.randn(4, 6, device="cuda").t()]]
    parked = shelf.park_sets("inputs", sets)
    Shelf.settle("cuda")
    assert parked[0][0].device.type == "cpu" and parked[0][0].is_pinned()  # 4 MiB: page-locked
    back = Shelf.unpark_sets(parked, "cuda")
    Shelf.settle("cuda")
    assert back[0][1] == 7
    for got, was in ((back[0][0], sets[0][0]), (back[1][0], sets[1][0]), (back[1][1], sets[1][1])):
        assert got.is_cuda and got.dtype == was.dtype and got.shape == was.shape and torch.equal(got, was)


@cuda
def test_every_park_of_a_job_reuses_the_slots_buffers():
    shelf = Shelf()
    first = [[torch.randn(1 << 22, device="cuda")]]
    pointer = shelf.park_sets("kept", first)[0][0].data_ptr()
    Shelf.settle("cuda")
    held = shelf.held_bytes
    second = [[torch.randn(1 << 22, device="cuda")]]
    again = shelf.park_sets("kept", second)
    Shelf.settle("cuda")
    assert again[0][0].data_ptr() == pointer and shelf.held_bytes == held == 16 << 20
    assert torch.equal(again[0][0], second[0][0].cpu())
