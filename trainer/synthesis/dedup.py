"""Near-duplicate detection between problem sources, by reading their syntax trees (nothing is run).

Two measures, either one enough to call a pair near-duplicates:
- the op signature: the sequence of ops `Model.forward` performs, in evaluation order, with names
  normalized (`torch.relu`, `F.relu`, `x.relu()` and `nn.ReLU` all read `relu`; `self.fc(x)` reads the
  class of the module `__init__` assigned to `self.fc`; `+` with a constant reads `add_scalar`). Equal
  signatures mean the same computation up to sizes, constants and names.
- token similarity: difflib's ratio between the normalized token streams of the two `Model` classes
  (PyTorch's names kept, local names renamed in order of appearance, numbers and strings replaced by
  placeholders, docstrings and comments dropped). At the default threshold (0.97) two sources are
  near-duplicates when fewer than about one token in thirty differs: the same chain with one op name
  swapped (abs for tanh before the same scaling), or a copy with its variables renamed.
"""
from __future__ import annotations

import ast
import builtins
import difflib
import io
import json
import keyword
import re
import tokenize
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")  # RMSNorm -> RMS_Norm, Conv2d -> Conv2d
# Names kept as they are in the token stream; every other name (variables, attributes of self) is renamed
# by first appearance, so a copy with its variables renamed still reads as a copy.
_KEPT_NAMES = frozenset(keyword.kwlist) | frozenset(dir(builtins)) | {"torch", "nn", "F", "self", "Model", "forward",
                                                                     "__init__", "math"}


@dataclass
class Fingerprint:
    name: str
    signature: tuple[str, ...]
    tokens: list[str]


@dataclass
class DuplicateIndex:
    """The problems a new one is compared with: the existing ones, then each one kept."""

    threshold: float  # token similarity at or above which two sources are near-duplicates
    entries: list[Fingerprint] = field(default_factory=list)
    _signatures: dict[tuple[str, ...], str] = field(default_factory=dict)

    def add(self, name: str, source: str) -> None:
        fp = fingerprint(name, source)
        self.entries.append(fp)
        if fp.signature:
            self._signatures.setdefault(fp.signature, name)

    def match(self, source: str) -> str | None:
        """Why `source` is a near-duplicate of a problem in the index, or None when it is new."""
        fp = fingerprint("", source)
        if fp.signature in self._signatures:
            return f"the same ops ({' > '.join(fp.signature)}) as {self._signatures[fp.signature]}"
        best, best_name = 0.0, ""
        for other in self.entries:
            matcher = difflib.SequenceMatcher(None, fp.tokens, other.tokens, autojunk=False)
            if matcher.real_quick_ratio() < self.threshold or matcher.quick_ratio() < self.threshold:
                continue
            ratio = matcher.ratio()
            if ratio > best:
                best, best_name = ratio, other.name
        if best >= self.threshold:
            return f"source {best:.0%} similar to {best_name} (threshold {self.threshold:.0%})"
        return None


def fingerprint(name: str, source: str) -> Fingerprint:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return Fingerprint(name, (), [])
    model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
    if model is None:
        return Fingerprint(name, (), [])
    return Fingerprint(name, op_signature(model), model_tokens(source, model))


def op_signature(model: ast.ClassDef) -> tuple[str, ...]:
    modules = _submodules(model)
    forward = next((n for n in model.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None)
    if forward is None:
        return ()
    params = {a.arg for a in forward.args.args[1:]}
    ops: list[str] = []
    for statement in forward.body:
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
            continue  # a docstring
        _collect(statement, modules, params, ops)
    return tuple(ops)


def model_tokens(source: str, model: ast.ClassDef) -> list[str]:
    lines = source.splitlines(keepends=True)[model.lineno - 1:model.end_lineno]
    out: list[str] = []
    renamed: dict[str, str] = {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO("".join(lines)).readline):
            if tok.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                            tokenize.ENDMARKER):
                continue
            if tok.type == tokenize.NUMBER:
                out.append("<num>")
            elif tok.type == tokenize.STRING:
                if out and out[-1] == ":":  # a docstring right after a def/class line
                    continue
                out.append("<str>")
            elif tok.type == tokenize.NAME and tok.string not in _KEPT_NAMES and not _api_attribute(out):
                out.append(renamed.setdefault(tok.string, f"<v{len(renamed)}>"))
            else:
                out.append(tok.string)
    except (tokenize.TokenError, IndentationError):
        pass
    return out


def _api_attribute(tokens: list[str]) -> bool:
    """A name right after a dot is PyTorch's (x.sum, torch.relu) unless it follows `self.` (our attribute)."""
    return len(tokens) >= 2 and tokens[-1] == "." and tokens[-2] != "self"


def _submodules(model: ast.ClassDef) -> dict[str, str]:
    """`self.NAME = nn.Linear(...)` in __init__ -> {"NAME": "linear"}; parameters read "param"."""
    found: dict[str, str] = {}
    for node in ast.walk(model):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self"
                    and isinstance(node.value, ast.Call)):
                called = _callee(node.value.func)
                found[target.attr] = "param" if called in ("parameter", "buffer", "randn", "ones", "zeros") else called
    return found


def _collect(node: ast.AST, modules: dict[str, str], params: set[str], ops: list[str]) -> None:
    """Post-order walk: operands before the op, so the signature follows evaluation order."""
    if isinstance(node, ast.Call):
        for child in [*node.args, *(k.value for k in node.keywords)]:
            _collect(child, modules, params, ops)
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            ops.append(modules.get(func.attr, func.attr))
            return
        if isinstance(func, ast.Attribute) and not _is_namespace(func.value):
            _collect(func.value, modules, params, ops)  # x.sum(): x first
        ops.append(_callee(func))
        return
    if isinstance(node, ast.BinOp):
        _collect(node.left, modules, params, ops)
        _collect(node.right, modules, params, ops)
        ops.append(_binop(node, modules))
        return
    for child in ast.iter_child_nodes(node):
        _collect(child, modules, params, ops)


def _binop(node: ast.BinOp, modules: dict[str, str]) -> str:
    name = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.MatMult: "matmul",
            ast.Pow: "pow"}.get(type(node.op), type(node.op).__name__.lower())
    operands = (node.left, node.right)
    if any(isinstance(o, ast.Constant) or (isinstance(o, ast.UnaryOp) and isinstance(o.operand, ast.Constant))
           for o in operands):
        return f"{name}_scalar"
    if any(isinstance(o, ast.Attribute) and isinstance(o.value, ast.Name) and o.value.id == "self"
           and modules.get(o.attr, "param") == "param" for o in operands):
        return f"{name}_param"
    return name


def _callee(func: ast.AST) -> str:
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else "call"
    return _CAMEL.sub("_", name).lower()


def _is_namespace(node: ast.AST) -> bool:
    """torch, F, nn, torch.nn.functional...: a module, not a tensor a method is called on."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id in ("torch", "F", "nn", "math", "functional")


def load_existing(paths: Iterable[Path]) -> list[tuple[str, str]]:
    """(name, source) pairs from problem files, folders of them (*.py, not recursive) and JSON lines files
    with a "source" field (our own output). Raises ValueError naming a path that is none of these."""
    found: list[tuple[str, str]] = []
    for path in paths:
        if path.is_dir():
            found += [(str(p), p.read_text(encoding="utf-8")) for p in sorted(path.glob("*.py"))]
        elif path.suffix == ".py" and path.is_file():
            found.append((str(path), path.read_text(encoding="utf-8")))
        elif path.suffix == ".jsonl" and path.is_file():
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if line.strip():
                    try:
                        record = json.loads(line)
                        found.append((str(record.get("name") or f"{path}:{number}"), record["source"]))
                    except (json.JSONDecodeError, KeyError, TypeError, AttributeError):
                        raise ValueError(f"{path}:{number} is not a JSON object with a \"source\" field") from None
        else:
            raise ValueError(f"{path} is not a folder, a .py problem file or a .jsonl file of problems")
    return found
