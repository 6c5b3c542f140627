"""The built-in policy through the real tools: `python -m agent optimize --policy builtin` on our
examples, on the CPU here; its CUDA kernels are compiled here with nvcc (run on the GPU box)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agent.builtin.codegen import candidate_source, cuda_head, variants
from agent.builtin.lower import lower
from agent.builtin.policy import BuiltinPolicy
from agent.engine.evaluate import EvalConfig
from agent.loop.policies.base import PolicyError
from agent.builtin.trace import trace_graph
from tests.agent.builtin.test_codegen import ODD_ROWS
from tests.agent.builtin.test_graph import CONV_EPILOGUE, one_extension

# Real processes (the agent's CLI, pip, a production Django): the slow tier.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"


def optimize(problem: Path, *extra: str) -> tuple[int, dict, str]:
    proc = subprocess.run([sys.executable, "-m", "agent", "optimize", str(problem), "--policy", "builtin", "--device", "cpu",
                           "--json", "--no-compile-baseline", *extra], cwd=ROOT, capture_output=True, text=True, timeout=600)
    return proc.returncode, json.loads(proc.stdout) if proc.stdout.strip() else {}, proc.stderr


@pytest.mark.parametrize("name", ["gelu_tanh_bias", "rms_norm"])
def test_it_returns_an_accepted_kernel_and_submits_the_fastest_variant(name):
    code, out, log = optimize(EXAMPLES / f"{name}.py")
    assert code == 0 and out["status"] == "submitted", log[-3000:]
    assert out["policy"] == "builtin" and out["verdict"]["status"] == "accepted"
    assert out["verdict"]["timing"]["speedup_vs_eager"] > 0 and "Analysis:" in log
    assert "Written by Kernel Studio's built-in policy" in out["best_source"]


def test_a_module_it_cannot_handle_ends_with_the_reason_and_no_kernel(tmp_path):
    problem = tmp_path / "sort.py"
    problem.write_text("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
                       "        return torch.sort(x, dim=-1).values\n\ndef get_inputs():\n    return [torch.randn(8, 8)]\n\n"
                       "def get_init_inputs():\n    return []\n")
    code, out, log = optimize(problem)
    assert code == 1 and out["status"] == "failed" and out["verdict"] is None
    assert "cannot optimize this module" in out["stop_reason"] and "sort" in out["stop_reason"]


def test_each_turn_reads_the_last_verdict_like_a_model_would(evaluator):
    source = (EXAMPLES / "relu_scale_bias.py").read_text()
    policy = BuiltinPolicy(source, lambda s: trace_graph(evaluator, s), "cpu")
    chunks: list[str] = []
    first = policy.respond([{"role": "system", "content": "x"}], [], chunks.append)
    assert "".join(chunks) == first.text and first.tool_calls[0].name == "write_candidate"
    history = [first.as_message(), {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content":
               "status: accepted (reached stage timing)\ntiming (median ms [p10-p90]):\n  candidate     0.5000 [0.4-0.6]\n"
               "  eager         1.0000 [0.9-1.1]  speedup 2.00x"}]
    second = policy.respond(history, [])
    assert "Variant 1 was accepted (0.5000 ms, 2.00x vs eager)" in second.text
    assert second.tool_calls[0].name == "write_candidate"
    third = policy.respond(history + [second.as_message(), {"role": "tool", "tool_call_id": second.tool_calls[0].id,
                                                            "content": "status: incorrect (reached stage correctness)"}], [])
    assert third.tool_calls[0].name == "submit" and "variant 1" in third.text


def test_a_variant_near_the_roof_ends_the_search_and_one_below_it_does_not(evaluator):
    source = (EXAMPLES / "relu_scale_bias.py").read_text()
    policy = BuiltinPolicy(source, lambda s: trace_graph(evaluator, s), "cuda")
    first = policy.respond([{"role": "system", "content": "x"}], [])

    def after(sol: float) -> object:
        return policy.respond([first.as_message(), {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content":
                               "status: accepted (reached stage timing)\ntiming (median ms [p10-p90]):\n"
                               "  candidate     4.3230 [4.3-4.4]\n  eager         4.2880 [4.2-4.3]  speedup 0.99x\n"
                               f"  headline: 0.99x vs the faster of eager and torch.compile; {sol:.1%} of the speed of "
                               "light (memory-bound, 4.0380 ms at the device's measured peaks)"}], [])

    near = after(0.934)
    assert near.tool_calls[0].name == "submit" and "93% of the speed of light" in near.text
    assert "the search stops" in near.text and "variant 1 (4.3230 ms, 0.99x vs eager)" in near.text
    below = after(0.851)
    assert below.tool_calls[0].name == "write_candidate" and "Next, variant 2" in below.text


_GROUP_NORM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.gn = nn.GroupNorm(4, 16)

    def forward(self, x):
        return self.gn(x)


def get_inputs():
    return [torch.rand(8, 16, 32, 32)]


def get_init_inputs():
    return []
"""


def _accepted(call: object, ms: float) -> list[dict]:
    """The write_candidate call and an accepted verdict for it, timed at `ms` against eager's 5 ms."""
    return [call.as_message(), {"role": "tool", "tool_call_id": call.tool_calls[0].id, "content":
            "status: accepted (reached stage timing)\ntiming (median ms [p10-p90]):\n"
            f"  candidate     {ms:.4f} [4.3-4.4]\n  eager         5.0000 [4.9-5.1]  speedup {5.0 / ms:.2f}x"}]


def test_a_whole_graph_plan_stops_after_two_block_sizes_that_time_alike_and_not_after_two_that_differ(evaluator):
    policy = BuiltinPolicy(_GROUP_NORM, lambda s: trace_graph(evaluator, s), "cuda")
    first = policy.respond([{"role": "system", "content": "x"}], [])
    assert "256 threads per block" in first.text

    second = policy.respond(_accepted(first, 4.3230), [])
    assert second.tool_calls[0].name == "write_candidate" and "128 threads per block" in second.text
    alike = policy.respond(_accepted(first, 4.3230) + _accepted(second, 4.3500), [])
    assert alike.tool_calls[0].name == "submit" and "within 0.6% of each other" in alike.text
    assert "variant 1 (4.3230 ms" in alike.text
    apart = policy.respond(_accepted(first, 4.3230) + _accepted(second, 3.9000), [])
    assert apart.tool_calls[0].name == "write_candidate" and "512 threads per block" in apart.text


def test_a_plan_with_convolutions_tries_their_layout_second_and_its_scalar_fallback_only_after_a_failure(evaluator):
    policy = BuiltinPolicy(CONV_EPILOGUE, lambda s: trace_graph(evaluator, s), "cuda")
    first = policy.respond([{"role": "system", "content": "x"}], [])
    assert "Variant 1 of 3" in first.text and "channels-last" not in first.text

    second = policy.respond(_accepted(first, 4.3230), [])
    assert second.tool_calls[0].name == "write_candidate" and "channels-last" in second.text
    tie = policy.respond(_accepted(first, 4.3230) + _accepted(second, 4.3300), [])
    # Both accepted: the third variant (scalar loads, channels-last) is only the fallback for float4 loads that fail.
    assert tie.tool_calls[0].name == "submit" and "only the fallback" in tie.text and "variant 1 (4.3230 ms" in tie.text
    failed = [first.as_message(), {"role": "tool", "tool_call_id": first.tool_calls[0].id,
                                   "content": "status: incorrect (reached stage correctness)"}]
    fallback = policy.respond(failed + _accepted(second, 4.3300), [])
    assert fallback.tool_calls[0].name == "write_candidate" and "every load scalar" in fallback.text


def test_a_capacity_verdict_stops_it_without_blaming_its_templates(evaluator):
    source = (EXAMPLES / "relu_scale_bias.py").read_text()
    policy = BuiltinPolicy(source, lambda s: trace_graph(evaluator, s), "cpu")
    first = policy.respond([{"role": "system", "content": "x"}], [])
    history = [first.as_message(), {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content":
               "status: capacity (reached stage plan)\nmessage: the problem does not fit the device: its footprint is "
               "inputs 6.0 GiB, weights 0 bytes, outputs 6.0 GiB; ... the limit is 1.0 GiB"}]
    with pytest.raises(PolicyError) as stopped:
        policy.respond(history, [])
    assert "does not fit the device's memory" in str(stopped.value) and "footprint is inputs 6.0 GiB" in str(stopped.value)
    assert "gap in our templates" not in str(stopped.value)


def test_its_cuda_kernels_compile_with_nvcc(evaluator):
    """Every variant of the single-kernel templates of three examples, of long softmax rows, of a row statistic spread
    over its row and of a convolution's epilogue over rows not a multiple of four long (float4 groups of the flat
    index), in one nvcc build (test_graph.one_extension)."""
    import shutil

    if not shutil.which("nvcc"):
        pytest.skip("needs nvcc (the CUDA toolkit) to compile the CUDA templates")
    modules = {name: (EXAMPLES / f"{name}.py").read_text() for name in ["gelu_tanh_bias", "residual_layer_norm", "cross_entropy"]}
    modules.update(softmax=LONG_ROWS.replace("{op}", "softmax"), log_softmax=LONG_ROWS.replace("{op}", "log_softmax"),
                   row_normalised=ROW_NORMALISED, odd_rows=ODD_ROWS)
    sources = {}
    for name, module in modules.items():
        plan = lower(trace_graph(evaluator, module))
        for n, variant in enumerate(variants(plan, "cuda")):
            sources[f"{name}_{n}"] = candidate_source(plan, variant, "cuda")
    info, header = evaluator.build(one_extension(sources, cuda_head()), EvalConfig(device="cuda"))
    assert header.get("ok"), (header.get("error"), info.log[-3000:])


LONG_ROWS = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.{op}(x, dim=1)


def get_inputs():
    return [torch.randn(8, 20000)]


def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_a_softmax_row_too_long_for_shared_memory_is_read_twice_not_three_times(evaluator, op):
    # KernelBench's 23_Softmax (rows of 393216) ran at 36% of the roof reading each row for its max, again for its sum
    # and again for the write; the max and the sum now come from one pass (H100: 0.60x -> 0.77x vs torch.compile).
    # Then float4 groups, several in flight per thread (0.77x -> see benchmarks.md §14), the scalar form kept last.
    plan = lower(trace_graph(evaluator, LONG_ROWS.replace("{op}", op)))
    found = variants(plan, "cuda")
    assert [v.vec for v in found] == [4, 4, 1] and "float4 groups" in found[0].label
    grouped, scalar = (candidate_source(plan, v, "cuda") for v in (found[0], found[2]))
    # Two passes in each of the float4 kernel and its fallback for misaligned tensors, none through shared memory.
    assert grouped.count("for (long long g = threadIdx.x; g < C / VEC; g += BLOCK)") == 4 and "rowbuf" not in grouped
    assert "*reinterpret_cast<const float4*>(&p0[i0])" in grouped and "s = s * expf(m - xv) + 1.0f" in grouped
    assert scalar.count("for (long long c = threadIdx.x; c < C; c += blockDim.x)") == 2 and "rowbuf" not in scalar
    assert "s = s * expf(m - xv) + 1.0f" in scalar  # both compile in test_its_cuda_kernels_compile_with_nvcc


# A statistic broadcast back over its row (KernelBench's 38_L1Norm_ at 32768 x 65535 was refused as "incorrect" on the
# H100: the kernel wrote the row's statistic once instead of every element); an odd row length takes the streaming
# template.
ROW_NORMALISED = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x / torch.mean(torch.abs(x), dim=1, keepdim=True)


def get_inputs():
    return [torch.rand(64, 1023)]


def get_init_inputs():
    return []
'''


def test_a_row_statistic_spread_back_over_the_row_is_accepted(tmp_path):
    problem = tmp_path / "row_normalised.py"
    problem.write_text(ROW_NORMALISED)
    code, out, log = optimize(problem)
    assert code == 0 and out["status"] == "submitted" and out["verdict"]["status"] == "accepted", log[-3000:]
    # Its CUDA kernels compile in test_its_cuda_kernels_compile_with_nvcc (run on the GPU box: docs/benchmarks.md §16).
