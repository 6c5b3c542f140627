"""Comparing a candidate's outputs with the reference's, with dtype-aware tolerances."""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch

# (rtol, atol as a fraction of the reference's largest finite magnitude). The absolute part is
# scaled so that outputs of magnitude 1e-6 are not "passed" by zeros under a fixed atol.
_TOLERANCES = {
    torch.float64: (1e-7, 1e-9),
    torch.float32: (1e-4, 1e-5),
    torch.float16: (1e-2, 1e-3),
    torch.bfloat16: (2e-2, 4e-3),
}
# Where the reference is ill-conditioned (its own float32 output is out of tolerance of a float64 evaluation of the same
# model on the same inputs: a mean of a normalised tensor, exactly 0, where eager returns its rounding noise), a
# candidate whose error from the float64 result is at most this many times the reference's, both root-mean-square and
# largest, is as accurate as eager and passes (held_to_eager). Two float32 evaluations in different orders differ from
# the exact result by errors of the same size; 4 leaves room for a different blocking of the same sums.
NOISE_FACTOR = 4.0


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
    # Passed only as accurate as eager against a float64 evaluation, the reference being ill-conditioned (held_to_eager).
    held_to_eager: bool = False
    # Where every output was so held and its float64 result is one value to within the reference's own rounding:
    # [value, the reference's largest error] per output (judge: a candidate writing the value passes).
    float64_constants: list[list[float]] | None = None


def as_real(t: torch.Tensor) -> torch.Tensor:
    """A complex tensor as its real and imaginary parts (a float view, last dimension 2), anything else as it is: every
    comparison and projection reads both parts. Until session 42 a complex output was cast to a float one, which keeps
    the real part only, so its imaginary part was never checked, and complex dtypes had no tolerance at all."""
    return torch.view_as_real(t.resolve_conj()) if t.is_complex() else t


def real_numbers(dtype: torch.dtype, numel: int) -> tuple[torch.dtype, int]:
    """The dtype and element count as_real gives a tensor of `dtype` and `numel` elements."""
    return (dtype.to_real(), 2 * numel) if dtype.is_complex else (dtype, numel)


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
    r_flat, o_flat = as_real(ref.detach()).reshape(-1), as_real(out.detach()).reshape(-1)
    ref = r_flat  # a complex output is judged as its real and imaginary parts, each to its real dtype's tolerance
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
    return combined(compare_each(refs, outs, rtol, atol_scale, piece))


def compare_each(refs: list[torch.Tensor], outs: list[torch.Tensor], rtol: float | None, atol_scale: float | None,
                 piece: int | None = None) -> list[Comparison]:
    """compare_tensor for each output of one call (as many as both have)."""
    return [compare_tensor(r, o, rtol, atol_scale, piece) for r, o in zip(refs, outs)]


def combined(parts: list[Comparison]) -> Comparison:
    """One call's outputs' comparisons summarised as the worst of them."""
    worst = max(parts, key=lambda c: (not c.passed, c.max_rel_error))
    return Comparison(
        passed=all(p.passed for p in parts),
        max_abs_error=max(p.max_abs_error for p in parts),
        max_rel_error=max(p.max_rel_error for p in parts),
        atol=worst.atol, rtol=worst.rtol,
        mismatched=sum(p.mismatched for p in parts), numel=sum(p.numel for p in parts),
        note="; ".join(p.note for p in parts if p.note),
        held_to_eager=any(p.held_to_eager for p in parts),
        float64_constants=(sum((p.float64_constants for p in parts if p.float64_constants), [])
                           if all(p.float64_constants for p in parts) else None),
    )


@dataclass
class Conditioning:
    """One output's errors from a float64 evaluation of the reference on the same inputs: the reference's own and the
    candidate's."""

    out_of_tolerance: int  # reference elements out of the dtype's tolerance of the float64 result
    numel: int
    ref_rms: float
    ref_max: float
    cand_rms: float
    cand_max: float
    exact_low: float  # the float64 result's least and largest values
    exact_high: float

    @property
    def constant(self) -> bool:
        """The float64 result varies less than the reference's own error: it is one value, as far as float32 can tell."""
        return self.exact_high - self.exact_low <= self.ref_max

    @property
    def ill(self) -> bool:
        return self.out_of_tolerance > 0

    @property
    def as_accurate(self) -> bool:
        return self.cand_rms <= NOISE_FACTOR * self.ref_rms and self.cand_max <= NOISE_FACTOR * self.ref_max

    def describe(self) -> str:
        return (f"the reference is ill-conditioned here: its float32 output is out of tolerance of a float64 evaluation "
                f"at {self.out_of_tolerance} of {self.numel} elements (error rms {self.ref_rms:.3g}, largest "
                f"{self.ref_max:.3g}); the candidate's error from float64 (rms {self.cand_rms:.3g}, largest "
                f"{self.cand_max:.3g}) is {'within' if self.as_accurate else 'more than'} {NOISE_FACTOR:g}x the reference's")


def conditioning(ref: torch.Tensor, out: torch.Tensor, exact: torch.Tensor, rtol: float | None, atol_scale: float | None,
                 piece: int | None = None) -> Conditioning | None:
    """None where the output cannot be judged so: not floating, empty, shapes or dtypes that differ, or a non-finite
    reference (its non-finite positions have their own rule in compare_tensor). `out` is read in copies, as there."""
    if (not ref.is_floating_point() or ref.numel() == 0 or out.shape != ref.shape or out.dtype != ref.dtype
            or exact.shape != ref.shape or not exact.is_floating_point()):
        return None
    r_tol, scale = tolerances(ref.dtype, rtol, atol_scale)
    r_flat, o_flat, x_flat = ref.detach().reshape(-1), out.detach().reshape(-1), exact.detach().reshape(-1)
    step = max(1, piece or r_flat.numel())
    pieces = range(0, r_flat.numel(), step)
    magnitude, low, high = 0.0, math.inf, -math.inf
    for i in pieces:
        x, r = x_flat[i:i + step].to(torch.float64), r_flat[i:i + step]
        if not (bool(torch.isfinite(x).all()) and bool(torch.isfinite(r).all())):
            return None
        magnitude = max(magnitude, float(x.abs().max()))
        low, high = min(low, float(x.min())), max(high, float(x.max()))
    atol = scale * magnitude
    bad, ref_sq, cand_sq, ref_max, cand_max = 0, 0.0, 0.0, 0.0, 0.0
    for i in pieces:
        x = x_flat[i:i + step].to(torch.float64)
        ref_err = r_flat[i:i + step].to(torch.float64, copy=True).sub_(x).abs_()  # never the reference in place
        cand_err = o_flat[i:i + step].to(ref.device, torch.float64, copy=True).sub_(x).abs_().nan_to_num_(math.inf, math.inf)
        bad += int((ref_err > x.abs().mul_(r_tol).add_(atol)).sum())
        ref_sq, cand_sq = ref_sq + float(ref_err.square().sum()), cand_sq + float(cand_err.square().sum())
        ref_max, cand_max = max(ref_max, float(ref_err.max())), max(cand_max, float(cand_err.max()))
    n = r_flat.numel()
    return Conditioning(bad, n, math.sqrt(ref_sq / n), ref_max, math.sqrt(cand_sq / n), cand_max, low, high)


def held_to_eager(refs: list[torch.Tensor], outs: list[torch.Tensor], exacts: list[torch.Tensor], rtol: float | None,
                  atol_scale: float | None, piece: int | None = None,
                  strict: list[Comparison] | None = None) -> tuple[Comparison, bool]:
    """A call whose outputs failed against the reference's, judged again against a float64 evaluation of the reference
    on the same inputs (`exacts`): an output that failed passes where the reference's own output is out of tolerance
    of the float64 one (ill-conditioned there) and the candidate's error from it is within NOISE_FACTOR of the
    reference's. Everything here was computed in the reference's job. Returns the comparison and whether the reference
    was ill-conditioned on any output. `strict`: the outputs' compare_each, where the caller has it already."""
    if not len(refs) == len(outs) == len(exacts):
        return compare_outputs(refs, outs, rtol, atol_scale, piece), False
    if strict is None or len(strict) != len(refs):
        strict = compare_each(refs, outs, rtol, atol_scale, piece)
    parts, ill = [], False
    for r, o, x, first in zip(refs, outs, exacts, strict):
        found = None if first.passed else conditioning(r, o, x, rtol, atol_scale, piece)
        if found is None:
            parts.append(first)
        elif not found.ill:
            parts.append(replace(first, note=joined(first.note, "the reference is within tolerance of a float64 "
                                                                "evaluation here: the error is the candidate's")))
        else:
            ill = True
            constant = [[(found.exact_low + found.exact_high) / 2, found.ref_max]] if found.constant else None
            parts.append(replace(first, passed=found.as_accurate, held_to_eager=found.as_accurate,
                                 note=joined(first.note, found.describe()), float64_constants=constant))
    return combined(parts), ill


def joined(*notes: str) -> str:
    return "; ".join(n for n in notes if n)
