"""A candidate's verdict as the studio reads it back: agent.engine.verdict.Verdict.to_dict(), stored as JSON, seen through
one typed view instead of string keys scattered over the pages, the library, batches and the API.

The view is tolerant where the engine's own Verdict.from_dict is strict: a verdict stored by an older engine, or a
partial one, reads with its missing parts absent. It keeps the whole stored JSON (`data`), so a field a newer engine
adds travels on to the pages, events and API unchanged; `verdict()` gives the engine's own type."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agent.engine import Status, Verdict, device_seconds

PENDING = "pending"  # a candidate not evaluated yet


@dataclass(frozen=True)
class StoredVerdict:
    data: Mapping[str, Any]

    @classmethod
    def of(cls, data: Mapping[str, Any] | None) -> StoredVerdict | None:
        """The view of a stored verdict; None when there is none (not evaluated yet)."""
        return cls(data) if data else None

    def verdict(self) -> Verdict:
        """The engine's own dataclass (strict: raises ValueError for a verdict of another version)."""
        return Verdict.from_dict(dict(self.data))

    @property
    def status(self) -> str:
        return self.data.get("status") or PENDING

    @property
    def accepted(self) -> bool:
        return self.status == Status.ACCEPTED.value

    @property
    def correct(self) -> bool:
        return bool(self.data.get("correct"))

    @property
    def stage(self) -> str:
        return self.data.get("stage") or ""

    @property
    def message(self) -> str:
        return self.data.get("message") or ""

    @property
    def weights(self) -> str:
        return self.data.get("weights") or ""

    @property
    def device(self) -> str:
        return self.data.get("device") or ""

    @property
    def trials(self) -> list[dict[str, Any]]:
        return list(self.data.get("trials") or [])

    @property
    def flags(self) -> list[dict[str, Any]]:
        return list(self.data.get("flags") or [])

    def flag_names(self) -> list[str]:
        return [str(f.get("flag")) for f in self.flags if isinstance(f, Mapping)]

    @property
    def timing(self) -> dict[str, Any] | None:
        """Median, spread and speedups (agent.engine.verdict.Timing as stored); None when the candidate was not timed."""
        return self.data.get("timing") or None

    @property
    def speedup_vs_eager(self) -> float | None:
        return (self.timing or {}).get("speedup_vs_eager")

    @property
    def speedup_vs_compile(self) -> float | None:
        return (self.timing or {}).get("speedup_vs_compile")

    @property
    def build(self) -> dict[str, Any] | None:
        return self.data.get("build") or None

    @property
    def backend(self) -> str:
        return (self.build or {}).get("backend", "")

    @property
    def hardware(self) -> dict[str, Any]:
        return dict(self.data.get("hardware") or {})

    @property
    def toolchain(self) -> dict[str, Any]:
        return dict(self.data.get("toolchain") or {})

    @property
    def profile(self) -> dict[str, Any] | None:
        return self.data.get("profile") or None

    def device_seconds(self) -> float:
        return device_seconds(self.data.get("seconds"))

    def part(self, *keys: str) -> dict[str, Any]:
        """The named parts as stored (absent ones as None): what an event, a kernel's evidence or the API copies."""
        return {key: self.data.get(key) for key in keys}
