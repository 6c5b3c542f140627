"""PyTorch's module-level functions as they were when the harness was imported, for the harness's own calls in the
candidate's job.

The harness calls PyTorch in its own time there, between the candidate's calls (its inputs, its projections, its
canaries), where no record judges. A function of PyTorch's replaced in its module's namespace ran the candidate's code
right there: `vars(torch)["zeros"]` and `["ones"]`, replaced at import, filled the output with F.silu(x) + bias when
the projection or the census's canary called them (the ninth red team's c15b, accepted with no kernel). Watching the
modules' assignments does not do: a write through the namespace passes it, and Dynamo's and inductor's own imports
replace functions there (torch.manual_seed). So the harness's modules on that path name PyTorch through a copy of its
main namespaces taken here: the same function objects, found in a namespace the candidate's code is not handed. What
those functions call in turn is PyTorch's own business (its internals replaced are code written against it).
"""
from __future__ import annotations

import types

import torch as _torch


def _frozen(module: types.ModuleType, subs: tuple[str, ...] = ()) -> types.ModuleType:
    copy = types.ModuleType(module.__name__, module.__doc__)
    copy.__dict__.update(vars(module))
    for sub in subs:
        setattr(copy, sub, _frozen(getattr(module, sub)))
    return copy


torch = _frozen(_torch, subs=("cuda",))
