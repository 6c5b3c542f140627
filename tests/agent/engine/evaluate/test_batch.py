"""A timed batch's pieces inside a job (agent/engine/evaluate/batch.py)."""
import torch

from agent.engine.evaluate.batch import as_list


def test_outputs_are_read_through_the_base_types_slots_not_the_candidates_methods():
    # A subclass's __iter__ ran F.silu in the harness's own time, after the call (the ninth red team's c4).
    ran: list[str] = []

    class Lazy(tuple):
        def __iter__(self):
            ran.append("__iter__")
            yield torch.ones(1)

        def __len__(self):
            ran.append("__len__")
            return 1

    class LazyList(list):
        def __iter__(self):
            ran.append("__iter__")
            return iter([])

    y = torch.zeros(2)
    assert as_list(Lazy()) == [] and as_list(Lazy((y,)))[0] is y
    assert as_list(LazyList([y]))[0] is y
    assert ran == []
    assert as_list(y)[0] is y and len(as_list((y, y))) == 2 and as_list([y]) == [y]
