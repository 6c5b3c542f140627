"""Exact algebraic rewrites of a captured graph: which graphs they apply to (real traces of the sandbox job), the
plan and variants they give, and the engine's verdict on them (real C++ builds on the CPU here; the CUDA variants on
the GPU box)."""
from __future__ import annotations

import pytest

from agent.builtin.graph import Library
from agent.builtin.policy import BuiltinPolicy, RewrittenPlan, candidate_source, make_plan, variants
from agent.builtin.rewrite import rewritten
from agent.builtin.trace import trace_graph
from tests.agent.builtin.on_gpu import assert_every_cuda_variant_accepted
from tests.agent.builtin.test_graph import CONV_SUMS, GEMM_SUMS, PARTIAL_CONV_SUMS, problem

def test_a_sum_over_a_gemms_columns_becomes_a_product_with_the_weights_columns_summed(evaluator):
    traced = trace_graph(evaluator, GEMM_SUMS)
    found = rewritten(traced)
    assert found is not None and len(found.notes) == 2
    assert "the sum over the 80 columns of a 32 x 80 GEMM" in found.notes[0]
    assert "the mean over the 72 columns of a 32 x 72 GEMM" in found.notes[1]
    # No GEMM of the full width is left: each is a (32, 96) x (96, 1) product.
    gemms = [n for n in found.traced["graph"]["nodes"] if n.get("target") in ("aten.mm.default", "aten.addmm.default")]
    assert [n["val"]["shape"] for n in gemms] == [[32, 1], [32, 1]]
    assert traced["graph"]["nodes"] != found.traced["graph"]["nodes"]  # the capture itself is left as it was
    plan = make_plan(traced, "cuda")
    assert isinstance(plan, RewrittenPlan)
    library = [s for s in plan.plan.steps if isinstance(s, Library)]
    assert len(library) == 2 and all(plan.plan.buffers[s.output][0] == (32, 1) for s in library)


def test_a_sum_over_every_position_of_a_convolution_is_taken_through_it(evaluator):
    found = rewritten(trace_graph(evaluator, CONV_SUMS))
    assert found is not None and len(found.notes) == 4
    assert "the mean over the 18 x 20 positions of a transposed convolution's output" in found.notes[0]
    assert "the sum over the 9 x 10 positions of a convolution's output" in found.notes[3]
    convolutions = [n for n in found.traced["graph"]["nodes"] if n.get("target") == "aten.convolution.default"]
    assert convolutions == []


@pytest.mark.parametrize("forward", [
    "y = self.lin(x)\nreturn torch.sigmoid(y).sum(dim=1)",  # KernelBench 2/56: not linear in the GEMM's output
    "y = self.lin(x)\nreturn y.sum(dim=0)",  # over the rows: the GEMM's reduction, not its columns
    "y = self.lin(x)\nreturn y.sum(dim=1) + y[:, 0]",  # the GEMM's output is read elsewhere too
    "y = self.lin(x)\nreturn (2.0 / y).sum(dim=1)",  # the GEMM's output as a divisor
    "y = self.lin(x)\nreturn (y * y).sum(dim=1)",  # a square
    "y = self.lin(x)\nreturn (y * self.scale).sum(dim=1)",  # a factor that varies along the columns
])
def test_a_gemm_output_that_is_not_only_summed_linearly_over_its_columns_is_left_as_written(evaluator, forward):
    source = problem(forward, "x|torch.rand(8, 16)", members="self.lin = nn.Linear(16, 24)\n"
                                                             "self.scale = nn.Parameter(torch.randn(24))")
    traced = trace_graph(evaluator, source)
    assert rewritten(traced) is None
    assert not isinstance(make_plan(traced, "cuda"), RewrittenPlan)


def test_a_sum_over_some_of_a_convolutions_dims_leaves_a_convolution_over_the_others(evaluator):
    found = rewritten(trace_graph(evaluator, PARTIAL_CONV_SUMS))
    assert found is not None and len(found.notes) == 3
    assert "the mean over dim 2 (9 positions) of a transposed convolution's output" in found.notes[0]
    assert "the sum over dim 2 (9 positions) of a convolution's output" in found.notes[1]
    assert "the sum over dim 3 (10 positions)" in found.notes[2]
    convolutions = [n for n in found.traced["graph"]["nodes"] if n.get("target") == "aten.convolution.default"]
    # One spatial dim fewer each, the summed dim's three taps as channels: 3 * 3 for the 3D one, 4 * 3 for the others.
    shapes = {n["name"]: n["val"]["shape"] for n in found.traced["graph"]["nodes"] if isinstance(n.get("val"), dict)}
    assert [len(n["val"]["shape"]) for n in convolutions] == [4, 3, 3]
    assert [shapes[n["args"][0]["node"]][1] for n in convolutions] == [9, 12, 12]


@pytest.mark.parametrize("forward, members", [
    ("return self.strided(x).sum(dim=(2, 3))", ""),  # a strided convolution's taps read strided inputs
    ("return self.grouped(x).sum(dim=(2, 3))", ""),
    ("return torch.relu(self.conv(x)).mean(dim=(2, 3))", ""),
])
def test_a_convolution_not_summed_linearly_over_a_dim_it_can_be_summed_through_is_left_as_written(evaluator, forward, members):
    source = problem(forward, "x|torch.rand(2, 4, 9, 10)", members="self.conv = nn.Conv2d(4, 6, 3)\n"
                     "self.strided = nn.Conv2d(4, 6, 3, stride=2)\nself.grouped = nn.Conv2d(4, 6, 3, groups=2)")
    assert rewritten(trace_graph(evaluator, source)) is None


def test_the_rewritten_variants_come_first_and_the_module_as_written_keeps_its_own(evaluator):
    plan = make_plan(trace_graph(evaluator, GEMM_SUMS), "cuda")
    found = variants(plan, "cuda")
    written = [v for v in found if not v.rewritten]
    assert found[0].rewritten and written and found.index(written[0]) == sum(v.rewritten for v in found)
    assert [v.fallback for v in written] == [v.fallback for v in variants(plan.original, "cuda")]
    assert "matrix-vector product" in found[0].label and "the module as written" in written[0].label
    assert "torch.mm(" in candidate_source(plan, found[0], "cuda")


def _verdict(turn: object, status: str, ms: float | None = None, sol: float | None = None) -> list[dict]:
    """The write_candidate call and its verdict; an accepted one timed at `ms` against eager's 5 ms."""
    content = f"status: {status} (reached stage correctness)"
    if ms is not None:
        content = (f"status: {status} (reached stage timing)\ntiming (median ms [p10-p90]):\n"
                   f"  candidate     {ms:.4f} [4.3-4.4]\n  eager         5.0000 [4.9-5.1]  speedup {5.0 / ms:.2f}x")
    if sol is not None:
        content += (f"\n  headline: 20.00x vs the faster of eager and torch.compile; {sol:.1%} of the speed of light "
                    "(compute-bound, 0.3000 ms at the device's measured peaks)")
    return [turn.as_message(), {"role": "tool", "tool_call_id": turn.tool_calls[0].id, "content": content}]


def _search(evaluator, verdicts: list[tuple]) -> tuple[BuiltinPolicy, object]:
    """The policy's turn after the given verdicts (status, ms[, speed of light]), one per variant in order."""
    policy = BuiltinPolicy(GEMM_SUMS, lambda s: trace_graph(evaluator, s), "cuda")
    messages: list[dict] = []
    turn = policy.respond([{"role": "system", "content": "x"}], [])
    for verdict in verdicts:
        messages += _verdict(turn, *verdict)
        turn = policy.respond(messages, [])
    return policy, turn


def test_the_policy_says_what_it_rewrote(evaluator):
    policy = BuiltinPolicy(GEMM_SUMS, lambda s: trace_graph(evaluator, s), "cuda")
    first = policy.respond([{"role": "system", "content": "x"}], [])
    assert "Exact rewrites" in first.text and "the sum over the 80 columns" in first.text


def test_a_rewrite_that_fails_or_loses_to_eager_sends_the_search_on_to_the_module_as_written(evaluator):
    rewrites = sum(v.rewritten for v in variants(_search(evaluator, [])[0].plan(), "cuda"))
    _, failed = _search(evaluator, [("incorrect", None)] * rewrites)
    assert failed.tool_calls[0].name == "write_candidate" and "the module as written" in failed.text
    # Slower than eager, two block sizes alike: not the end of the search, as it would be for the module as written.
    _, slow = _search(evaluator, [("accepted", 11.0), ("accepted", 11.05)])
    assert slow.tool_calls[0].name == "write_candidate" and "Next, variant 3" in slow.text
    _, slow = _search(evaluator, [("accepted", 11.0 + i / 10) for i in range(rewrites)])
    assert slow.tool_calls[0].name == "write_candidate" and "the module as written" in slow.text


def test_a_rewrite_faster_than_eager_ends_the_search_before_the_module_as_written(evaluator):
    rewrites = sum(v.rewritten for v in variants(_search(evaluator, [])[0].plan(), "cuda"))
    _, fast = _search(evaluator, [("accepted", 0.25 + i / 10) for i in range(rewrites)])
    assert fast.tool_calls[0].name == "submit" and "the module as written is not measured" in fast.text
    assert "variant 1 (0.2500 ms, 20.00x vs eager)" in fast.text
    # Above the bound of the module as written (its GEMM's FLOPs, which the rewrite skips): said as such.
    _, above = _search(evaluator, [("accepted", 0.25, 1.38)])
    assert above.tool_calls[0].name == "submit" and "138% of the speed of light of the module as written" in above.text


@pytest.mark.parametrize("name, source", [("gemm", GEMM_SUMS), ("conv", CONV_SUMS), ("partial", PARTIAL_CONV_SUMS)])
def test_every_rewritten_variant_is_accepted_on_the_cpu(evaluator, name, source):
    plan = make_plan(trace_graph(evaluator, source), "cpu")
    assert isinstance(plan, RewrittenPlan)
    for variant in [v for v in variants(plan, "cpu") if v.rewritten]:
        verdict = evaluator.evaluate(source, candidate_source(plan, variant, "cpu"))
        assert verdict.accepted, (variant.label, verdict.status, verdict.message)


@pytest.mark.parametrize("name, source", [("gemm", GEMM_SUMS), ("conv", CONV_SUMS), ("partial", PARTIAL_CONV_SUMS)])
def test_every_variant_of_the_rewritten_sums_is_accepted_on_the_gpu(evaluator, name, source):
    assert_every_cuda_variant_accepted(evaluator, source)
