import math

import torch

from agent.engine.evaluate.compare import compare_outputs, compare_tensor


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
