"""The kernel census's parent side (signatures, tallies, the judgment) on the CPU; its CUPTI side runs on the GPU box
(tests/corpus on cuda, docs/benchmarks.md)."""
from __future__ import annotations

import importlib.machinery
import importlib.util
import secrets

import pytest

import agent.engine.evaluate.kernel_census as kc
from agent.engine.build.toolchain import detect_toolchain

SILU = "void at::native::vectorized_elementwise_kernel<4, at::native::silu_kernel(at::TensorIteratorBase&)::{lambda()#1}>"
COPY = "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)>"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>"
DRAW = "void at::native::distribution_elementwise_grid_stride_kernel<float, 4>"
MIX = "keyed_mix_f32"
OWN = "silu_bias_kernel(float const*, float const*, float*, long)"


def _signed(secret: str, text: str) -> dict[str, str]:
    return {"text": text, "tag": f"{kc.siphash24(bytes.fromhex(secret), text.encode()):016x}"}


def _text(token: int, take: int, kernels: dict[str, int], dropped: int = 0) -> str:
    lines = [f"{token}\t{take}\t{dropped}\t0"] + [f"{n}\t{1000 * n}\t{name}" for name, n in kernels.items()]
    return "\n".join(lines) + "\n"


def test_siphash_matches_the_reference_vectors() -> None:
    key = bytes(range(16))
    assert kc.siphash24(key, b"") == 0x726FDB47DD0E0E31
    assert kc.siphash24(key, bytes(range(15))) == 0xA129CA6149BE45E5


@pytest.mark.skipif(kc.cupti_include(detect_toolchain().cuda_home) is None, reason="no CUPTI headers here")
def test_the_native_census_signs_as_the_parent_checks(tmp_path) -> None:
    described = kc.built(tmp_path)
    assert described is not None
    path = next(tmp_path.rglob(described["file"]))
    loader = importlib.machinery.ExtensionFileLoader(kc.MODULE, str(path))
    spec = importlib.util.spec_from_file_location(kc.MODULE, path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    key = secrets.token_bytes(16)
    for data in (b"", b"x" * 7, b"census\t1\n" * 9):
        assert int(module.siphash(key, data), 16) == kc.siphash24(key, data)
    with pytest.raises(RuntimeError, match="not started"):
        module.take(1)


def test_a_tally_signed_under_another_key_or_for_another_batch_is_refused() -> None:
    secret = secrets.token_hex(16)
    token = kc.batch_token([3, 4, 5])
    good = _signed(secret, _text(token, 2, {MIX: 3}))
    assert kc.read(good, secret, token).kernels == {MIX: (3, 3000)}
    with pytest.raises(kc.CensusError, match="not signed"):
        kc.read(_signed(secrets.token_hex(16), _text(token, 2, {MIX: 3})), secret, token)
    with pytest.raises(kc.CensusError, match="not signed"):
        kc.read({**good, "text": good["text"].replace("3\t3000", "3\t3001")}, secret, token)
    with pytest.raises(kc.CensusError, match="another batch"):
        kc.read(good, secret, kc.batch_token([3, 4, 6]))
    with pytest.raises(kc.CensusError, match="no kernel census"):
        kc.read(None, secret, token)


def _harness(calls: int = 4, extra: dict[str, int] | None = None) -> kc.HarnessShare:
    share = kc.HarnessShare()
    share.add(kc.Tally(0, 2, 0, 0, {MIX: (calls, 1), DRAW: (calls, 1), **{k: (v, 1) for k, v in (extra or {}).items()}}),
              calls)
    return share


def test_pytorch_compute_beyond_the_harness_is_a_finding_where_no_compute_is_allowed() -> None:
    honest = kc.Tally(0, 2, 0, 0, {MIX: (8, 1), DRAW: (8, 1), OWN: (8, 1), COPY: (2, 1)})
    assert kc.judge(honest, 8, _harness(), frozenset()) == []
    cheat = kc.Tally(0, 2, 0, 0, {MIX: (8, 1), DRAW: (8, 1), SILU: (8, 1), ADD: (8, 1)})
    found = kc.judge(cheat, 8, _harness(), frozenset())
    assert len(found) == 1 and "silu_kernel" in found[0] and "CUDAFunctor_add" in found[0]
    # the harness's own PyTorch kernels (its draws) count against nobody; more of them than it runs do
    assert "distribution" in kc.judge(kc.Tally(0, 2, 0, 0, {MIX: (8, 1), DRAW: (30, 1)}), 8, _harness(), frozenset())[0]


def test_where_a_convolution_is_allowed_its_bias_add_is_not_a_finding_but_an_activation_is() -> None:
    allowed = kc.judged_ops({"convolution", "_convolution"}, frozenset({"aten::add", "aten::add_"}))
    tally = kc.Tally(0, 2, 0, 0, {MIX: (8, 1), DRAW: (8, 1), ADD: (8, 1)})
    assert kc.judge(tally, 8, _harness(), allowed) == []
    tally.kernels[SILU] = (8, 1)
    assert "silu_kernel" in kc.judge(tally, 8, _harness(), allowed)[0]
    assert kc.judge(tally, 8, _harness(), allowed | {"silu"}) == []


def test_a_batch_without_the_harnesss_own_kernels_means_the_census_was_blinded() -> None:
    found = kc.judge(kc.Tally(0, 2, 0, 0, {OWN: (8, 1)}), 8, _harness(), frozenset())
    assert len(found) == 1 and "harness's own kernels" in found[0]


def test_the_judge_counts_the_takes_it_asked_for() -> None:
    cand, ref = secrets.token_hex(16), secrets.token_hex(16)
    judge = kc.Judge(cand, ref, frozenset())
    keys = [11, 12, 13, 14]
    judge.reference_null({"kernel_census": _signed(ref, _text(kc.batch_token(keys), 2, {MIX: 4, DRAW: 4}))}, keys)
    judge.candidate_batch({"kernel_census": _signed(cand, _text(kc.batch_token(keys), 2, {MIX: 4, OWN: 4}))}, keys)
    assert judge.findings() == []
    # a tally taken by someone else between the harness's two (what ran before it is dropped)
    judge.candidate_batch({"kernel_census": _signed(cand, _text(kc.batch_token(keys), 5, {MIX: 4, OWN: 4}))}, keys)
    assert any("did not ask for" in f for f in judge.findings())
    assert judge.summary()["state"] == "judged"


def test_without_the_references_tallies_nothing_is_judged_and_the_verdict_says_so() -> None:
    judge = kc.Judge(secrets.token_hex(16), secrets.token_hex(16), frozenset())
    judge.candidate_batch({"kernel_census": None}, [1])
    assert judge.findings() == []
    assert judge.summary()["state"].startswith("not judged")
    assert kc.Judge(None, None, frozenset()).summary()["state"].startswith("off")


def test_a_job_on_the_cpu_starts_no_census() -> None:
    census, why = kc.start({"device": "cpu", "kernel_census": {"secret": "00" * 16}})
    assert census is None and why


def test_the_first_batch_on_new_base_sets_may_run_the_harnesss_one_time_work() -> None:
    cand, ref = secrets.token_hex(16), secrets.token_hex(16)
    judge = kc.Judge(cand, ref, frozenset())
    keys = [21, 22]
    judge.reference_null({"kernel_census": _signed(ref, _text(kc.batch_token(keys), 2, {MIX: 2}))}, keys)
    judge.bases_sent()
    judge.candidate_batch({"kernel_census": _signed(cand, _text(kc.batch_token(keys), 2, {MIX: 2, ADD: 1}))}, keys)
    assert judge.findings() == []
    judge.candidate_batch({"kernel_census": _signed(cand, _text(kc.batch_token(keys), 4, {MIX: 2, ADD: 1}))}, keys)
    assert any("CUDAFunctor_add" in f for f in judge.findings())
