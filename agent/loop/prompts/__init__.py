"""What the model is told, shipped as package data beside the skills (agent/loop/prompts/*.md): the system prompt, each
device's notes on its backends, and the instruction a run starts with when its user gives none."""
from __future__ import annotations

from importlib import resources
from string import Template


def _text(name: str) -> str:
    return resources.files(__name__).joinpath(name).read_text(encoding="utf-8")


# The first user message of a run whose user gave no instructions.
DEFAULT_INSTRUCTION = _text("instruction.md").strip()


def system_prompt(problem_source: str, device: str, skills: list[str]) -> str:
    """The system prompt of a run on `device` ("cpu" or "cuda"), listing the skill documents it can read."""
    skills_line = f"Skill documents you can read with read_skill: {', '.join(skills)}.\n" if skills else ""
    return Template(_text("system.md")).substitute(device_notes=_text(f"device_{device}.md"), skills_line=skills_line,
                                                   problem=problem_source.rstrip())
