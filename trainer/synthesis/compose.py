"""Chains of seed ops with their shapes tracked, rendered as KernelBench-format modules
(`class Model(nn.Module)`, `get_inputs()`, `get_init_inputs()`; DESIGN §3)."""
from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

from trainer.synthesis.catalogue import CATALOGUE, CATEGORIES, Shape, Sizes, Step

# The names of the input's dims by layout: they become the module's size constants.
LAYOUT_DIMS = {
    "rows": ("BATCH", "FEATURES"),
    "seqs": ("BATCH", "TOKENS", "DIM"),
    "images": ("BATCH", "CHANNELS", "HEIGHT", "WIDTH"),
}


@dataclass
class Chain:
    layout: str  # rows, seqs or images: the first input's layout
    shape: Shape  # the first input's shape
    steps: list[Step]
    dtype: str = "float32"

    @property
    def ops(self) -> list[str]:
        return [s.op.name for s in self.steps]

    @property
    def out_shape(self) -> Shape:
        return self.steps[-1].shape_out


def random_chain(rng: random.Random, sizes: Sizes, min_ops: int, max_ops: int, dtype: str = "float32") -> Chain | None:
    """A chain of min_ops..max_ops ops, each applicable to the shape the previous one left; None when
    the walk got stuck before min_ops (rare: most ops apply to most shapes)."""
    layout = rng.choice(tuple(LAYOUT_DIMS))
    shape: Shape = tuple(rng.choice(getattr(sizes, layout)))
    chain = Chain(layout, shape, [], dtype)
    length = rng.randint(min_ops, max_ops)
    for i in range(length):
        step = _next_step(rng, sizes, chain, shape, last=i == length - 1)
        if step is None:
            break
        chain.steps.append(step)
        shape = step.shape_out
    return chain if len(chain.steps) >= min_ops else None


def _next_step(rng: random.Random, sizes: Sizes, chain: Chain, shape: Shape, last: bool) -> Step | None:
    """An op applicable to `shape`; the last one computes something (a view there would make the output
    alias the input, or the last op pointless)."""
    previous = chain.steps[-1].op.name if chain.steps else None
    # A category first, then an op in it: otherwise the many activations would crowd out convs and norms.
    categories = list(CATEGORIES)
    rng.shuffle(categories)
    for category in categories:
        ops = [op for op in CATALOGUE if op.category == category and len(shape) in op.ranks
               and chain.dtype in op.dtypes and op.name != previous and not (last and op.view)]
        if category == "residual" and (not chain.steps or shape != chain.shape):
            continue  # a residual needs an op before it and x back at the input's shape
        rng.shuffle(ops)
        for op in ops:
            params = op.pick(shape, sizes, rng)
            if params is not None:
                return Step(op, params, shape)
    return None


def render(chain: Chain) -> str:
    """The chain as a problem module. Sizes of the first input are named constants; the rest are literals."""
    dims = LAYOUT_DIMS[chain.layout]
    init_lines: list[str] = []
    forward_lines: list[str] = []
    extra: list[tuple[str, Shape]] = []
    uses_residual = any(s.op.name == "residual" for s in chain.steps)
    for i, step in enumerate(chain.steps):
        attr = f"{step.op.name}{i}"
        fields = {k: v for k, v in step.params.items() if k != "out"}
        if step.op.extra_input:
            extra.append((f"y{i}", step.shape_in))
            fields["y"] = f"y{i}"
        if step.op.init:
            init_lines.append(step.op.init.format(m=attr, **fields))
        forward_lines.extend(step.op.forward.format(m=attr, **fields).splitlines())
    args = "".join(f", {name}: torch.Tensor" for name, _ in extra)
    body = (["residual = x"] if uses_residual else []) + forward_lines + ["return x"]
    init = ["super().__init__()"] + init_lines
    shape_text = " x ".join(str(d) for d in chain.shape)
    out_text = " x ".join(str(d) for d in chain.out_shape) or "a scalar"
    inputs = [f"torch.randn({', '.join(dims)}{_dtype_arg(chain.dtype)})"]
    inputs += [f"torch.randn({', '.join(str(d) for d in shape)}{_dtype_arg(chain.dtype)})" for _, shape in extra]
    lines = [
        f'"""Synthetic problem: {describe(chain)}.',
        "",
        f"Input {shape_text} ({chain.layout}, {chain.dtype}), output {out_text}. Composed from seed ops by",
        'trainer.synthesis (the catalogue in trainer/synthesis/catalogue.py)."""',
        "import torch",
        "import torch.nn as nn",
        "import torch.nn.functional as F",
        "",
        f"{', '.join(dims)} = {', '.join(str(d) for d in chain.shape)}",
        "",
        "",
        "class Model(nn.Module):",
        "    def __init__(self):",
        *[f"        {line}" for line in init],
        "",
        f"    def forward(self, x: torch.Tensor{args}) -> torch.Tensor:",
        *[f"        {line}" for line in body],
        "",
        "",
        "def get_inputs():",
        f"    return [{', '.join(inputs)}]",
        "",
        "",
        "def get_init_inputs():",
        "    return []",
        "",
    ]
    return "\n".join(lines)


def describe(chain: Chain) -> str:
    return " -> ".join(step.op.description or step.op.name for step in chain.steps)


def problem_name(chain: Chain, source: str) -> str:
    """Readable and unique: the op names, then a short hash of the source (two chains of the same ops
    with other sizes are near-duplicates and never both kept, but the hash keeps names unique anyway)."""
    digest = hashlib.sha256(source.encode("utf-8")).hexdigest()[:8]
    return f"synth_{'_'.join(chain.ops)}_{digest}"


def _dtype_arg(dtype: str) -> str:
    return "" if dtype == "float32" else f", dtype=torch.{dtype}"
