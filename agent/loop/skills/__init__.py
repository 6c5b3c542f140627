"""Skill documents: short notes on writing fast, accepted kernels, shipped as package data
(agent/loop/skills/*.md) and read by the agent through its read-skill tool."""
from __future__ import annotations

from importlib import resources


def list_skills() -> list[str]:
    """The available skills' names (file names without .md), sorted."""
    return sorted(entry.name[:-3] for entry in resources.files(__name__).iterdir()
                  if entry.name.endswith(".md") and entry.is_file())


class UnknownSkill(KeyError):
    """No skill of that name; the message lists the ones there are."""

    def __str__(self) -> str:  # KeyError's own str() would quote the whole message
        return str(self.args[0])


def read_skill(name: str) -> str:
    """The markdown text of skill `name` (as listed by list_skills(); a trailing .md is accepted)."""
    stem = name.removesuffix(".md")
    available = list_skills()
    if stem not in available:
        raise UnknownSkill(f"no skill named {name!r}; available skills: {', '.join(available)}")
    return resources.files(__name__).joinpath(f"{stem}.md").read_text(encoding="utf-8")
