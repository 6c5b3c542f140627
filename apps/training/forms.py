"""The admin's launch form: a preset (trainer/presets/*.yaml) for every setting, with the stages, the base model,
the data filters and the key hyperparameters set here. Everything is checked before anything is queued, with
messages that say what to set."""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from django import forms
from django.conf import settings

from apps.problems.models import Origin
from apps.training import dataset
from trainer.config import RANDOM_MODELS, STAGES, ConfigError, PipelineConfig

PRESETS_DIR = Path(settings.BASE_DIR) / "trainer" / "presets"
STAGE_LABELS = {
    "grpo_single": "grpo_single: single-turn GRPO warm-up on problems",
    "rft": "rft: rejection fine-tuning on successful trajectories",
    "critic": "critic: value-model pre-training on trajectories' outcomes",
    "grpo_multi": "grpo_multi: multi-turn GRPO with the agent's tools",
}
GRPO_STAGES = ("grpo_single", "grpo_multi")
# Form field -> the stage settings it overrides in every selected stage that has it (blank: the preset's value).
STAGE_OVERRIDES = ("learning_rate", "max_steps", "batch_size", "num_generations", "max_completion_length")
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")


def preset_choices() -> list[tuple[str, str]]:
    return [(p.stem, p.stem) for p in sorted(PRESETS_DIR.glob("*.yaml"))]


class LaunchForm(forms.Form):
    name = forms.CharField(max_length=80, required=False, help_text="a label for lists and the endpoint's name")
    preset = forms.ChoiceField(choices=preset_choices, initial="tiny-cpu",
                               help_text="every setting not on this form comes from trainer/presets/<preset>.yaml")
    stages = forms.MultipleChoiceField(choices=[(s, STAGE_LABELS[s]) for s in STAGES],
                                       widget=forms.CheckboxSelectMultiple,
                                       error_messages={"required": "Choose at least one stage to run."},
                                       help_text="run in this order, each starting from the policy the previous one wrote")
    base_model = forms.CharField(max_length=500, widget=forms.TextInput(attrs={"size": 80}), help_text="checkpoint directory on the train workers (config.json, "
                                 "weights, tokenizer with a chat template), or random:tiny / random:small")
    device = forms.ChoiceField(choices=[("", "the preset's"), ("cpu", "cpu"), ("cuda", "cuda"), ("auto", "auto")],
                               required=False)
    num_processes = forms.IntegerField(min_value=1, max_value=64, initial=1, help_text="accelerate processes (one per GPU)")
    learning_rate = forms.FloatField(required=False, min_value=1e-9, max_value=1.0, help_text="blank: the preset's")
    max_steps = forms.IntegerField(required=False, min_value=1, max_value=1_000_000,
                                   help_text="optimizer steps per stage; blank: the preset's")
    batch_size = forms.IntegerField(required=False, min_value=1, max_value=4096, help_text="per device; blank: the preset's")
    num_generations = forms.IntegerField(required=False, min_value=2, max_value=512,
                                         help_text="GRPO stages: completions per prompt; blank: the preset's")
    max_completion_length = forms.IntegerField(required=False, min_value=1, max_value=131_072,
                                               help_text="GRPO stages: tokens per completion; blank: the preset's")
    # Data filters.
    min_speedup = forms.FloatField(required=False, min_value=0.0, max_value=1000.0,
                                   help_text="rft keeps trajectories at least this much faster than eager; blank: the preset's")
    only_accepted = forms.BooleanField(required=False, help_text="export only runs whose kernel the library kept (accepted and faster than PyTorch by the library's margin)")
    min_reward = forms.FloatField(required=False, help_text="export only runs whose final reward is at least this")
    since = forms.DateField(required=False, help_text="export only runs created on or after this date (YYYY-MM-DD)")
    problem_origin = forms.ChoiceField(choices=[("", "any")] + list(Origin.choices), required=False)
    problem_name_contains = forms.CharField(max_length=200, required=False)
    max_problems = forms.IntegerField(min_value=1, max_value=100_000, initial=500)

    GROUPS = (("Pipeline", ("name", "preset", "stages", "base_model", "device", "num_processes")),
              ("Hyperparameters (in every selected stage that has the setting)", STAGE_OVERRIDES),
              ("Data", ("min_speedup", "only_accepted", "min_reward", "since", "problem_origin",
                        "problem_name_contains", "max_problems")))

    def groups(self) -> list[tuple[str, list[forms.BoundField]]]:
        """The fields in the launch page's sections."""
        return [(title, [self[name] for name in names]) for title, names in self.GROUPS]

    def clean_base_model(self) -> str:
        value = self.cleaned_data["base_model"].strip()
        if value.startswith("random:"):
            if value not in RANDOM_MODELS:
                raise forms.ValidationError(f"Unknown random model {value!r}: use {' or '.join(RANDOM_MODELS)}, or a "
                                            "checkpoint directory.")
            return value
        path = Path(value)
        if not path.is_absolute():
            raise forms.ValidationError(f"Give the checkpoint's absolute path (starting with /), not {value!r}.")
        if not path.is_dir():
            raise forms.ValidationError(f"No directory at {path}: give a checkpoint directory that exists on the "
                                        "train workers.")
        if not (path / "config.json").is_file():
            raise forms.ValidationError(f"{path} is not a transformers checkpoint: it has no config.json (set the "
                                        "directory save_pretrained() wrote).")
        if not any((path / name).is_file() for name in WEIGHT_FILES):
            raise forms.ValidationError(f"{path} has no weights (model.safetensors or pytorch_model.bin).")
        if not any((path / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json")):
            raise forms.ValidationError(f"{path} has no tokenizer (tokenizer.json or tokenizer_config.json); save "
                                        "the tokenizer with its chat template next to the model.")
        return str(path)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if self.errors:
            return data
        try:
            preset = yaml.safe_load((PRESETS_DIR / f"{data['preset']}.yaml").read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise forms.ValidationError(f"The preset {data['preset']} cannot be read: {exc}") from None
        stages = [s for s in STAGES if s in data["stages"]]  # the pipeline's order, whatever the ticking order
        config = self._config(copy.deepcopy(preset), data, stages)
        try:
            data["pipeline"] = PipelineConfig.from_dict(config).to_dict()
        except ConfigError as exc:
            self._config_error(str(exc))
            return data
        filters = dataset.DataFilters(
            only_accepted=data["only_accepted"], min_reward=data["min_reward"],
            since=data["since"].isoformat() if data["since"] else None, problem_origin=data["problem_origin"],
            problem_name_contains=data["problem_name_contains"].strip(), max_problems=data["max_problems"])
        device = data["pipeline"]["device"]
        problems = len(dataset.problem_rows(filters, settings.KSTUDIO_DEVICE if device == "auto" else device))
        missing = dataset.missing_data(stages, problems, dataset.trajectory_runs(filters).count())
        if missing:
            self.add_error(None, missing)
        data["filters"] = filters
        return data

    def _config(self, config: dict[str, Any], data: dict[str, Any], stages: list[str]) -> dict[str, Any]:
        config["base_model"], config["stages"] = data["base_model"], stages
        if data["device"]:
            config["device"] = data["device"]
            if data["device"] == "cpu" and config.get("dtype") == "bfloat16":
                config["dtype"] = "float32"  # a GPU preset run on the CPU: bfloat16 is CUDA-only in the trainer
        if data["min_speedup"] is not None:
            config.setdefault("data", {})["min_speedup"] = data["min_speedup"]
        for stage in stages:
            section = config.setdefault(stage, {})
            for name in STAGE_OVERRIDES:
                if data[name] is None or (name in ("num_generations", "max_completion_length") and stage not in GRPO_STAGES):
                    continue
                section[name] = data[name]
        return config

    def _config_error(self, message: str) -> None:
        """The trainer's message, on the form field it is about (e.g. 'grpo_single.num_generations ...')."""
        for name in STAGE_OVERRIDES + ("base_model", "device", "min_speedup"):
            if name in message or (name == "min_speedup" and "data.min_speedup" in message):
                self.add_error(name, f"{message} (preset {self.cleaned_data['preset']} plus this form)")
                return
        self.add_error(None, message)
