"""Verdicts are strict JSON: infinite or NaN errors (a wrong-shaped output) survive a round trip
through json with allow_nan=False, as Postgres jsonb and browsers require."""
from __future__ import annotations

import json
import math

from agent.engine.verdict import Stage, Status, TrialResult, Verdict


def test_a_verdict_with_infinite_errors_is_strict_json_and_reads_back() -> None:
    verdict = Verdict(Status.INCORRECT, Stage.CORRECTNESS, "output 0 has shape (4, 5), expected (4, 4)", trials=[
        TrialResult(0, "normal", False, math.inf, math.nan, 1e-5, 1e-5, note="shape mismatch")])
    text = json.dumps(verdict.to_dict(), allow_nan=False)
    back = Verdict.from_dict(json.loads(text))
    assert math.isinf(back.trials[0].max_abs_error) and math.isnan(back.trials[0].max_rel_error)
    assert back.trials[0].atol == 1e-5 and back.trials[0].note == "shape mismatch"
