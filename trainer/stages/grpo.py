"""GRPOConfig for both GRPO stages: the stage's settings, and generation through a vLLM server when one is
configured."""
from __future__ import annotations

from typing import Any

from trl import GRPOConfig
from trl.import_utils import is_vllm_available

from trainer.config import GRPOStageConfig
from trainer.stages.common import StageContext, StageError, training_arguments


def grpo_config(ctx: StageContext, stage: GRPOStageConfig, **extra: Any) -> GRPOConfig:
    url = ctx.config.vllm_server_url
    if url is not None and not is_vllm_available():
        # TRL's server client pushes the new weights to the server after each step over NCCL, with vLLM's own
        # code: the training environment needs vllm importable, not just a reachable server.
        raise StageError(f"vllm_server_url is {url}, but vllm is not importable here: TRL syncs weights to the "
                         f"server with vLLM's code. Install vllm (<= 0.31, what TRL 1.16 supports) in the training "
                         f"environment and start the server with `trl vllm-serve --model ...`, or set "
                         f"vllm_server_url: null to generate in this process")
    return GRPOConfig(
        **training_arguments(ctx, stage),
        model_init_kwargs={"dtype": ctx.dtype},
        num_generations=stage.num_generations,
        max_completion_length=stage.max_completion_length,
        temperature=stage.temperature,
        top_p=stage.top_p,
        beta=stage.beta,
        entropy_coef=stage.entropy_coef,
        use_vllm=url is not None,
        vllm_mode="server",
        vllm_server_base_url=url,
        log_completions=False,
        **extra,
    )
