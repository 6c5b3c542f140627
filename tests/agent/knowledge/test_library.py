"""What the library keeps (agent/knowledge/library.py)."""
from __future__ import annotations

import pytest

from agent.knowledge.library import best_of_speedup, judge, judge_summary, judge_verdict


def test_the_best_of_speedup_is_against_the_faster_baseline_and_falls_back_to_eager():
    assert best_of_speedup(2.0, 1.5) == 1.5  # torch.compile was faster: the smaller ratio
    assert best_of_speedup(0.9, 1.2) == 0.9
    assert best_of_speedup(1.3, None) == 1.3
    assert best_of_speedup(None, None) is None


@pytest.mark.parametrize("status, eager, compiled, flags, keep, words", [
    ("accepted", 2.0, 1.5, [], True, "1.50x the faster PyTorch baseline (torch.compile)"),
    ("accepted", 0.5, None, [], False, "correct but 0.50x the faster PyTorch baseline (eager)"),
    ("accepted", 3.0, 1.02, [], False, "at least 1.05x faster"),
    ("accepted", 3.0, 2.0, ["noisy_timing"], False, "timing was noisy"),
    ("accepted", None, None, [], False, "never timed"),
    ("incorrect", 5.0, 5.0, [], False, "not accepted (incorrect)"),
])
def test_it_keeps_only_accepted_steady_kernels_faster_than_pytorch_by_the_margin(status, eager, compiled, flags, keep, words):
    decision = judge(status, eager, compiled, flags, 1.05)
    assert decision.keep is keep and words in decision.reason


def test_it_reads_a_stored_verdict_and_a_loop_summary_alike():
    verdict = {"status": "accepted", "flags": [{"flag": "noisy_timing", "detail": "wide"}],
               "timing": {"speedup_vs_eager": 2.0, "speedup_vs_compile": None}}
    assert not judge_verdict(verdict, 1.05).keep
    assert judge_verdict({**verdict, "flags": []}, 1.05).keep
    assert judge_summary({"status": "accepted", "speedup_vs_eager": 2.0, "speedup_vs_compile": 1.9, "flags": []}, 1.05).speedup == 1.9
