"""The GPU's fused keyed mix and projections (agent/engine/evaluate/keyed_cuda.py).

The source is built here with the real nvcc (every kernel family in the PTX); the kernels themselves run only where a
GPU is (the GPU acceptance run: benchmarks/gpu_acceptance.sh corpus), where they are checked against torch's own
computation of the same mix, projection and bound.
"""
import re
import shutil
import subprocess

import pytest
import torch

from agent.engine.evaluate import keyed, keyed_cuda
from agent.engine.evaluate.keyed import Pools, derive, project, projection_bound

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="the fused kernels run on a GPU only")
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no CUDA toolkit (nvcc) on this host")
def test_the_harness_kernels_build_for_a_hopper_gpu_with_every_dtype(tmp_path):
    source = tmp_path / "keyed.cu"
    source.write_text(keyed_cuda.SOURCE)
    built = subprocess.run(["nvcc", "-arch=sm_90", "--ptx", "-o", str(tmp_path / "keyed.ptx"), str(source)],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    entries = set(re.findall(r"\.entry\s+(\w+)\(", (tmp_path / "keyed.ptx").read_text()))
    wanted = {f"keyed_{kind}_{suffix}" for kind in ("mix", "project") for suffix in keyed_cuda.SUFFIX.values()}
    assert wanted | {"keyed_weights"} <= entries


def test_cpu_tensors_keep_the_torch_path_even_when_the_pools_say_fused():
    g = torch.Generator().manual_seed(0)
    bases = [[torch.randn(300, 300, generator=g)], [torch.randn(300, 300, generator=g)]]
    assert not keyed_cuda.supported(bases[0][0])
    assert torch.equal(derive(bases, 7, Pools(3, fused=True))[0], derive(bases, 7, Pools(3))[0])
    out = [torch.randn(50, 70, generator=g)]
    assert torch.equal(project(out, 7, Pools(3, fused=True)), project(out, 7, Pools(3)))


def _pair(n, dtype, seed=1):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(n, device="cuda", generator=g).to(dtype), torch.randn(n, device="cuda", generator=g).to(dtype)


@needs_gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_the_fused_mix_weighs_each_element_afresh_between_the_bases_alike_in_every_job(dtype):
    a, b = _pair(1 << 20, dtype)
    bases = [[a.view(1024, 1024)], [b.view(1024, 1024)]]
    first = derive(bases, 11, Pools(5, fused=True))[0]
    again = derive(bases, 11, Pools(9, fused=True))[0]  # another job (the pool seed plays no part in a fresh draw)
    other = derive(bases, 12, Pools(5, fused=True))[0]
    assert first.dtype == dtype and first.shape == (1024, 1024)
    assert torch.equal(first, again)
    flat = first.view(-1)
    assert bool(((flat >= torch.minimum(a, b)) & (flat <= torch.maximum(a, b))).all()), "between the bases"
    apart = (a.float() - b.float()).abs() > 0.5
    u = ((flat.float() - a.float()) / (b.float() - a.float()))[apart]
    assert 0.47 < float(u.mean()) < 0.53 and 0.27 < float(u.std()) < 0.31, "uniform in [0, 1) per element"
    assert float(((flat == a) | (flat == b))[apart].float().mean()) < 0.02, "not a choice between the bases"
    assert float((first != other).float().mean()) > 0.95, "another key mixes otherwise"


@needs_gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("sign", [1, -1])
def test_a_wide_calls_fused_mix_is_the_plain_mix_times_its_factor_in_the_same_pass(dtype, sign):
    # keyed.derive's wide call (one in WIDE_EVERY): the fused kernel scales as it mixes, with no second launch. float32
    # rounds the product once, as torch's multiply does; the half types round once where the two steps rounded twice.
    a, b = _pair(1_000_003, dtype, seed=4)
    bases = [[a.view(-1)], [b.view(-1)]]
    pools = Pools(3, fused=True)
    plain = derive(bases, 17, pools, sign=0)[0].clone()
    wide = derive(bases, 17, pools, sign=sign)[0]
    expected = plain.float() * (sign * keyed.WIDE_SCALE)
    if dtype == torch.float32:
        assert torch.equal(wide, expected)
    else:
        # Half a unit in the last place from each rounding: one of the dtype's eps relative at most (plus subnormals').
        info = torch.finfo(dtype)
        assert torch.allclose(wide.float(), expected, rtol=info.eps, atol=info.tiny * keyed.WIDE_SCALE)
    assert torch.equal(derive(bases, 17, pools, sign=0)[0], plain), "a plain call after a wide one is the plain mix"


@needs_gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_the_harness_kernels_give_the_same_values_whether_or_not_a_tensor_allows_their_wide_accesses(dtype):
    # A view one element in is not aligned for a group's single 16- or 8-byte access: four single accesses instead,
    # the same values in the same order (the two jobs may hold their tensors either way). 1_000_003 leaves a tail.
    a, b = _pair(1_000_004, dtype, seed=6)
    shifted = [[a[1:]], [b[1:]]]
    assert keyed_cuda._vector(a[1:]) == 0 and keyed_cuda._vector(a[1:].clone()) == 1
    mixed = derive(shifted, 31, Pools(2, fused=True))[0]
    assert torch.equal(mixed, derive([[a[1:].clone()], [b[1:].clone()]], 31, Pools(2, fused=True))[0])
    assert float(project([a[1:]], 32, Pools(0, fused=True))[0]) == float(project([a[1:].clone()], 32, Pools(0, fused=True))[0])


@needs_gpu
def test_the_fused_mix_keeps_the_first_base_where_the_difference_is_not_finite():
    inf = float("inf")
    a = torch.tensor([0.0, -inf, 1.0, inf, 3.0e38] * 100_000, device="cuda")
    b = torch.tensor([1.0, -inf, 2.0, 5.0, -3.0e38] * 100_000, device="cuda")
    mixed = derive([[a], [b]], 3, Pools(1, fused=True))[0]
    kept = ~torch.isfinite(a - b)
    assert torch.equal(mixed[kept], a[kept])
    assert bool(torch.isfinite(mixed[~kept]).all()), "no NaN and no infinity made by the mix"


@needs_gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_the_fused_projection_is_the_dot_product_with_its_gaussian_weights(dtype):
    n = 3_000_001
    y = _pair(n, dtype)[0]
    y[5] = float("nan")  # non-finite terms count as zero, in both jobs alike
    kernels = keyed_cuda.Kernels.load()
    seed = keyed._seed(21, 1000)
    weights = kernels.weights(n, seed, y.device)
    assert abs(float(weights.mean())) < 0.01 and abs(float(weights.std()) - 1.0) < 0.01
    expected = (weights.double() * y.double()).nan_to_num(0.0, 0.0, 0.0).sum()
    got = project([y], 21, Pools(0, fused=True))
    scale = float((weights.double() * y.double()).nan_to_num(0.0, 0.0, 0.0).abs().sum())
    assert abs(float(got[0]) - float(expected)) <= 1e-6 * scale
    assert float(project([y], 22, Pools(0, fused=True))[0]) != float(got[0]), "other keys weigh otherwise"


@needs_gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_the_fused_bound_is_projection_bounds_formula_over_the_same_weights(dtype):
    n = 1 << 21
    y = _pair(n, dtype, seed=4)[0]
    y[7] = float("inf")
    seed = keyed._seed(5, 1000)
    weights = keyed_cuda.Kernels.load().weights(n, seed, y.device).double()
    values = y.double().nan_to_num(0.0, 0.0, 0.0)
    values[7] = 0.0
    r_tol, scale = keyed.tolerances(dtype, None, None)
    tol = values.abs() * r_tol + scale * float(values.abs().max())
    expected = keyed.SIGMAS * float((weights.square() * tol.square()).sum()) ** 0.5 \
        + keyed.rounding(n, float32_products=True) * float((weights.abs() * values.abs()).sum())
    got = projection_bound([y], 5, Pools(0, fused=True), None, None)[0]
    assert got == pytest.approx(expected, rel=1e-5)


@needs_gpu
def test_a_wrong_element_fails_the_fused_projection_check_and_a_right_answer_passes():
    y = _pair(1 << 22, torch.float32, seed=6)[0]
    pools = Pools(0, fused=True)
    expected = project([y], 8, pools).tolist()
    bounds = projection_bound([y], 8, pools, None, None)
    within = y * (1 + 1e-6)
    assert keyed.agree(project([within], 8, pools).tolist(), expected, bounds)
    wrong = y.clone()
    wrong[:4096] += 3.0  # 0.1% of the elements
    assert not keyed.agree(project([wrong], 8, pools).tolist(), expected, bounds)


@needs_gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_a_batchs_figures_are_each_calls_projection_and_its_bound_as_the_reference_computes_them_call_by_call(dtype):
    # The reference's eager batch answers the check of the candidate's calls from its own figures (reference_job.expected):
    # they must be what verify's call-by-call path gives for the same keys.
    from agent.engine.evaluate.batch import run_batch_figures
    from agent.engine.evaluate.keyed import bound_of_figures

    a, b = _pair(1 << 18, dtype, seed=9)
    bases, pools, keys = [[a.view(512, 512)], [b.view(512, 512)]], Pools(4, fused=True), [3, 99, 12345]
    fn = lambda x: (torch.tanh(x), x.float().sum(dim=1))  # noqa: E731 - two outputs, one of another dtype
    reply, figures = run_batch_figures(fn, bases, keys, "cuda", pools)
    assert figures is not None and tuple(figures.shape) == (3, 2, keyed_cuda.FIGURES)
    for i, key in enumerate(keys):
        outs = list(fn(*derive(bases, key, pools)))
        assert reply["projections"][i] == project(outs, key, pools).tolist()
        expected = projection_bound(outs, key, pools, None, None)
        got = [bound_of_figures(figures[i, j, 1:].tolist(), o.dtype, o.numel(), None, None) for j, o in enumerate(outs)]
        assert got == pytest.approx(expected, rel=1e-9)


_SUM_PROBLEM = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum(dim=1)


def get_inputs():
    return [torch.randn(512, 1024)]


def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=needs_gpu)])
def test_the_verdict_says_which_harness_mixed_and_projected_its_timed_calls(device, tmp_path):
    from agent.engine.evaluate import EvalConfig, Evaluator
    from agent.engine.sandbox import Limits

    config = EvalConfig(device=device, compile_baseline=False, allow_any_torch_op=True, min_rounds=2, max_rounds=2,
                        batch_ms=5.0, limits=Limits(wall_seconds=120, memory_bytes=4 << 30))
    with Evaluator(config, cache_root=tmp_path) as evaluator:
        verdict = evaluator.evaluate(_SUM_PROBLEM, _SUM_PROBLEM.replace("class Model(", "class ModelNew("))
    assert verdict.accepted, verdict.message
    expected = "fused GPU kernels (keyed_cuda.py)" if device == "cuda" else "torch ops (not a GPU)"
    assert verdict.timing is not None and verdict.timing.harness.split(";")[0] == expected
    # And the wide timed calls it made (keyed.py): on every device, both signs for a sum.
    assert "; one timed call in 8 on its inputs times +100 and -100" in verdict.timing.harness


@needs_gpu
def test_the_fused_mix_writes_each_input_into_one_buffer_reused_call_after_call():
    a, b = _pair(1 << 16, torch.float32, seed=3)
    pools = Pools(0, fused=True)
    first = derive([[a], [b]], 1, pools)[0]
    kept_copy = first.clone()
    second = derive([[a], [b]], 2, pools)[0]
    assert second.data_ptr() == first.data_ptr(), "no allocation per call"
    assert not torch.equal(second, kept_copy), "the next call's values replace the last call's"
    pools.release()  # a park drops it with the other device state
    assert derive([[a], [b]], 2, pools)[0].equal(second)
