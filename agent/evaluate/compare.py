"""Comparing a candidate's outputs with the reference's, with dtype-aware tolerances."""
from __future__ import annotations

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


def compare_tensor(ref: torch.Tensor, out: torch.Tensor, rtol: float | None = None, atol_scale: float | None = None) -> Comparison:
    if out.shape != ref.shape or out.dtype != ref.dtype:
        return Comparison(False, float("inf"), float("inf"), 0.0, 0.0, ref.numel(), ref.numel(),
                          f"expected shape {tuple(ref.shape)} {ref.dtype}, got {tuple(out.shape)} {out.dtype}")
    if not ref.is_floating_point() and not ref.is_complex():
        wrong = int((ref != out).sum())
        return Comparison(wrong == 0, float(wrong > 0), float(wrong > 0), 0.0, 0.0, wrong, ref.numel())
    r_tol, scale = tolerances(ref.dtype, rtol, atol_scale)
    # float32 arithmetic is exact enough to judge tolerances of 1e-4 and up, and half the memory
    # traffic of float64 on outputs of hundreds of megabytes; float64 outputs stay float64.
    work = torch.float64 if ref.dtype == torch.float64 else torch.float32
    r, o = ref.detach().to(work), out.detach().to(work)
    r_abs = r.abs()
    finite = torch.isfinite(r)
    all_finite = bool(finite.all())
    if all_finite:  # the common case: no masks, in-place arithmetic (outputs can be 64M elements)
        magnitude = float(r_abs.max()) if r.numel() else 0.0
        special_bad = 0
        diff = o.sub_(r).abs_() if o.data_ptr() != out.data_ptr() else (o - r).abs_()
    else:
        # Where the reference is NaN or infinite, the candidate must be the same non-finite value.
        special_ok = (torch.isnan(r) & torch.isnan(o)) | (r == o)
        special_bad = int((~finite & ~special_ok).sum())
        magnitude = float(r_abs[finite].max()) if bool(finite.any()) else 0.0
        diff = (o - r).abs_().masked_fill_(~finite, 0.0)
    atol = scale * magnitude
    bound = r_abs.mul_(r_tol).add_(atol)  # r_abs is not needed after this
    bad = ~(diff <= bound)  # NaN in the candidate fails this too
    if not all_finite:
        bad &= finite
    mismatched = int(bad.sum()) + special_bad
    max_abs = float(diff.max()) if diff.numel() else 0.0  # NaN propagates through max
    rel = diff.div_(bound.sub_(atol).div_(r_tol).clamp_min_(max(atol, 1e-30))) if r_tol > 0 else diff
    max_rel = float(rel.max()) if rel.numel() else 0.0
    note = ""
    if not all_finite and not bool(finite.any()):
        note = "the reference output is not finite anywhere: this trial checks only non-finite positions"
    elif magnitude == 0.0:
        note = "the reference output is all zeros"
    return Comparison(mismatched == 0, max_abs, max_rel, atol, r_tol, mismatched, ref.numel(), note)


def compare_outputs(refs: list[torch.Tensor], outs: list[torch.Tensor], rtol: float | None, atol_scale: float | None) -> Comparison:
    """All outputs of one call, summarised as the worst of them."""
    if len(refs) != len(outs):
        return Comparison(False, float("inf"), float("inf"), 0.0, 0.0, 0, 0,
                          f"expected {len(refs)} output tensor(s), got {len(outs)}")
    parts = [compare_tensor(r, o, rtol, atol_scale) for r, o in zip(refs, outs)]
    worst = max(parts, key=lambda c: (not c.passed, c.max_rel_error))
    return Comparison(
        passed=all(p.passed for p in parts),
        max_abs_error=max(p.max_abs_error for p in parts),
        max_rel_error=max(p.max_rel_error for p in parts),
        atol=worst.atol, rtol=worst.rtol,
        mismatched=sum(p.mismatched for p in parts), numel=sum(p.numel for p in parts),
        note="; ".join(p.note for p in parts if p.note),
    )
