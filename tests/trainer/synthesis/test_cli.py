"""End to end: `python -m trainer.synthesis` writes distinct valid problems and the report (every check on)."""
import json

import pytest

from agent.engine.validation import validate_problem
from trainer.synthesis.cli import main
from trainer.synthesis.dedup import fingerprint


def test_it_writes_distinct_valid_problems_and_the_report(tmp_path, capsys):
    out, report = tmp_path / "problems.jsonl", tmp_path / "report.json"
    # The window is wide so the result does not depend on the machine's speed; torch.compile is checked.
    status = main(["--count", "4", "--out", str(out), "--report", str(report), "--seed", "5", "--min-ms", "0",
                   "--max-ms", "10000", "--quiet"])
    assert status == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 4
    for record in records:
        assert {"name", "source", "device", "ops", "origin"} <= set(record)
        assert record["origin"] == "synthetic" and record["device"] == "cpu"
        assert validate_problem(record["source"]).ok
        assert record["checks"]["compile_ms"] > 0  # torch.compile ran it and agreed with eager
    assert len({r["name"] for r in records}) == 4
    assert len({fingerprint("", r["source"]).signature for r in records}) == 4
    written = json.loads(report.read_text())
    assert written["kept"] == 4 and written["rejected_total"] == written["attempts"] - 4
    printed = capsys.readouterr().out
    assert f"kept 4 of {written['attempts']} candidates" in printed and "near_duplicate" in printed


def test_it_exits_2_saying_what_is_wrong_with_the_arguments(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        main(["--count", "0", "--out", str(tmp_path / "x.jsonl")])
    assert info.value.code == 2 and "count=0" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["--count", "2", "--out", str(tmp_path / "x.jsonl"), "--existing", str(tmp_path / "nope.txt")])
    assert info.value.code == 2 and "is not a folder, a .py problem file or a .jsonl file" in capsys.readouterr().err
