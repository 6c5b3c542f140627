"""Rewards from the real evaluation engine: a correct kernel for an example problem earns a positive,
correctness-gated reward, a wrong one and an answer without a candidate do not."""
from __future__ import annotations

from pathlib import Path

import pytest

from trainer.rewards import NO_CANDIDATE, Engine, EngineReward, extract_candidate
from tests.trainer.records import EXAMPLES, ROW_SUM

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "candidates"
CORRECT = (CORPUS / "legit_cpp_sum_rows.py").read_text()  # a C++ row sum: right for examples/row_sum.py
WRONG = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return torch.zeros(x.shape[0])\n"


def answer(code: str) -> list[dict]:
    return [{"role": "assistant", "content": f"Here is my kernel.\n```python\n{code}```\nIt sums each row."}]


def test_it_rewards_a_correct_kernel_positively_through_the_engine(engine: Engine) -> None:
    reward, status = EngineReward(engine).score(ROW_SUM, "cpu", answer(CORRECT)[0]["content"])
    assert status == "accepted"
    # Correct earns 1; beating eager by the margin 2 (torch.compile is not timed in these settings).
    assert reward in (1.0, 2.0)


def test_it_gives_a_wrong_kernel_and_an_answer_without_one_the_failing_reward(engine: Engine,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    judged: list[str] = []
    evaluate = engine.evaluate

    def counting(problem: str, candidate: str, device: str):  # a spy: every evaluation still runs for real
        judged.append(candidate)
        return evaluate(problem, candidate, device)

    monkeypatch.setattr(engine, "evaluate", counting)
    metrics: dict[str, float] = {}
    rewards = EngineReward(engine)(prompts=[[]] * 3, completions=[answer(WRONG), answer(WRONG), answer("gibberish")],
                                   problem_source=[ROW_SUM] * 3, device=["cpu"] * 3, log_metric=metrics.__setitem__)
    assert rewards == [NO_CANDIDATE, NO_CANDIDATE, NO_CANDIDATE] and NO_CANDIDATE < 0
    assert judged == [WRONG]  # the same candidate twice is judged once; an answer without one never
    assert metrics == {"engine/no_candidate": pytest.approx(1 / 3), "engine/accepted": 0.0}
    assert EngineReward(engine).score(ROW_SUM, "cpu", answer(WRONG)[0]["content"]) == (-1.0, "incorrect")


def test_it_starts_no_sandbox_for_answers_without_a_candidate(tmp_path: Path, engine: Engine) -> None:
    fresh = Engine(engine.config)
    assert EngineReward(fresh)([[]], ["no code here"], [ROW_SUM], ["cpu"]) == [NO_CANDIDATE]
    assert fresh._own == {}


def test_it_finds_the_candidate_in_an_answer() -> None:
    softmax = (EXAMPLES / "softmax_rows.py").read_text()
    assert extract_candidate(f"first\n```python\n{softmax}```\nthen\n```python\n{WRONG}```") == WRONG
    assert extract_candidate(f"```\n{WRONG}```") == WRONG
    assert extract_candidate(f"```python\n{WRONG}") == WRONG  # cut off before its closing fence
    assert extract_candidate(WRONG) == WRONG
    assert extract_candidate(f"```python\n{softmax}```") is None  # a block, but no ModelNew in it
