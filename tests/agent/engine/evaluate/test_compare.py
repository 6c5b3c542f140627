import math

import torch

from agent.engine.evaluate.compare import compare_outputs, compare_tensor, conditioning, held_to_eager


def test_it_accepts_float32_rounding_differences():
    ref = torch.randn(1000, dtype=torch.float64)
    out = (ref.float() * (1 + 1e-6)).double()
    assert compare_tensor(ref.float(), out.float()).passed


def test_it_rejects_zeros_for_a_reference_of_tiny_magnitude():
    ref = torch.randn(4096) * 1e-6
    result = compare_tensor(ref, torch.zeros_like(ref))
    assert not result.passed
    assert result.mismatched > 4000
    assert result.atol < 1e-10


def test_it_rejects_a_half_precision_computation_of_a_float32_problem():
    x = torch.randn(65536) * 4
    ref = x * torch.sigmoid(x)
    low = (x.half() * torch.sigmoid(x.half())).float()
    assert not compare_tensor(ref, low).passed


def test_it_requires_nans_where_the_reference_has_nans_and_nowhere_else():
    ref = torch.tensor([1.0, float("nan"), 3.0])
    assert compare_tensor(ref, torch.tensor([1.0, float("nan"), 3.0])).passed
    assert not compare_tensor(ref, torch.tensor([1.0, 2.0, 3.0])).passed
    bad = compare_tensor(ref, torch.tensor([float("nan"), float("nan"), 3.0]))
    assert not bad.passed and math.isnan(bad.max_abs_error)


def test_it_reports_a_shape_or_dtype_mismatch_in_words():
    result = compare_tensor(torch.zeros(2, 3), torch.zeros(3, 2))
    assert not result.passed and "expected shape (2, 3)" in result.note
    assert not compare_tensor(torch.zeros(2), torch.zeros(2, dtype=torch.float64)).passed


def test_it_compares_integer_outputs_exactly():
    assert compare_tensor(torch.arange(5), torch.arange(5)).passed
    assert not compare_tensor(torch.arange(5), torch.arange(5) + 1).passed


def test_it_flags_a_missing_output():
    result = compare_outputs([torch.zeros(2), torch.zeros(2)], [torch.zeros(2)], None, None)
    assert not result.passed and "expected 2 output" in result.note


def test_it_reports_the_worst_error_over_outputs():
    refs = [torch.ones(10), torch.ones(10)]
    outs = [torch.ones(10), torch.ones(10) * 1.5]
    result = compare_outputs(refs, outs, None, None)
    assert not result.passed
    assert abs(result.max_abs_error - 0.5) < 1e-9


def test_comparing_in_pieces_judges_exactly_as_comparing_at_once():
    ref = torch.randn(10_000)
    ref[17] = float("nan")
    ref[4000] = float("inf")
    out = ref.clone()
    out[17] = float("nan")
    out[4000] = float("inf")
    out[9000:9050] += 1.0  # out of tolerance
    out[123] = 0.0
    whole = compare_tensor(ref, out)
    for piece in (1, 7, 4096):
        parts = compare_tensor(ref, out, piece=piece)
        assert repr(parts) == repr(whole), (piece, parts, whole)  # repr: NaN figures compare equal
    assert not whole.passed and whole.mismatched == 51


def _noisy_zero(rows=64, n=4096, seed=0):
    """An ill-conditioned output: the mean of a centred row, exactly 0, computed in float32 (rounding noise) and float64."""
    x = torch.randn(rows, n, generator=torch.Generator().manual_seed(seed)) * 10 + 3
    ref = (x - x.mean(dim=1, keepdim=True)).mean(dim=1)
    exact = (x.double() - x.double().mean(dim=1, keepdim=True)).mean(dim=1)
    return ref, exact


def test_a_candidate_as_accurate_as_an_ill_conditioned_reference_passes_against_float64():
    ref, exact = _noisy_zero()
    other = ref + 0.5 * ref.abs().max() * torch.randn_like(ref).clamp(-1, 1)  # another rounding of the same size
    assert not compare_tensor(ref, other).passed
    judged, ill = held_to_eager([ref], [other], [exact], None, None)
    assert ill and judged.passed and judged.held_to_eager and "within 4x" in judged.note
    assert judged.float64_constants and abs(judged.float64_constants[0][0]) < 1e-12  # 0 to float64's rounding


def test_a_candidate_far_less_accurate_than_the_reference_or_not_finite_fails_against_float64():
    ref, exact = _noisy_zero()
    for bad in (ref + 10 * ref.abs().max(), torch.full_like(ref, math.nan)):
        judged, ill = held_to_eager([ref], [bad], [exact], None, None)
        assert ill and not judged.passed and not judged.held_to_eager and "more than 4x" in judged.note


def test_a_well_conditioned_reference_is_not_widened_and_the_error_stays_the_candidates():
    x = torch.randn(256, 64, dtype=torch.float64)
    ref, exact = x.float().relu(), x.relu()
    judged, ill = held_to_eager([ref], [ref * 1.01], [exact], None, None)
    assert not ill and not judged.passed and "the error is the candidate's" in judged.note


def test_judging_against_float64_reads_copies_and_never_changes_the_reference():
    ref, exact = _noisy_zero()
    ref64 = ref.double()  # a float64 problem's outputs: .to(float64) would be the tensor itself
    kept_ref, kept_exact = ref64.clone(), exact.clone()
    out = ref64 + 1e-9
    held_to_eager([ref64], [out], [exact], 0.0, 0.0, piece=1000)
    assert torch.equal(ref64, kept_ref) and torch.equal(exact, kept_exact)


def test_outputs_that_cannot_be_judged_against_float64_keep_their_strict_comparison():
    ref, exact = _noisy_zero()
    ints = torch.arange(64)
    judged, ill = held_to_eager([ints], [ints + 1], [ints.double()], None, None)  # integers: exact or wrong
    assert not ill and not judged.passed
    judged, ill = held_to_eager([ref], [ref[:10]], [exact], None, None)  # a shape that differs
    assert not ill and not judged.passed
    assert conditioning(ref, ref, exact[:10], None, None) is None


def test_a_complex_output_is_judged_on_both_parts_with_its_real_dtypes_tolerance():
    # Until session 42 a complex output was cast to float (its real part) and complex dtypes had zero tolerance: an FFT
    # with a wrong imaginary part passed, and an honest one within float32's rounding failed.
    torch.manual_seed(0)
    ref = torch.fft.fft(torch.randn(64, 128))
    honest = ref * (1 + 1e-6)
    assert compare_tensor(ref, honest).passed
    wrong = torch.complex(ref.real, torch.zeros_like(ref.imag))
    verdict = compare_tensor(ref, wrong)
    assert not verdict.passed and verdict.mismatched > ref.numel() // 2
    assert not compare_tensor(ref, ref.conj()).passed, "the conjugate bit is read, not ignored"
