"""What the allowed GEMMs and convolutions call inside themselves, read with the ATen observer (aten_watch.py) armed
and no internals allowed: every name it prints is one that aten_watch.INTERNALS must hold (or the op is no anchor's).

Usage: python benchmarks/gpu/anchor_internals.py [--device cuda]   (CPU and GPU: the paths differ)
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from agent.engine.evaluate import aten_watch  # noqa: E402
from agent.engine.evaluate.config import CONV_OPS, GEMM_OPS  # noqa: E402


def cases(device: str, dtype: torch.dtype):
    """(name, thunk): each thunk's inputs made when the generator reaches it, outside the armed call."""
    def r(*shape, cl=False):
        t = torch.randn(*shape, device=device, dtype=dtype)
        return t.contiguous(memory_format=torch.channels_last) if cl else t
    a, b, v = r(64, 32), r(32, 48), r(32)
    yield "mm", _eager(lambda: torch.mm(a, b))
    yield "addmm", _eager(lambda: torch.addmm(r(48), a, b))
    yield "bmm", _eager(lambda: torch.bmm(r(4, 64, 32), r(4, 32, 48)))
    yield "baddbmm", _eager(lambda: torch.baddbmm(r(4, 64, 48), r(4, 64, 32), r(4, 32, 48)))
    yield "matmul 2d", _eager(lambda: a @ b)
    yield "matmul 3d@2d", _eager(lambda: r(4, 64, 32) @ b)
    yield "matmul 4d", _eager(lambda: r(2, 3, 64, 32) @ r(2, 3, 32, 48))
    yield "matmul broadcast", _eager(lambda: r(2, 1, 64, 32) @ r(3, 32, 48))
    yield "matmul vec", _eager(lambda: a @ v)
    yield "dot", _eager(lambda: torch.dot(v, v))
    yield "mv", _eager(lambda: torch.mv(a, v))
    yield "addmv", _eager(lambda: torch.addmv(r(64), a, v))
    yield "addbmm", _eager(lambda: torch.addbmm(r(64, 48), r(4, 64, 32), r(4, 32, 48)))
    yield "linear", _eager(lambda: F.linear(r(8, 32), r(48, 32), r(48)))
    yield "linear no bias", _eager(lambda: F.linear(r(8, 32), r(48, 32)))
    yield "linear 3d", _eager(lambda: F.linear(r(4, 8, 32), r(48, 32), r(48)))
    yield "linear transposed weight", _eager(lambda: F.linear(r(8, 32), r(32, 48).t(), r(48)))
    for bias in (True, False):
        bb = (lambda n: r(n)) if bias else (lambda n: None)
        yield f"conv1d bias={bias}", _eager(lambda: F.conv1d(r(2, 8, 33), r(16, 8, 3), bb(16), padding=1))
        yield f"conv2d bias={bias}", _eager(lambda: F.conv2d(r(2, 8, 17, 17), r(16, 8, 3, 3), bb(16), stride=2, padding=1))
        yield f"conv2d same bias={bias}", _eager(lambda: F.conv2d(r(2, 8, 17, 17), r(16, 8, 3, 3), bb(16), padding="same"))
        yield f"conv2d dilated bias={bias}", _eager(lambda: F.conv2d(r(2, 8, 17, 17), r(16, 8, 3, 3), bb(16), dilation=2))
        yield f"conv2d depthwise bias={bias}", _eager(lambda: F.conv2d(r(2, 8, 17, 17), r(8, 1, 3, 3), bb(8), groups=8))
        yield f"conv2d grouped bias={bias}", _eager(lambda: F.conv2d(r(2, 8, 17, 17), r(16, 4, 3, 3), bb(16), groups=2))
        yield f"conv2d channels_last bias={bias}", _eager(lambda: F.conv2d(r(2, 8, 17, 17, cl=True), r(16, 8, 3, 3, cl=True), bb(16)))
        yield f"conv2d 1x1 bias={bias}", _eager(lambda: F.conv2d(r(2, 8, 17, 17), r(16, 8, 1, 1), bb(16)))
        yield f"conv3d bias={bias}", _eager(lambda: F.conv3d(r(2, 4, 9, 9, 9), r(8, 4, 3, 3, 3), bb(8), padding=1))
        yield f"conv3d depthwise bias={bias}", _eager(lambda: F.conv3d(r(2, 4, 9, 9, 9), r(4, 1, 3, 3, 3), bb(4), groups=4))
        yield f"conv_transpose1d bias={bias}", _eager(lambda: F.conv_transpose1d(r(2, 8, 33), r(8, 16, 3), bb(16), stride=2))
        yield f"conv_transpose2d bias={bias}", _eager(lambda: F.conv_transpose2d(r(2, 8, 9, 9), r(8, 16, 3, 3), bb(16), stride=2, padding=1, output_padding=1))
        yield f"conv_transpose2d grouped bias={bias}", _eager(lambda: F.conv_transpose2d(r(2, 8, 9, 9), r(8, 8, 3, 3), bb(16), groups=2))
        yield f"conv_transpose3d bias={bias}", _eager(lambda: F.conv_transpose3d(r(2, 4, 5, 5, 5), r(4, 8, 3, 3, 3), bb(8), stride=2))


def _eager(build):
    """The call `build` makes, with its tensor arguments made now: build runs once here under a mode that keeps the
    arguments of the outermost call, which the thunk then repeats."""
    captured = {}

    class Keep(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if "func" not in captured and func.__name__ not in ("randn", "contiguous", "t"):
                captured.update(func=func, args=args, kwargs=kwargs or {})
            return func(*args, **(kwargs or {}))

    with Keep():
        build()
    return lambda: captured["func"](*captured["args"], **captured["kwargs"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    payload = {"aten_watch": aten_watch.built(None), "allowed_ops": sorted(GEMM_OPS | CONV_OPS), "cache_root": None}
    observer = aten_watch.start(payload, internals=frozenset())
    assert observer is not None
    dtypes = [torch.float32, torch.float16, torch.bfloat16] + ([torch.float64] if args.device == "cpu" else [])
    seen: dict[str, set[str]] = {}
    for tf32 in ([False, True] if args.device == "cuda" else [False]):
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = tf32
        for dtype in dtypes:
            for name, call in cases(args.device, dtype):
                observer.arm()
                try:
                    call()
                    error = None
                except RuntimeError as exc:  # a dtype a backend lacks (float16 convolutions on some CPUs)
                    error = str(exc).splitlines()[0][:80]
                finally:
                    observer.disarm()
                for finding in observer.check():
                    detail = finding["detail"].split("allow-list: ", 1)[-1]
                    seen.setdefault(detail, set()).add(f"{name} {dtype} tf32={tf32}")
                if error:
                    print(f"  ({name} {dtype}: {error})")
    print(f"device {args.device}, torch {torch.__version__}: {len(seen)} distinct findings")
    for detail, where in sorted(seen.items()):
        print(f"{detail}  <- {len(where)} cases, e.g. {sorted(where)[0]}")
    names = sorted({part.rsplit(' x', 1)[0] for detail in seen for part in detail.split(', ')})
    print("INTERNALS needed:", names)


if __name__ == "__main__":
    main()
