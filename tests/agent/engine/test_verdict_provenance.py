"""Every field and flag of a verdict names the process that measured it (docs/threat-model.md, "Where each verdict
field comes from"): a field added to agent/engine/verdict.py without its row there fails here."""
import dataclasses
import re
from pathlib import Path

from agent.engine.verdict import Flag, Timing, Verdict

THREAT_MODEL = Path(__file__).resolve().parents[3] / "docs" / "threat-model.md"


def _named_in_the_table() -> set[str]:
    """The backquoted names in the first column of the threat model's table rows."""
    names: set[str] = set()
    for line in THREAT_MODEL.read_text().splitlines():
        if line.startswith("| ") and line.count("|") >= 3:
            names.update(re.findall(r"`([^`]+)`", line.split("|")[1]))
    return names


def _covered(name: str, named: set[str]) -> bool:
    return name in named or f"{name}[*]" in named or any(
        n.endswith("*") and name.startswith(n[:-1]) for n in named)


def test_every_verdict_and_timing_field_and_every_flag_names_where_it_comes_from():
    named = _named_in_the_table()  # "flags" and "timing" are named by their members: each flag, each timing field
    missing = [f.name for f in dataclasses.fields(Verdict)
               if f.name not in ("version", "device", "flags", "timing") and not _covered(f.name, named)]
    # Timing's fields are named `timing.x`, or bare in a row that begins with `timing.`.
    timing_named = {n.removeprefix("timing.") for n in named}
    missing += [f"timing.{f.name}" for f in dataclasses.fields(Timing) if not _covered(f.name, timing_named)]
    missing += [f"flag {flag.value}" for flag in Flag if flag.value not in named]
    assert not missing, f"not in docs/threat-model.md's table of verdict fields: {missing}"
