"""The `accelerate launch` command line the studio's train worker runs, and the accelerate configs we ship."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from accelerate.commands.config.config_args import ClusterConfig

from trainer.launch import ACCELERATE_CONFIGS, command
from tests.trainer.conftest import tiny_config


def test_it_launches_a_cpu_run_in_one_process(tmp_path: Path) -> None:
    tiny_config("random:tiny").to_yaml(tmp_path / "run.yaml")
    argv = command(tmp_path / "run.yaml", tmp_path / "data", tmp_path / "out")
    assert argv[:3] == [sys.executable, "-m", "accelerate.commands.launch"]
    assert argv[argv.index("--num_processes") + 1] == "1" and "--cpu" in argv
    assert argv[argv.index("-m", 3):] == ["-m", "trainer", "run", "--config", str(tmp_path / "run.yaml"),
                                          "--data", str(tmp_path / "data"), "--output", str(tmp_path / "out")]
    with pytest.raises(ValueError, match="a CPU run trains in one process"):
        command(tmp_path / "run.yaml", tmp_path / "data", tmp_path / "out", num_processes=2)


def test_it_launches_several_gpus_with_an_accelerate_config(tmp_path: Path) -> None:
    tiny_config("random:tiny", device="cuda", dtype="bfloat16").to_yaml(tmp_path / "run.yaml")
    zero2 = ACCELERATE_CONFIGS / "zero2.yaml"
    argv = command(tmp_path / "run.yaml", "data", "out", num_processes=4, accelerate_config=zero2)
    assert "--cpu" not in argv and argv[argv.index("--config_file") + 1] == str(zero2)
    assert argv[argv.index("--num_processes") + 1] == "4"


@pytest.mark.parametrize("name, distributed, zero_stage", [
    ("single-gpu.yaml", "NO", None), ("multi-gpu.yaml", "MULTI_GPU", None),
    ("zero2.yaml", "DEEPSPEED", 2), ("zero3.yaml", "DEEPSPEED", 3),
])
def test_it_ships_accelerate_configs_accelerate_reads(name: str, distributed: str, zero_stage: int | None) -> None:
    config = ClusterConfig.from_yaml_file(ACCELERATE_CONFIGS / name)
    assert config.distributed_type.value == distributed and config.mixed_precision == "bf16"
    assert (config.deepspeed_config or {}).get("zero_stage") == zero_stage
