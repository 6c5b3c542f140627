"""Comparing a candidate's outputs with the reference's, with dtype-aware tolerances."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

# (rtol, atol as a fraction of the reference's largest finite magnitude). The absolute part is
# scaled so that outputs of magnitude 1e-6 are not "passed" by zeros under a fixed atol.
_TOLERANCES = {
    torch.float64: (1e-7, 1e-9),
    torch.float32: (1e-4, 1e-5),
    torch.float16: (1e-2, 1e-3),
    torch.bfloat16: (2e-2, 4e-3),
}


@dataclass
class Comparison:
    passed: bool
    max_abs_error: float
    max_rel_error: float
    atol: float
    rtol: float
    mismatched: int
    numel: int
    note: str = ""


def tolerances(dtype: torch.dtype, rtol: float | None, atol_scale: float | None) -> tuple[float, float]:
    default_rtol, default_scale = _TOLERANCES.get(dtype, (0.0, 0.0))
    return (default_rtol if rtol is None else rtol, default_scale if atol_scale is None else atol_scale)


def compare_tensor(ref: torch.Tensor, out: torch.Tensor, rtol: float | None = None, atol_scale: float | None = None,
                   piece: int | None = None) -> Comparison:
    """`out` may live elsewhere than `ref` (the candidate's outputs, mapped from the outputs file on the host): it is
    read `piece` elements at a time onto ref's device (a copy: what is compared cannot change under the
    comparison), so that comparing a call's outputs costs the device one piece, not another output."""
    if out.shape != ref.shape or out.dtype != ref.dtype:
        return Comparison(False, float("inf"), float("inf"), 0.0, 0.0, ref.numel(), ref.numel(),
                          f"expected shape {tuple(ref.shape)} {ref.dtype}, got {tuple(out.shape)} {out.dtype}")
    r_flat, o_flat = ref.detach().reshape(-1), out.detach().reshape(-1)
    step = max(1, piece or r_flat.numel())
    pieces = range(0, r_flat.numel(), step)

    def other(i: int) -> torch.Tensor:
        return o_flat[i:i + step].to(ref.device, copy=True)

    if not ref.is_floating_point() and not ref.is_complex():
        wrong = sum(int((r_flat[i:i + step] != other(i)).sum()) for i in pieces)
        return Comparison(wrong == 0, float(wrong > 0), float(wrong > 0), 0.0, 0.0, wrong, ref.numel())
    r_tol, scale = tolerances(ref.dtype, rtol, atol_scale)
    # float32 arithmetic is exact enough to judge tolerances of 1e-4 and up, and half the memory
    # traffic of float64 on outputs of hundreds of megabytes; float64 outputs stay float64.
    work = torch.float64 if ref.dtype == torch.float64 else torch.float32
    magnitude, any_finite, all_finite = 0.0, False, True
    for i in pieces:  # the absolute tolerance scales with the reference's largest finite magnitude, over all of it
        r = r_flat[i:i + step].to(work)
        finite = torch.isfinite(r)
        if bool(finite.any()):
            any_finite = True
            magnitude = max(magnitude, float(r.abs().masked_fill_(~finite, 0.0).max()))
        all_finite = all_finite and bool(finite.all())
    atol = scale * magnitude
    mismatched, max_abs, max_rel = 0, 0.0, 0.0
    for i in pieces:
        bad, top_abs, top_rel = _errors(r_flat[i:i + step].to(work), other(i).to(work), atol, r_tol)
        mismatched += bad
        max_abs, max_rel = _worst(max_abs, top_abs), _worst(max_rel, top_rel)
    note = ""
    if not all_finite and not any_finite:
        note = "the reference output is not finite anywhere: this trial checks only non-finite positions"
    elif magnitude == 0.0:
        note = "the reference output is all zeros"
    return Comparison(mismatched == 0, max_abs, max_rel, atol, r_tol, mismatched, ref.numel(), note)


def _worst(a: float, b: float) -> float:
    """The larger, NaN winning (a NaN error must show)."""
    return b if math.isnan(b) or b > a else a


def _errors(r: torch.Tensor, o: torch.Tensor, atol: float, r_tol: float) -> tuple[int, float, float]:
    """One piece: (elements out of tolerance, max abs error, max rel error). `o` is a copy of the candidate's, free
    to overwrite."""
    if r.numel() == 0:
        return 0, 0.0, 0.0
    finite = torch.isfinite(r)
    if bool(finite.all()):  # the common case: no masks, in-place arithmetic
        special_bad = 0
        diff = o.sub_(r).abs_()
        mask = None
    else:
        # Where the reference is NaN or infinite, the candidate must be the same non-finite value.
        special_ok = (torch.isnan(r) & torch.isnan(o)) | (r == o)
        special_bad = int((~finite & ~special_ok).sum())
        diff = (o - r).abs_().masked_fill_(~finite, 0.0)
        mask = finite
    bound = r.abs().mul_(r_tol).add_(atol)
    bad = ~(diff <= bound)  # NaN in the candidate fails this too
    if mask is not None:
        bad &= mask
    max_abs = float(diff.max())  # NaN propagates through max
    rel = diff.div_(bound.sub_(atol).div_(r_tol).clamp_min_(max(atol, 1e-30))) if r_tol > 0 else diff
    return int(bad.sum()) + special_bad, max_abs, float(rel.max())


def compare_outputs(refs: list[torch.Tensor], outs: list[torch.Tensor], rtol: float | None, atol_scale: float | None,
                    piece: int | None = None) -> Comparison:
    """All outputs of one call, summarised as the worst of them."""
    if len(refs) != len(outs):
        return Comparison(False, float("inf"), float("inf"), 0.0, 0.0, 0, 0,
                          f"expected {len(refs)} output tensor(s), got {len(outs)}")
    parts = [compare_tensor(r, o, rtol, atol_scale, piece) for r, o in zip(refs, outs)]
    worst = max(parts, key=lambda c: (not c.passed, c.max_rel_error))
    return Comparison(
        passed=all(p.passed for p in parts),
        max_abs_error=max(p.max_abs_error for p in parts),
        max_rel_error=max(p.max_rel_error for p in parts),
        atol=worst.atol, rtol=worst.rtol,
        mismatched=sum(p.mismatched for p in parts), numel=sum(p.numel for p in parts),
        note="; ".join(p.note for p in parts if p.note),
    )
