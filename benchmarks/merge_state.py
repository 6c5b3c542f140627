"""Merge what one device call of benchmarks/gpu/builtin_session.sh measured into the repository's state.

Usage: python benchmarks/merge_state.py CALL_FOLDER [--into benchmarks/results/builtin_kernelbench.jsonl]

CALL_FOLDER holds the call's state.jsonl and state.base (how many of its lines it started from). Only the lines after
those are taken. Each replaces the line of the same level and problem, in place, or is appended. A call that started
from an older copy of the state would otherwise put the older lines of problems measured since back in.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.builtin_policy import read_state  # noqa: E402

STATE = ROOT / "benchmarks" / "results" / "builtin_kernelbench.jsonl"

Line = dict[str, Any]


def measured_lines(call: Path) -> list[Line]:
    """The lines the call appended after its starting state."""
    if not (call / "state.jsonl").exists():
        raise SystemExit(f"{call} holds no state.jsonl: give the folder a device call of builtin_session.sh returned "
                         "(the run tool's files_at)")
    base_file = call / "state.base"
    if not base_file.exists():
        raise SystemExit(f"{base_file} is missing: this call's state does not say where its own lines start "
                         "(it predates state.base); merge its lines by hand, problem by problem")
    return read_state(call / "state.jsonl")[int(base_file.read_text().strip()):]


def merge(into: list[Line], measured: list[Line]) -> tuple[list[Line], list[str]]:
    """`into` with each measured line in the place of its problem's (or appended); and what changed, in words."""
    at = {(line["level"], line["problem"]): i for i, line in enumerate(into)}
    out, changes = list(into), []
    for line in measured:
        key = (line["level"], line["problem"])
        if key in at:
            old = out[at[key]].get("speedup_vs_best")
            changes.append(f"level {key[0]} {key[1]}: {_x(old)} -> {_x(line.get('speedup_vs_best'))} vs best")
            out[at[key]] = line
        else:
            changes.append(f"level {key[0]} {key[1]}: new, {_x(line.get('speedup_vs_best'))} vs best")
            at[key] = len(out)
            out.append(line)
    return out, changes


def _x(value: Any) -> str:
    return f"{value:.2f}x" if isinstance(value, (int, float)) else "none"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("call", type=Path, help="the call's returned folder (state.jsonl and state.base)")
    parser.add_argument("--into", type=Path, default=STATE)
    args = parser.parse_args(argv)
    into = read_state(args.into)
    merged, changes = merge(into, measured_lines(args.call))
    args.into.write_text("".join(json.dumps(line) + "\n" for line in merged))
    print("\n".join(changes) or "the call measured nothing", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
