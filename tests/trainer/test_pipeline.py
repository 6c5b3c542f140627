"""The pipeline refuses a run whose stages lack their data before training anything, and says so in result.json."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainer.data import DataError
from trainer.pipeline import run
from tests.trainer.conftest import tiny_config
from tests.trainer.records import ROW_SUM, failed, write_data


@pytest.mark.parametrize("stages, records, problems, message", [
    (["grpo_single"], [failed()], [], "stage grpo_single needs problems"),
    (["critic"], [], [("row_sum", ROW_SUM)], "stages rft and critic need trajectories"),
    (["rft"], [failed()], [], "no trajectory passed rejection fine-tuning's filters (0 of 1 trajectories kept"),
])
def test_it_refuses_stages_without_their_data(tmp_path: Path, stages: list[str], records: list, problems: list,
                                              message: str) -> None:
    data = write_data(tmp_path / "data", records, problems)
    with pytest.raises(DataError) as caught:
        run(tiny_config("random:tiny", stages=stages), data, tmp_path / "out")
    assert message in str(caught.value)
    result = json.loads((tmp_path / "out" / "result.json").read_text())
    assert result == {"status": "failed", "error": str(caught.value), "stages": []}
    assert not (tmp_path / "out" / "base-model").exists()  # nothing was built or trained


def test_it_refuses_a_base_model_that_is_not_a_checkpoint(tmp_path: Path) -> None:
    data = write_data(tmp_path / "data", [], [("row_sum", ROW_SUM)])
    with pytest.raises(DataError, match="is not a transformers checkpoint directory"):
        run(tiny_config(tmp_path, stages=["grpo_single"]), data, tmp_path / "out")
