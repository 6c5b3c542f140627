"""The training pipeline's settings: one dataclass per concern, a help string on every field, validated on
creation with messages that say what to set, read from and written to YAML (presets in trainer/presets/).

    config = PipelineConfig.from_yaml("trainer/presets/tiny-cpu.yaml")
    config.to_yaml("run.yaml")
"""
from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

STAGES = ("grpo_single", "rft", "critic", "grpo_multi")
DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("auto", "float32", "bfloat16")
# base_model values that build a random Qwen2 from a config (trainer/tiny.py) instead of loading a checkpoint.
RANDOM_MODELS = ("random:tiny", "random:small")


class ConfigError(ValueError):
    """A setting is missing or wrong; the message names it and says what to set."""


def _help(text: str, default: Any = dataclasses.MISSING, factory: Any = dataclasses.MISSING) -> Any:
    if factory is not dataclasses.MISSING:
        return field(default_factory=factory, metadata={"help": text})
    return field(default=default, metadata={"help": text})


@dataclass
class DataConfig:
    min_speedup: float = _help(
        "Rejection fine-tuning keeps a trajectory only if its best candidate was at least this many times faster "
        "than PyTorch eager (1.0: no slower).", 1.0)
    max_turns: int | None = _help(
        "Rejection fine-tuning and the critic drop trajectories of more model turns than this; null keeps all.", None)
    max_repeated_calls: int = _help(
        "A trajectory that makes the same tool call (same tool, same arguments) more than this many times in a row "
        "is looping, and rejection fine-tuning drops it.", 2)

    def __post_init__(self) -> None:
        if self.min_speedup < 0:
            raise ConfigError("data.min_speedup must be >= 0 (1.0 keeps trajectories no slower than eager)")
        if self.max_turns is not None and self.max_turns < 1:
            raise ConfigError("data.max_turns must be at least 1, or null to keep trajectories of any length")
        if self.max_repeated_calls < 1:
            raise ConfigError("data.max_repeated_calls must be at least 1 (1: any identical call in a row is a loop)")


@dataclass
class RewardConfig:
    trials: int = _help("Correctness trials on fresh inputs per evaluated candidate (the engine's EvalConfig.trials).", 2)
    min_rounds: int = _help("Rounds of interleaved timed batches (candidate, eager, torch.compile) per evaluation, at least "
                            "(the engine's EvalConfig.min_rounds; more follow while the speedup's interval is wide).", 5)
    compile_baseline: bool = _help(
        "Also time torch.compile of the reference, so the top milestone (beating torch.compile by the margin) "
        "can be earned; the compiled baseline is cached per problem.", True)
    candidate_seconds: float = _help("Wall-clock limit of one candidate's evaluation job, in seconds.", 300.0)
    build_seconds: float = _help("Wall-clock limit of building one candidate's extensions, in seconds.", 600.0)
    cache_dir: str | None = _help(
        "Build cache of the evaluation engine (shared with the studio's workers); null: the engine's default "
        "($KSTUDIO_CACHE_DIR or the checkout's .cache/kstudio).", None)

    def __post_init__(self) -> None:
        if self.trials < 1:
            raise ConfigError("reward.trials must be at least 1")
        if self.min_rounds < 1:
            raise ConfigError("reward.min_rounds must be at least 1")
        if self.candidate_seconds <= 0 or self.build_seconds <= 0:
            raise ConfigError("reward.candidate_seconds and reward.build_seconds must be positive numbers of seconds")


@dataclass
class OptimizationConfig:
    """What every stage has: optimizer, schedule and batch settings (validated by each stage's _check)."""

    learning_rate: float = _help("Peak learning rate of AdamW.", 1e-6)
    max_steps: int = _help("Optimizer steps of this stage; -1 trains for `epochs` passes over the data instead.", 100)
    epochs: float = _help("Passes over the stage's data when max_steps is -1.", 1.0)
    batch_size: int = _help("Examples per device per forward pass (for GRPO: completions per device).", 8)
    gradient_accumulation_steps: int = _help("Forward passes accumulated into one optimizer step.", 1)
    warmup_ratio: float = _help("Fraction of the steps spent warming the learning rate up from 0.", 0.0)
    weight_decay: float = _help("AdamW weight decay.", 0.0)

    def _check(self, section: str) -> None:
        if not self.learning_rate > 0:
            raise ConfigError(f"{section}.learning_rate must be positive, e.g. 1e-6")
        if self.max_steps == 0 or self.max_steps < -1:
            raise ConfigError(f"{section}.max_steps must be at least 1, or -1 to train for {section}.epochs instead")
        if self.max_steps == -1 and not self.epochs > 0:
            raise ConfigError(f"{section}.epochs must be positive when {section}.max_steps is -1")
        if self.batch_size < 1 or self.gradient_accumulation_steps < 1:
            raise ConfigError(f"{section}.batch_size and {section}.gradient_accumulation_steps must be at least 1")
        if not 0 <= self.warmup_ratio < 1:
            raise ConfigError(f"{section}.warmup_ratio must be in [0, 1)")
        if self.weight_decay < 0:
            raise ConfigError(f"{section}.weight_decay must be >= 0")


@dataclass
class GRPOStageConfig(OptimizationConfig):
    num_generations: int = _help(
        "Completions sampled per prompt (GRPO's group; advantages compare completions of one group).", 8)
    max_completion_length: int = _help(
        "Longest completion in tokens (in the multi-turn stage: all turns and tool results of a rollout).", 2048)
    temperature: float = _help("Sampling temperature of the rollouts.", 1.0)
    top_p: float = _help("Nucleus sampling of the rollouts (1.0: off).", 1.0)
    beta: float = _help("KL penalty towards the stage's starting policy (0: none, and no reference model is kept).",
                        0.0)
    entropy_coef: float = _help(
        "Entropy bonus in the loss: keeps the policy exploring while every completion of a group scores the same "
        "(early on, when nearly all candidates fail); 0 turns it off.", 0.0)

    def _check(self, section: str) -> None:
        super()._check(section)
        if self.num_generations < 2:
            raise ConfigError(f"{section}.num_generations must be at least 2: GRPO compares a group of completions")
        if (self.batch_size * self.gradient_accumulation_steps) % self.num_generations:
            raise ConfigError(f"{section}.batch_size x {section}.gradient_accumulation_steps "
                              f"({self.batch_size} x {self.gradient_accumulation_steps}) must be a multiple of "
                              f"{section}.num_generations ({self.num_generations}): each step trains whole groups")
        if self.max_completion_length < 1:
            raise ConfigError(f"{section}.max_completion_length must be at least 1 token")
        if not self.temperature > 0 or not 0 < self.top_p <= 1:
            raise ConfigError(f"{section}.temperature must be positive and {section}.top_p in (0, 1]")
        if self.beta < 0 or self.entropy_coef < 0:
            raise ConfigError(f"{section}.beta and {section}.entropy_coef must be >= 0")


@dataclass
class SingleTurnConfig(GRPOStageConfig):
    def __post_init__(self) -> None:
        self._check("grpo_single")


@dataclass
class MultiTurnConfig(GRPOStageConfig):
    max_completion_length: int = _help(
        "Longest rollout in tokens: every model turn and every tool result of it (tool results are masked from "
        "the loss but take room).", 8192)
    max_tool_calls: int = _help("Rounds of tool calling per rollout before it is cut (TRL's "
                                "max_tool_calling_iterations).", 10)
    max_turns: int = _help("Tool calls the agent may make per rollout (its turn budget); later calls are answered "
                           "'not run: the run is over'.", 10)
    critic_weight: float = _help(
        "Weight of the critic's predicted outcome added to each rollout's reward (reward shaping); 0 disables "
        "the critic.", 0.1)
    critic_path: str | None = _help(
        "A critic checkpoint (sequence classification, one label) to shape rewards with; null uses the one the "
        "critic stage of this pipeline trained, if it ran.", None)

    def __post_init__(self) -> None:
        self._check("grpo_multi")
        if self.max_tool_calls < 1 or self.max_turns < 1:
            raise ConfigError("grpo_multi.max_tool_calls and grpo_multi.max_turns must be at least 1")
        if self.critic_weight < 0:
            raise ConfigError("grpo_multi.critic_weight must be >= 0 (0 disables the critic)")


@dataclass
class RFTConfig(OptimizationConfig):
    learning_rate: float = _help("Peak learning rate of AdamW.", 1e-5)
    max_steps: int = _help("Optimizer steps; -1 trains for `epochs` passes over the kept trajectories.", -1)
    batch_size: int = _help("Conversations per device per forward pass.", 1)
    gradient_accumulation_steps: int = _help("Forward passes accumulated into one optimizer step.", 8)
    max_length: int = _help("Longest conversation in tokens (longer ones are truncated).", 16384)

    def __post_init__(self) -> None:
        self._check("rft")
        if self.max_length < 16:
            raise ConfigError("rft.max_length must be at least 16 tokens")


@dataclass
class CriticConfig(OptimizationConfig):
    learning_rate: float = _help("Peak learning rate of AdamW.", 1e-5)
    max_steps: int = _help("Optimizer steps; -1 trains for `epochs` passes over the trajectories.", -1)
    batch_size: int = _help("Conversations per device per forward pass.", 4)
    max_length: int = _help(
        "Longest conversation the critic reads, in tokens; longer ones keep their end (where the outcome shows).",
        8192)

    def __post_init__(self) -> None:
        self._check("critic")
        if self.max_length < 16:
            raise ConfigError("critic.max_length must be at least 16 tokens")


@dataclass
class PipelineConfig:
    base_model: str = _help(
        "The policy the first stage starts from: a transformers checkpoint directory (config.json, weights, a "
        "tokenizer with a chat template), or random:tiny / random:small for a random Qwen2 built from a config "
        "(tests, step-time measurements).")
    stages: list[str] = _help(f"Stages to run, in order, from {', '.join(STAGES)}; each starts from the policy the "
                              f"previous one wrote.", factory=lambda: list(STAGES))
    device: str = _help("Where training runs: cpu, cuda, or auto (cuda when available).", "auto")
    dtype: str = _help("Weights' dtype: float32, bfloat16, or auto (bfloat16 on cuda, float32 on cpu).", "auto")
    seed: int = _help("Seed of data order, sampling and initialisation.", 0)
    vllm_server_url: str | None = _help(
        "Base URL of a `trl vllm-serve` server that generates the GRPO stages' rollouts (e.g. http://gpu1:8000); "
        "null generates with transformers in the training process.", None)
    gradient_checkpointing: bool = _help("Recompute activations in the backward pass to save memory.", False)
    logging_steps: int = _help("Log (metrics.jsonl, stdout) every this many optimizer steps.", 1)
    data: DataConfig = _help("Filters of the stages' data.", factory=DataConfig)
    reward: RewardConfig = _help("How the evaluation engine judges the candidates the policy writes.",
                                 factory=RewardConfig)
    grpo_single: SingleTurnConfig = _help("Stage (a): single-turn GRPO warm-up on problems.",
                                          factory=SingleTurnConfig)
    rft: RFTConfig = _help("Stage (b): rejection fine-tuning (SFT) on successful trajectories.", factory=RFTConfig)
    critic: CriticConfig = _help("Stage (c): critic pre-training on trajectories' outcomes.", factory=CriticConfig)
    grpo_multi: MultiTurnConfig = _help("Stage (d): multi-turn GRPO with the agent's tools in the rollout.",
                                        factory=MultiTurnConfig)

    def __post_init__(self) -> None:
        if not isinstance(self.base_model, str) or not self.base_model.strip():
            raise ConfigError("base_model is required: a checkpoint directory, or random:tiny / random:small")
        if self.base_model.startswith("random:") and self.base_model not in RANDOM_MODELS:
            raise ConfigError(f"base_model {self.base_model!r} is not a known random model; use one of "
                              f"{', '.join(RANDOM_MODELS)} or a checkpoint directory")
        if not self.stages:
            raise ConfigError(f"stages is empty; list the stages to run, from {', '.join(STAGES)}")
        unknown = [s for s in self.stages if s not in STAGES]
        if unknown:
            raise ConfigError(f"stages has unknown names {unknown}; choose from {', '.join(STAGES)}")
        if len(set(self.stages)) != len(self.stages):
            raise ConfigError("stages lists a stage twice; list each stage once")
        if self.device not in DEVICES:
            raise ConfigError(f"device must be one of {', '.join(DEVICES)}, not {self.device!r}")
        if self.dtype not in DTYPES:
            raise ConfigError(f"dtype must be one of {', '.join(DTYPES)}, not {self.dtype!r}")
        if self.device == "cpu" and self.dtype == "bfloat16":
            raise ConfigError("dtype bfloat16 needs device cuda; on the cpu set dtype: float32 (or auto)")
        if self.vllm_server_url is not None and not self.vllm_server_url.startswith(("http://", "https://")):
            raise ConfigError(f"vllm_server_url must be an http(s) URL such as http://127.0.0.1:8000, not "
                              f"{self.vllm_server_url!r}; or null to generate in the training process")
        if self.logging_steps < 1:
            raise ConfigError("logging_steps must be at least 1")

    # ------------------------------------------------------------------------------- YAML

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PipelineConfig:
        """Build from plain data (parsed YAML), checking names and types; raises ConfigError."""
        return _build(cls, data, "")

    @classmethod
    def from_yaml(cls, path: Path | str) -> PipelineConfig:
        path = Path(path)
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"cannot read the config {path}: {exc.strerror}") from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path} is not valid YAML: {exc}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{path} must hold a YAML mapping of settings (base_model: ..., stages: [...])")
        return cls.from_dict(data)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_yaml(self, path: Path | str | None = None) -> str:
        text = yaml.safe_dump(self.to_dict(), sort_keys=False)
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text


def help_text(cls: type = PipelineConfig, prefix: str = "") -> list[tuple[str, str]]:
    """(dotted name, help) of every setting, nested sections included: the reference for a YAML file."""
    rows = []
    for f in dataclasses.fields(cls):
        hint = typing.get_type_hints(cls)[f.name]
        rows.append((prefix + f.name, f.metadata["help"]))
        if dataclasses.is_dataclass(hint):
            rows.extend(help_text(hint, f"{prefix}{f.name}."))
    return rows


def _build(cls: type, data: Any, where: str) -> Any:
    section = where.rstrip(".") or "the config"
    if not isinstance(data, dict):
        raise ConfigError(f"{section} must be a mapping of settings, not {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(data) - set(names))
    if unknown:
        raise ConfigError(f"{section} has unknown settings {unknown}; the settings are: {', '.join(names)}")
    values = {name: _value(hints[name], value, where + name) for name, value in data.items()}
    try:
        return cls(**values)
    except TypeError as exc:  # a required setting is missing
        missing = [f for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING
                   and f.default_factory is dataclasses.MISSING and f.name not in values]
        if missing:
            raise ConfigError(f"{section} lacks the required setting "
                              + "; ".join(f"{where}{f.name}: {f.metadata['help']}" for f in missing)) from None
        raise ConfigError(f"{section}: {exc}") from None


def _value(hint: Any, value: Any, name: str) -> Any:
    """`value` as the type `hint` names, or ConfigError saying what was expected."""
    if dataclasses.is_dataclass(hint):
        return _build(hint, value, name + ".")
    options = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    if value is None:
        if type(None) in options:
            return None
        raise ConfigError(f"{name} must be set (it cannot be null)")
    for option in options:
        if option is bool and isinstance(value, bool):
            return value
        if option is int and isinstance(value, int) and not isinstance(value, bool):
            return value
        if option is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if option is float and isinstance(value, str):
            try:  # YAML 1.1 reads 1e-6 (no dot) as a string
                return float(value)
            except ValueError:
                pass
        if option is str and isinstance(value, str):
            return value
        if typing.get_origin(option) is list and isinstance(value, list) and all(isinstance(v, str) for v in value):
            return list(value)
    expected = " or ".join("null" if o is type(None) else "a list of names" if typing.get_origin(o) is list
                           else {bool: "true/false", int: "an integer", float: "a number", str: "text"}[o]
                           for o in options)
    raise ConfigError(f"{name} must be {expected}, not {value!r}")
