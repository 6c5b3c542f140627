"""The command line that starts a training run under `accelerate launch`: what the studio's train worker runs.

    argv = command("run.yaml", "data/", "out/", num_processes=4, accelerate_config="trainer/accelerate/zero2.yaml")
    subprocess.run(argv, check=True)
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

from trainer.config import PipelineConfig

ACCELERATE_CONFIGS = Path(__file__).resolve().parent / "accelerate"


def command(config_path: Path | str, data_dir: Path | str, out_dir: Path | str, num_processes: int = 1,
            accelerate_config: Path | str | None = None) -> list[str]:
    """The argv of `accelerate launch ... -m trainer run --config ... --data ... --output ...`. A run whose config
    says device cpu (or auto on a machine without CUDA) launches with --cpu; `accelerate_config` (e.g. one of
    trainer/accelerate/*.yaml, DeepSpeed ZeRO-2/3 for several GPUs) sets the distributed setup."""
    if num_processes < 1:
        raise ValueError("num_processes must be at least 1")
    device = PipelineConfig.from_yaml(config_path).device
    cpu = device == "cpu" or (device == "auto" and not torch.cuda.is_available())
    if cpu and num_processes != 1:
        raise ValueError("a CPU run trains in one process; pass num_processes=1 or set device: cuda")
    argv = [sys.executable, "-m", "accelerate.commands.launch"]
    if accelerate_config is not None:
        argv += ["--config_file", str(accelerate_config)]
    if cpu:
        argv += ["--cpu"]
    argv += ["--num_processes", str(num_processes), "--num_machines", "1"]
    if accelerate_config is None:
        # Without a config file accelerate guesses these and warns about each; say them.
        argv += ["--mixed_precision", "no", "--dynamo_backend", "no"]
        if not cpu and num_processes > 1:
            argv += ["--multi_gpu"]
    return argv + ["-m", "trainer", "run", "--config", str(config_path), "--data", str(data_dir),
                   "--output", str(out_dir)]
