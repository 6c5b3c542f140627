"""Compiler errors placed on the candidate's own lines, for editor markers.

A candidate's C++/CUDA code lives in string literals of its Python module; nvcc and g++ report positions
in the file load_inline wrote (main.cpp, cuda.cu), which starts with lines torch adds. g++ echoes the
offending source line under the message ("   12 |     foo(x);"), so the line is found by its text in
the candidate; without an echo (nvcc) the reported line is counted from the start of the literal that
holds the C++ code, after the header lines torch wrote. An error that cannot be placed is kept, on
line 1, with the position the compiler gave.
"""
from __future__ import annotations

import ast
import re
from dataclasses import asdict, dataclass
from typing import Any

# g++/clang: "path/main.cpp:12:5: error: message"; nvcc: "path/cuda.cu(12): error: message".
_GCC = re.compile(r"^(?P<file>[^\s:()][^:()]*?):(?P<line>\d+):(?:(?P<col>\d+):)?\s*(?P<sev>fatal error|error|warning):\s*(?P<msg>.*)$")
_NVCC = re.compile(r"^(?P<file>[^\s:()][^()]*?)\((?P<line>\d+)\):\s*(?P<sev>error|warning)[^:]*:\s*(?P<msg>.*)$")
# g++'s echo of the source line under a diagnostic: "   12 |     foo(x);"
_ECHO = re.compile(r"^\s*(?P<line>\d+)\s\|\s?(?P<text>.*)$")

# Lines torch's load_inline writes before the user's code: "#include <torch/extension.h>" in main.cpp;
# three includes (torch/types.h, cuda.h, cuda_runtime.h) in cuda.cu.
_HEADER_LINES = {"main.cpp": 1, "cuda.cu": 3}


@dataclass(frozen=True)
class Diagnostic:
    line: int  # 1-based line in the candidate module
    col: int
    severity: str  # "error" or "warning"
    message: str
    reported_at: str  # where the compiler said it was ("main.cpp:12:5")
    placed: bool  # False: the line could not be found in the candidate; shown on line 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def diagnostics(build_log: str, candidate_source: str, *, limit: int = 50) -> list[Diagnostic]:
    """The compiler's errors and warnings in `build_log`, on the lines of `candidate_source` they refer to."""
    lines = build_log.splitlines()
    source_lines = candidate_source.splitlines()
    literals = _code_literals(candidate_source)
    found: list[Diagnostic] = []
    for i, text in enumerate(lines):
        match = _GCC.match(text.strip()) or _NVCC.match(text.strip())
        if match is None:
            continue
        file, reported = match["file"], int(match["line"])
        col = int(match.groupdict().get("col") or 1)
        echo = _echo_after(lines, i, reported)
        line = _by_text(echo, source_lines, reported, literals) if echo else None
        if line is None:
            line = _by_offset(file, reported, literals)
        severity = "warning" if match["sev"] == "warning" else "error"
        where = f"{file.rsplit('/', 1)[-1]}:{reported}" + (f":{match['col']}" if match.groupdict().get("col") else "")
        diagnostic = Diagnostic(line or 1, col if line else 1, severity, match["msg"].strip(), where, line is not None)
        if diagnostic not in found:  # the studio may compile twice (full, then slim headers): same errors
            found.append(diagnostic)
        if len(found) >= limit:
            break
    return found


def _echo_after(lines: list[str], index: int, reported: int) -> str | None:
    """The source text g++ printed under the diagnostic at lines[index], if it did."""
    for text in lines[index + 1:index + 4]:
        echo = _ECHO.match(text)
        if echo and int(echo["line"]) == reported:
            return echo["text"]
    return None


def _by_text(echo: str, source_lines: list[str], reported: int, literals: list[tuple[int, int]]) -> int | None:
    wanted = echo.strip()
    if not wanted:
        return None
    hits = [n for n, text in enumerate(source_lines, 1) if text.strip() == wanted]
    if len(hits) == 1:
        return hits[0]
    if hits:  # the same text on several lines (a closing brace): the one nearest where the offset puts it
        guess = _by_offset("main.cpp", reported, literals) or hits[0]
        return min(hits, key=lambda n: abs(n - guess))
    return None


def _by_offset(file: str, reported: int, literals: list[tuple[int, int]]) -> int | None:
    header = _HEADER_LINES.get(file.rsplit("/", 1)[-1])
    if header is None or not literals:
        return None
    start, end = literals[0]
    line = start + (reported - header - 1)
    return line if start <= line <= end else None


def _code_literals(source: str) -> list[tuple[int, int]]:
    """(first, last) candidate lines of each multi-line string constant that looks like C++/CUDA."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    spans = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "\n" in node.value \
                and ("#include" in node.value or "__global__" in node.value or "torch::Tensor" in node.value):
            spans.append((node.lineno, node.end_lineno or node.lineno))
    return sorted(spans)
