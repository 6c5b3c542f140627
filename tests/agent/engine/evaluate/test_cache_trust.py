"""Issue 19, class 6: shared caches are written only by the trusted side and checked on use. Real sandbox, real
g++ builds, the CPU device: (a) no job can write the shared cache or the baselines store; (b) a poisoning
candidate run first leaves a legitimate candidate's verdict (status and binary's hash) unchanged; (c) an
installed binary changed from outside (disk corruption, another writer) is detected on load and rebuilt,
never loaded."""
import hashlib
import importlib.util
import json
import re
from pathlib import Path

import pytest

from agent.engine.build import BuildCache, ExtensionBuildError, InlineExtension, detect_toolchain, inline_key
from agent.engine.build.inline import BuiltExtension, load_built_extension, module_name_for
from agent.engine.evaluate import EvalConfig, Evaluator, aten_watch
from agent.engine.sandbox import Job, Limits
from agent.engine.verdict import Status

CORPUS = Path(__file__).resolve().parents[3] / "corpus"
CONFIG = EvalConfig(device="cpu", compile_baseline=False, backend="cpp",
                    limits=Limits(wall_seconds=60, memory_bytes=4 << 30))
POISONER = (CORPUS / "candidates" / "exploit_py_cache_poisoning.py").read_text()


def _cases():
    spec = importlib.util.spec_from_file_location("corpus_manifest", CORPUS / "manifest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CASES


# Every legitimate CPU candidate of the corpus.
LEGIT_CPU = [c for c in _cases() if c.expect == "accepted" and c.device == "cpu" and c.candidate.startswith("candidates/legit_")]
# The poisoning case on three of them, unlike in what they build: an elementwise kernel, a reduction, and a GEMM
# epilogue whose extension is renamed (the poisoner plants under each victim's own key, so the mechanism is the
# same for all; each case costs two cold builds on this 2-core box). The corpus test evaluates all of them.
POISONING_VICTIMS = [c for c in LEGIT_CPU if Path(c.candidate).stem in
                     ("legit_cpp_silu_bias", "legit_cpp_sum_rows", "legit_cpp_linear_relu_renamed")]


def _snapshot(*roots: Path) -> dict[str, str]:
    """Every file under `roots` with the sha256 of its bytes (what the host side holds)."""
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest()
            for root in roots if root.exists() for p in sorted(root.rglob("*")) if p.is_file()}


def _poisoner_for(victim: str) -> str:
    return POISONER.replace("VICTIM_SOURCES: list = []", f"VICTIM_SOURCES: list = [{victim!r}]", 1)


@pytest.fixture(scope="module")
def silu_built(tmp_path_factory):
    """An evaluator whose cache holds the legitimate silu candidate's build, and that build's verdict."""
    case = next(c for c in LEGIT_CPU if "silu" in c.candidate)
    with Evaluator(CONFIG, cache_root=tmp_path_factory.mktemp("trust") / "cache") as ev:
        problem, candidate = (CORPUS / case.problem).read_text(), (CORPUS / case.candidate).read_text()
        verdict = ev.evaluate(problem, candidate, CONFIG)
        assert verdict.status is Status.ACCEPTED, verdict.message
        yield ev, problem, candidate, verdict


def test_no_job_can_write_anywhere_under_the_shared_cache_or_the_baselines_store(silu_built):
    ev, *_ = silu_built
    ev._store_compile("k" * 64, {"eager": {}, "compile": {}})  # a baseline record to try overwriting
    cache_files = [Path(p) for p in _snapshot(ev.cache_root)]
    dirs = sorted({p.parent for p in cache_files} | {ev.cache_root})
    targets = [*map(str, cache_files), *(str(d / "new.json") for d in dirs),
               str(ev.cache_root / "baselines" / "forged.json"), str(ev.cache_root / "candidates" / "forged.json"),
               *(str(p) for p in (ev.trusted_root / "baselines").iterdir()),
               str(ev.trusted_root / "baselines" / "forged.json"), str(ev.trusted_root / "candidates" / "forged.json")]
    before = _snapshot(ev.cache_root, ev.trusted_root)
    assert any(name.endswith(".so") for name in before) and any("/baselines/" in name for name in before)
    for sandbox in (ev.sandbox, ev.reference_sandbox):  # the candidate's and the reference's jobs alike
        out = sandbox.run(Job("agent.engine.sandbox.probes:attempt_writes", {"paths": targets}, env=ev._job_env()))
        assert out.ok, out.stderr
        landed = json.loads(out.result)
        # Under the cache root every open(..., "w") fails; the trusted store is not there at all (a write to its
        # path can only land in the job's own private /tmp, which the host-side check below covers).
        assert not [p for p, ok in landed.items() if ok and p.startswith(str(ev.cache_root) + "/")]
    assert _snapshot(ev.cache_root, ev.trusted_root) == before


def test_the_poisoning_victims_are_three_legitimate_candidates():
    assert len(POISONING_VICTIMS) == 3 and len(LEGIT_CPU) >= 3


@pytest.mark.parametrize("case", POISONING_VICTIMS, ids=lambda c: Path(c.candidate).stem)
def test_poisoning_first_leaves_a_legitimate_verdict_and_its_binary_unchanged(case, silu_built, tmp_path):
    problem, candidate = (CORPUS / case.problem).read_text(), (CORPUS / case.candidate).read_text()
    if "silu" in case.candidate:
        clean = silu_built[3]
    else:
        with Evaluator(CONFIG, cache_root=tmp_path / "clean") as ev:
            clean = ev.evaluate(problem, candidate, CONFIG)
    with Evaluator(CONFIG, cache_root=tmp_path / "shared") as ev:
        # The poisoner's own module is shaped for the silu problem; which problem it is evaluated on does not matter
        # to what it attacks (the shared caches), so it always gets that one.
        poisoned = ev.evaluate((CORPUS / "problems" / "elementwise_silu_bias.py").read_text(), _poisoner_for(candidate), CONFIG)
        assert not poisoned.accepted and re.search("sandbox held: all", poisoned.message), poisoned.message
        assert not (ev.cache_root / "baselines").exists() and not (ev.cache_root / "candidates").exists()
        assert not (ev.trusted_root / "baselines").exists()
        # The one binary there is the harness's own ATen observer, which the parent built (aten_watch.built).
        observer = f"/{aten_watch._build_key()}/"
        assert not [p for p in _snapshot(ev.cache_root) if p.endswith(".so") and observer not in p], \
            "nothing was built, nothing planted"
        after = ev.evaluate(problem, candidate, CONFIG)
    assert (after.status, after.build.artifacts) == (clean.status, clean.build.artifacts), after.message
    assert after.build.artifacts and all(re.fullmatch("[0-9a-f]{64}", h) for h in after.build.artifacts.values())


def _installed_so(ev: Evaluator) -> Path:
    """The candidate's one installed binary (the harness's own ATen observer, built by the parent, lies beside it)."""
    observer = aten_watch._build_key()
    [so] = [p for p in ev.cache_root.rglob("*.so") if observer not in p.parts]
    return so


def test_a_tampered_installed_binary_is_refused_on_load(silu_built):
    ev, *_ = silu_built
    so = _installed_so(ev)
    entry = so.parent
    meta = json.loads((entry / "meta.json").read_text())
    original = so.read_bytes()
    try:
        so.write_bytes(original[:-64] + bytes(64))  # corrupted from outside: the jobs cannot write here
        built = BuiltExtension(key=meta["key"], module_name=so.stem, so_path=so, cache_hit=True, seconds=0.0,
                               fast_path="slim", log="", entry=entry)
        with pytest.raises(ExtensionBuildError, match="failed its integrity check"):
            load_built_extension(built)
    finally:
        so.write_bytes(original)


def test_a_tampered_installed_binary_is_rebuilt_and_the_verdict_unchanged(silu_built):
    ev, problem, candidate, clean = silu_built
    so = _installed_so(ev)
    so.write_bytes(so.read_bytes()[:-64] + bytes(64))
    verdict = ev.evaluate(problem, candidate, CONFIG)
    assert verdict.status is Status.ACCEPTED, verdict.message
    assert verdict.build.fast_path != "candidate-cache" and verdict.build.cache_misses >= 1  # rebuilt, not reused
    assert verdict.build.artifacts == clean.build.artifacts
    assert ev.build_cache.verify(json.loads((_installed_so(ev).parent / "meta.json").read_text())["key"]) == []


def test_the_parent_installs_under_the_key_it_computes_never_one_a_job_reports(tmp_path):
    """A request's entry holds what that request compiles to: a job that reports a victim's request gets it
    compiled honestly; what the job itself built or named is never installed."""
    toolchain = detect_toolchain("9.0")
    ext = InlineExtension.from_load_inline(name="victim", cpp_sources="int f() { return 1; }", functions=None)
    key = inline_key(ext, toolchain)
    staged = tmp_path / "staged"
    staged.mkdir()
    (staged / f"{module_name_for(ext, key)}.so").write_bytes(b"binary")
    (staged / "link").symlink_to("/etc/hostname")
    cache = BuildCache(tmp_path / "cache")
    from agent.engine.build.cache import ArtifactError

    with pytest.raises(ArtifactError, match="not a regular file"):
        cache.install(key, staged, {"so": f"{module_name_for(ext, key)}.so"})
    assert cache.lookup(key) is None
    (staged / "link").unlink()
    entry, existed = cache.install(key, staged, {"so": f"{module_name_for(ext, key)}.so"})
    assert not existed and cache.verify(key) == []
    assert cache.meta(key)["files"][f"{module_name_for(ext, key)}.so"]["sha256"] == hashlib.sha256(b"binary").hexdigest()
    assert BuildCache(cache.root, read_only=True).read_verified(entry, f"{module_name_for(ext, key)}.so") == b"binary"


def test_an_entry_without_a_manifest_is_not_an_entry(tmp_path):
    cache = BuildCache(tmp_path)
    entry = cache.entry_dir("e" * 64)
    entry.mkdir(parents=True)
    (entry / "meta.json").write_text(json.dumps({"key": "e" * 64, "built": {"so": "x.so"}}))  # as jobs once wrote
    assert cache.lookup("e" * 64) is None


def test_a_read_only_cache_builds_a_miss_privately_and_never_writes_the_root(tmp_path):
    root = tmp_path / "cache"
    root.mkdir()
    cache = BuildCache(root, read_only=True, private_dir=tmp_path / "private")
    entry, hit = cache.get_or_build("f" * 64, lambda out: (out / "a.bin").write_bytes(b"x") and {"kind": "t"})
    assert not hit and entry.parent == tmp_path / "private" and list(root.iterdir()) == []
    assert cache.read_verified(entry, "a.bin") == b"x"


def test_baselines_are_keyed_by_problem_hardware_toolchain_and_protocol(silu_built, monkeypatch):
    ev, problem, *_ = silu_built
    key = ev._baseline_key(problem, CONFIG)
    assert key != ev._baseline_key(problem + "\n", CONFIG)
    monkeypatch.setattr("agent.engine.evaluate.evaluator.BASELINE_PROTOCOL", "next")
    assert key != ev._baseline_key(problem, CONFIG)
    ev._store_compile(key, {"compile": {"device": {"median_ms": 1.0}}})
    assert (ev.trusted_root / "baselines" / f"{key}.json").is_file() and not (ev.cache_root / "baselines").exists()
    assert ev._cached_compile(key)["compile"] == {"device": {"median_ms": 1.0}}
    # A record filed under another key (copied, renamed) is not that key's baseline.
    (ev.trusted_root / "baselines" / f"{'0' * 64}.json").write_text((ev.trusted_root / "baselines" / f"{key}.json").read_text())
    assert ev._cached_compile("0" * 64) is None
