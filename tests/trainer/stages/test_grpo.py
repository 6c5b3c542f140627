"""The GRPO stages' TRL settings: the stage's values, and a vLLM server only when one is configured."""
from __future__ import annotations

from pathlib import Path

import pytest

from trainer.rewards import Engine
from trainer.stages.common import StageError
from trainer.stages.grpo import grpo_config
from tests.trainer.conftest import context, tiny_config


def test_it_generates_in_process_unless_a_vllm_server_is_configured(engine: Engine, tmp_path: Path) -> None:
    config = tiny_config("random:tiny", grpo_multi={"num_generations": 4, "batch_size": 4, "temperature": 0.7})
    args = grpo_config(context(config, engine, tmp_path, "4-grpo_multi"), config.grpo_multi,
                       max_tool_calling_iterations=3)
    assert not args.use_vllm and args.use_cpu and not args.bf16
    assert (args.num_generations, args.per_device_train_batch_size, args.temperature) == (4, 4, 0.7)
    assert (args.max_tool_calling_iterations, args.entropy_coef, args.report_to) == (3, 0.01, [])


def test_it_refuses_a_vllm_server_without_vllm_in_this_environment(engine: Engine, tmp_path: Path) -> None:
    pytest.importorskip("trl")
    from trl.import_utils import is_vllm_available

    if is_vllm_available():
        pytest.skip("vllm is installed here: TRL's own client would connect")
    config = tiny_config("random:tiny", vllm_server_url="http://127.0.0.1:8000")
    with pytest.raises(StageError, match="vllm is not importable here.*or set vllm_server_url: null"):
        grpo_config(context(config, engine, tmp_path, "1-grpo_single"), config.grpo_single)
