"""The seed ops new problems are composed from, as data: what each one does to a shape, the line of
PyTorch it becomes, the module or parameter it creates in `__init__`, which ranks and dtypes it accepts.

A template's placeholders: `{m}` is the attribute the op creates in `__init__` (a module or a parameter),
`{y}` the extra forward input a binary op takes, any other name is one of the parameters its `pick`
function chose. Forward lines read and write the running tensor `x`; `residual` is the forward's first input.
"""
from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field

Shape = tuple[int, ...]
# `pick(shape, sizes, rng)` chooses the op's parameters for an input of `shape`, with the output shape
# under "out"; None when the op does not apply to that shape (wrong rank, an odd size, too large a result).
Pick = Callable[[Shape, "Sizes", random.Random], "dict[str, object] | None"]

FLOATS = ("float32", "float16", "bfloat16")
ANY_RANK = (1, 2, 3, 4)


@dataclass(frozen=True)
class Sizes:
    """The sizes problems are built from on one device: inputs by layout, widths ops may choose."""

    rows: tuple[tuple[int, ...], ...]  # (batch, features) inputs
    seqs: tuple[tuple[int, ...], ...]  # (batch, tokens, dim) inputs
    images: tuple[tuple[int, ...], ...]  # (batch, channels, height, width) inputs
    widths: tuple[int, ...]  # Linear output features
    channels: tuple[int, ...]  # Conv2d output channels
    max_elements: int  # no intermediate tensor larger than this


# Sizes for a small CPU: an elementwise op on the smallest input takes about 0.05 ms on two cores, a chain of
# five with a Linear or a Conv2d a few ms.
CPU_SIZES = Sizes(
    rows=((256, 512), (512, 512), (256, 1024), (512, 1024), (1024, 256), (128, 2048)),
    seqs=((8, 64, 128), (4, 128, 256), (16, 64, 128), (8, 32, 512)),
    images=((4, 8, 32, 32), (2, 16, 32, 32), (8, 16, 16, 16), (2, 4, 64, 64)),
    widths=(128, 256, 512),
    channels=(8, 16, 32),
    max_elements=1 << 21,
)
# Sizes that keep an H100 busy (tens to hundreds of MB per tensor); the runtime window is what keeps a chain.
CUDA_SIZES = Sizes(
    rows=((4096, 4096), (8192, 2048), (16384, 1024), (8192, 8192)),
    seqs=((16, 512, 1024), (32, 256, 2048), (8, 1024, 512)),
    images=((32, 64, 64, 64), (16, 32, 128, 128), (64, 16, 64, 64)),
    widths=(1024, 2048, 4096),
    channels=(32, 64, 128),
    max_elements=1 << 28,
)
SIZES = {"cpu": CPU_SIZES, "cuda": CUDA_SIZES}


@dataclass(frozen=True)
class SeedOp:
    name: str
    category: str  # what kind of work: activation, arithmetic, binary, reduction, normalization, matmul, conv, pool, layout, residual
    forward: str  # the forward line(s); see the module docstring for placeholders
    pick: Pick
    init: str = ""  # `self.{m} = ...` when the op owns weights or a module
    ranks: tuple[int, ...] = ANY_RANK
    dtypes: tuple[str, ...] = FLOATS
    extra_input: bool = False  # takes a second forward input shaped like x
    description: str = ""  # for the generated docstring; defaults to the name
    view: bool = False  # only moves data (a view of x): a chain never ends on one, its output would alias its input


def _numel(shape: Shape) -> int:
    return math.prod(shape)


def _fits(shape: Shape, sizes: Sizes) -> bool:
    return 0 < _numel(shape) <= sizes.max_elements


# --- parameter pickers: small and reused, so the catalogue below stays a table -----------------------


def same(shape: Shape, sizes: Sizes, rng: random.Random) -> dict[str, object] | None:
    return {"out": shape}


def scalar(values: tuple[float, ...]) -> Pick:
    def pick(shape: Shape, sizes: Sizes, rng: random.Random) -> dict[str, object] | None:
        return {"out": shape, "c": rng.choice(values)}
    return pick


def clamp_bounds(shape: Shape, sizes: Sizes, rng: random.Random) -> dict[str, object] | None:
    bound = rng.choice((0.5, 1.0, 2.0, 4.0))
    return {"out": shape, "lo": -bound, "hi": bound}


def last_dim(shape: Shape, sizes: Sizes, rng: random.Random) -> dict[str, object] | None:
    return {"out": shape, "last": shape[-1]} if shape[-1] > 1 else None


def drop_last(shape: Shape, sizes: Sizes, rng: random.Random) -> dict[str, object] | None:
    # Reducing the last dim of a 1-d tensor would leave a scalar: too little work to be a problem.
    return {"out": shape[:-1]} if len(shape) >= 2 and shape[-1] > 1 else None


def drop_dim1(shape: Shape, sizes: Sizes, rng: random.Random) -> dict[str, object] | None:
    return {"out": shape[:1] + shape[2:]} if len(shape) >= 3 and shape[1] > 1 else None


def halve_last(shape: Shape, sizes: Sizes, rng: random.Random) -> dict[str, object] | None:
    return {"out": shape[:-1] + (shape[-1] // 2,)} if shape[-1] % 2 == 0 and shape[-1] >= 4 else None


def linear_out(shape: Shape, sizes: Sizes, rng: random.Random) -> dict[str, object] | None:
    width = rng.choice(sizes.widths)
    out = shape[:-1] + (width,)
    return {"out": out, "last": shape[-1], "width": width} if _fits(out, sizes) else None


def self_scores(shape: Shape, sizes: Sizes, rng: random.Random) -> dict[str, object] | None:
    batch, tokens, dim = shape
    out = (batch, tokens, tokens)
    return {"out": out, "scale": round(1.0 / math.sqrt(dim), 6)} if _fits(out, sizes) else None


def conv_out(kernel: int, stride: int) -> Pick:
    def pick(shape: Shape, sizes: Sizes, rng: random.Random) -> dict[str, object] | None:
        n, c, h, w = shape
        if h < 2 * stride or w < 2 * stride:
            return None
        c_out = rng.choice(sizes.channels)
        pad = kernel // 2
        out = (n, c_out, (h + 2 * pad - kernel) // stride + 1, (w + 2 * pad - kernel) // stride + 1)
        return {"out": out, "c_in": c, "c_out": c_out} if _fits(out, sizes) else None
    return pick


def channels(shape: Shape, sizes: Sizes, rng: random.Random) -> dict[str, object] | None:
    return {"out": shape, "c": shape[1]}


def groups(shape: Shape, sizes: Sizes, rng: random.Random) -> dict[str, object] | None:
    options = [g for g in (2, 4, 8) if shape[1] % g == 0 and shape[1] > g]
    return {"out": shape, "c": shape[1], "g": rng.choice(options)} if options else None


def pool2(shape: Shape, sizes: Sizes, rng: random.Random) -> dict[str, object] | None:
    n, c, h, w = shape
    return {"out": (n, c, h // 2, w // 2)} if h >= 4 and w >= 4 else None


def upsample2(shape: Shape, sizes: Sizes, rng: random.Random) -> dict[str, object] | None:
    n, c, h, w = shape
    out = (n, c, 2 * h, 2 * w)
    return {"out": out} if _fits(out, sizes) else None


def global_pool(shape: Shape, sizes: Sizes, rng: random.Random) -> dict[str, object] | None:
    return {"out": shape[:2]} if shape[2] * shape[3] > 1 else None


def flatten1(shape: Shape, sizes: Sizes, rng: random.Random) -> dict[str, object] | None:
    return {"out": (shape[0], math.prod(shape[1:]))}


def transpose_last2(shape: Shape, sizes: Sizes, rng: random.Random) -> dict[str, object] | None:
    return {"out": shape[:-2] + (shape[-1], shape[-2])} if shape[-1] != shape[-2] else None


def split_heads(shape: Shape, sizes: Sizes, rng: random.Random) -> dict[str, object] | None:
    batch, features = shape
    options = [h for h in (4, 8, 16) if features % h == 0 and features // h >= 8]
    if not options:
        return None
    heads = rng.choice(options)
    return {"out": (batch, heads, features // heads), "b": batch, "h": heads, "d": features // heads}


def image_to_tokens(shape: Shape, sizes: Sizes, rng: random.Random) -> dict[str, object] | None:
    n, c, h, w = shape
    return {"out": (n, h * w, c)}


# --- the catalogue ----------------------------------------------------------------------------------

CATALOGUE: tuple[SeedOp, ...] = (
    # activations: elementwise, any shape
    SeedOp("relu", "activation", "x = torch.relu(x)", same),
    SeedOp("gelu", "activation", "x = F.gelu(x)", same),
    SeedOp("gelu_tanh", "activation", 'x = F.gelu(x, approximate="tanh")', same),
    SeedOp("sigmoid", "activation", "x = torch.sigmoid(x)", same),
    SeedOp("tanh", "activation", "x = torch.tanh(x)", same),
    SeedOp("silu", "activation", "x = F.silu(x)", same),
    SeedOp("softplus", "activation", "x = F.softplus(x)", same),
    SeedOp("elu", "activation", "x = F.elu(x)", same),
    SeedOp("mish", "activation", "x = F.mish(x)", same),
    SeedOp("hardswish", "activation", "x = F.hardswish(x)", same),
    SeedOp("leaky_relu", "activation", "x = F.leaky_relu(x, {c})", scalar((0.01, 0.1, 0.2))),
    # arithmetic: elementwise with constants; exp/log/sqrt in forms that stay finite on any input
    SeedOp("add_scalar", "arithmetic", "x = x + {c}", scalar((0.5, 1.0, -1.0, 2.0))),
    SeedOp("mul_scalar", "arithmetic", "x = x * {c}", scalar((0.5, 2.0, -1.5, 0.125))),
    SeedOp("clamp", "arithmetic", "x = torch.clamp(x, {lo}, {hi})", clamp_bounds),
    SeedOp("square", "arithmetic", "x = x * x", same),
    SeedOp("abs", "arithmetic", "x = torch.abs(x)", same),
    SeedOp("exp_clamped", "arithmetic", "x = torch.exp(torch.clamp(x, max=8.0))", same, description="exp of x clamped at 8"),
    SeedOp("log1p_abs", "arithmetic", "x = torch.log1p(torch.abs(x))", same, description="log(1 + |x|)"),
    SeedOp("sqrt_abs", "arithmetic", "x = torch.sqrt(torch.abs(x) + 1e-6)", same, description="sqrt(|x|)"),
    SeedOp("bias_add", "arithmetic", "x = x + self.{m}", last_dim, init="self.{m} = nn.Parameter(torch.randn({last}) * 0.1)",
           description="a learned bias over the last dim"),
    SeedOp("scale_mul", "arithmetic", "x = x * self.{m}", last_dim, init="self.{m} = nn.Parameter(torch.rand({last}) + 0.5)",
           description="a learned scale over the last dim"),
    SeedOp("channel_bias", "arithmetic", "x = x + self.{m}", channels, ranks=(4,),
           init="self.{m} = nn.Parameter(torch.randn({c}, 1, 1) * 0.1)", description="a learned per-channel bias"),
    # binary: a second input shaped like x
    SeedOp("add_input", "binary", "x = x + {y}", same, extra_input=True, description="add a second input"),
    SeedOp("mul_input", "binary", "x = x * {y}", same, extra_input=True, description="multiply by a second input"),
    SeedOp("maximum_input", "binary", "x = torch.maximum(x, {y})", same, extra_input=True, description="max with a second input"),
    SeedOp("sigmoid_gate", "binary", "x = x * torch.sigmoid({y})", same, extra_input=True, description="gate by sigmoid of a second input"),
    # reductions and row-wise ops
    SeedOp("sum_last", "reduction", "x = torch.sum(x, dim=-1)", drop_last, ranks=(2, 3, 4), description="sum over the last dim"),
    SeedOp("mean_last", "reduction", "x = torch.mean(x, dim=-1)", drop_last, ranks=(2, 3, 4), description="mean over the last dim"),
    SeedOp("amax_last", "reduction", "x = torch.amax(x, dim=-1)", drop_last, ranks=(2, 3, 4), description="max over the last dim"),
    SeedOp("logsumexp_last", "reduction", "x = torch.logsumexp(x, dim=-1)", drop_last, ranks=(2, 3, 4),
           description="logsumexp over the last dim"),
    SeedOp("sum_dim1", "reduction", "x = torch.sum(x, dim=1)", drop_dim1, ranks=(3, 4), description="sum over dim 1"),
    SeedOp("softmax", "reduction", "x = torch.softmax(x, dim=-1)", last_dim, ranks=(2, 3, 4), description="softmax over the last dim"),
    SeedOp("log_softmax", "reduction", "x = F.log_softmax(x, dim=-1)", last_dim, ranks=(2, 3, 4),
           description="log_softmax over the last dim"),
    SeedOp("cumsum", "reduction", "x = torch.cumsum(x, dim=-1)", last_dim, ranks=(2, 3, 4), description="cumulative sum over the last dim"),
    SeedOp("center", "reduction", "x = x - torch.mean(x, dim=-1, keepdim=True)", last_dim, ranks=(2, 3, 4),
           description="subtract the row mean"),
    SeedOp("l2_normalize", "reduction", "x = F.normalize(x, dim=-1)", last_dim, ranks=(2, 3, 4), description="L2-normalize rows"),
    # normalization with weights
    SeedOp("layer_norm", "normalization", "x = self.{m}(x)", last_dim, ranks=(2, 3, 4), init="self.{m} = nn.LayerNorm({last})"),
    SeedOp("rms_norm", "normalization", "x = self.{m}(x)", last_dim, ranks=(2, 3, 4), init="self.{m} = nn.RMSNorm({last}, eps=1e-6)"),
    SeedOp("rms_scale", "normalization", "x = x * torch.rsqrt(torch.mean(x * x, dim=-1, keepdim=True) + 1e-6)", last_dim,
           ranks=(2, 3, 4), description="RMS-normalize rows (no weight)"),
    SeedOp("group_norm", "normalization", "x = self.{m}(x)", groups, ranks=(4,), init="self.{m} = nn.GroupNorm({g}, {c})"),
    # matmul
    SeedOp("linear", "matmul", "x = self.{m}(x)", linear_out, ranks=(2, 3), init="self.{m} = nn.Linear({last}, {width})"),
    SeedOp("linear_nobias", "matmul", "x = self.{m}(x)", linear_out, ranks=(2, 3),
           init="self.{m} = nn.Linear({last}, {width}, bias=False)", description="linear without bias"),
    SeedOp("self_scores", "matmul", "x = torch.matmul(x, x.transpose(1, 2)) * {scale}", self_scores, ranks=(3,),
           description="scaled x @ x^T per batch"),
    # convolution and pooling
    SeedOp("conv3x3", "conv", "x = self.{m}(x)", conv_out(3, 1), ranks=(4,), init="self.{m} = nn.Conv2d({c_in}, {c_out}, 3, padding=1)"),
    SeedOp("conv1x1", "conv", "x = self.{m}(x)", conv_out(1, 1), ranks=(4,), init="self.{m} = nn.Conv2d({c_in}, {c_out}, 1)"),
    SeedOp("conv3x3_stride2", "conv", "x = self.{m}(x)", conv_out(3, 2), ranks=(4,),
           init="self.{m} = nn.Conv2d({c_in}, {c_out}, 3, stride=2, padding=1)"),
    SeedOp("depthwise3x3", "conv", "x = self.{m}(x)", channels, ranks=(4,),
           init="self.{m} = nn.Conv2d({c}, {c}, 3, padding=1, groups={c})"),
    SeedOp("max_pool2", "pool", "x = F.max_pool2d(x, 2)", pool2, ranks=(4,)),
    SeedOp("avg_pool2", "pool", "x = F.avg_pool2d(x, 2)", pool2, ranks=(4,)),
    SeedOp("global_avg_pool", "pool", "x = torch.mean(x, dim=(2, 3))", global_pool, ranks=(4,), description="mean over H and W"),
    SeedOp("upsample2", "pool", 'x = F.interpolate(x, scale_factor=2, mode="nearest")', upsample2, ranks=(4,),
           description="nearest upsampling by 2"),
    # layout
    SeedOp("flatten", "layout", "x = torch.flatten(x, 1)", flatten1, ranks=(3, 4), view=True),
    SeedOp("transpose", "layout", "x = x.transpose(-1, -2)", transpose_last2, ranks=(2, 3, 4), view=True,
           description="swap the last two dims"),
    SeedOp("split_heads", "layout", "x = x.reshape({b}, {h}, {d})", split_heads, ranks=(2,), view=True,
           description="split features into heads"),
    SeedOp("image_to_tokens", "layout", "x = x.flatten(2).transpose(1, 2)", image_to_tokens, ranks=(4,), view=True,
           description="(N, C, H, W) to (N, H*W, C)"),
    SeedOp("glu", "layout", "x = F.glu(x, dim=-1)", halve_last, description="GLU over the last dim"),
    SeedOp("swiglu", "layout", "a, b = x.chunk(2, dim=-1)\nx = F.silu(a) * b", halve_last, description="SwiGLU over the last dim"),
    # residual: the forward's first input added back (only where x has its shape again)
    SeedOp("residual", "residual", "x = x + residual", same, description="add the input back"),
)

BY_NAME = {op.name: op for op in CATALOGUE}
CATEGORIES = tuple(dict.fromkeys(op.category for op in CATALOGUE))


@dataclass
class Step:
    """One op of a chain with the parameters picked for it."""

    op: SeedOp
    params: dict[str, object] = field(default_factory=dict)
    shape_in: Shape = ()

    @property
    def shape_out(self) -> Shape:
        return self.params["out"]  # type: ignore[return-value]
