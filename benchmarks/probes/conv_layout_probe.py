"""Where a KernelBench convolution's time goes by memory layout: the problem's first convolution timed in PyTorch's
default (NCHW) layout, in channels-last with its input already converted, and the two conversions that a
channels-last plan inside an NCHW module pays (input to channels-last, output back). A quick look that decides whether
the built-in policy should plan convolutions channels-last (issue 23: level 2's conv epilogues at 0.43-0.46x of
torch.compile, whose layout optimisation runs them channels-last). Never evidence in a verdict.

Usage on the GPU box: PYTHONPATH=$PWD python3 benchmarks/probes/conv_layout_probe.py PROBLEM.py [more problems...]
Prints one JSON line per problem (milliseconds, CUDA events, 30 calls after a warm one).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from keyed_cuda_probe import device_ms  # noqa: E402 - CUDA-event timing, as every probe here does
from kb_problem import load_problem  # noqa: E402

CONVS = (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d,
         torch.nn.ConvTranspose1d, torch.nn.ConvTranspose2d, torch.nn.ConvTranspose3d)


def _last(t: torch.Tensor) -> torch.memory_format:
    return torch.channels_last if t.dim() == 4 else torch.channels_last_3d


def probe(path: Path) -> dict:
    _, model, inputs = load_problem(path, "layout_problem")
    conv = next(m for m in model.modules() if isinstance(m, CONVS))
    seen: list[torch.Tensor] = []
    hook = conv.register_forward_hook(lambda _m, args, _out: seen.append(args[0]))
    with torch.no_grad():
        model(*inputs)
        hook.remove()
        x = seen[0]
        row = {"problem": path.stem, "conv": type(conv).__name__, "input": list(x.shape),
               "tf32_cudnn": torch.backends.cudnn.allow_tf32, "model_ms": device_ms(lambda: model(*inputs)),
               "conv_nchw_ms": device_ms(lambda: conv(x))}
        if x.dim() in (4, 5):
            fmt = _last(x)
            xl = x.contiguous(memory_format=fmt)
            conv_l = type(conv)(conv.in_channels, conv.out_channels, conv.kernel_size, stride=conv.stride,
                                padding=conv.padding, dilation=conv.dilation, groups=conv.groups,
                                bias=conv.bias is not None).cuda().to(memory_format=fmt)
            conv_l.load_state_dict(conv.state_dict())
            out = conv_l(xl)
            row.update(conv_last_ms=device_ms(lambda: conv_l(xl)), to_last_ms=device_ms(lambda: x.contiguous(memory_format=fmt)),
                       back_ms=device_ms(lambda: out.contiguous()), out_is_last=out.is_contiguous(memory_format=fmt),
                       max_diff=float((out - conv(x)).abs().max()))
            torch.backends.cudnn.benchmark = True
            row["conv_nchw_benchmark_ms"] = device_ms(lambda: conv(x))
            row["conv_last_benchmark_ms"] = device_ms(lambda: conv_l(xl))
            torch.backends.cudnn.benchmark = False
    return row


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        try:
            print(json.dumps(probe(Path(arg))), flush=True)
        except Exception as exc:  # one problem's failure leaves the others' figures
            print(json.dumps({"problem": Path(arg).stem, "error": repr(exc)}), flush=True)
        torch.cuda.empty_cache()
