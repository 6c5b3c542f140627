"""The studio's typed view of a stored verdict (apps/runs/stored_verdict.py)."""
from agent.engine.verdict import BuildInfo, Stage, Status, Verdict
from apps.runs.stored_verdict import StoredVerdict


def test_it_reads_a_whole_verdict_by_name_and_gives_back_the_engines_type():
    stored = Verdict(Status.BUILD_ERROR, Stage.BUILD, "main.cpp: error", build=BuildInfo(backend="cpp"),
                     device="cpu", seconds={"session": 2.0, "profile": 1.0}).to_dict()
    v = StoredVerdict(stored)
    assert (v.status, v.stage, v.message, v.backend, v.device) == ("build_error", "build", "main.cpp: error", "cpp", "cpu")
    assert not v.accepted and v.timing is None and v.speedup_vs_eager is None and v.device_seconds() == 3.0
    assert v.verdict().status is Status.BUILD_ERROR


def test_it_reads_a_partial_or_older_verdict_with_the_missing_parts_absent():
    v = StoredVerdict({"status": "accepted", "correct": True, "timing": {"speedup_vs_eager": 2.5}, "added_later": 1})
    assert v.accepted and v.correct and v.speedup_vs_eager == 2.5 and v.speedup_vs_compile is None
    assert v.trials == [] and v.flags == [] and v.hardware == {} and v.build is None and v.stage == ""
    assert v.part("status", "added_later", "stage") == {"status": "accepted", "added_later": 1, "stage": None}
    assert StoredVerdict.of(None) is None and StoredVerdict.of({}) is None
    assert StoredVerdict({"seconds": {}}).status == "pending"
