"""Static checks of uploaded problems and candidates, by reading their syntax tree only.

This runs in the web process on untrusted code, so it never imports, compiles to bytecode or
executes anything: `ast.parse` and tree walks only. The sandbox is the real defence; these checks
exist to tell a user quickly, with a line number, what would make an evaluation fail or be rejected.

Columns are 1-based (what editors such as Monaco show); lines are 1-based as in Python.
"""
from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from agent.engine.backends import BACKENDS
from agent.engine.verdict import Flag

# Real KernelBench modules are a few KB; a megabyte is generous and keeps parsing cheap.
MAX_SOURCE_BYTES = 1_000_000

CANDIDATE_CLASS = "ModelNew"
# A problem's optional other input sets: a list of input lists, each checked and timed (agent/engine/evaluate/plan.py).
INPUT_VARIANTS = "get_input_variants"

Severity = Literal["error", "warning"]


@dataclass
class Issue:
    severity: Severity
    message: str  # what was wrong and what to do, with the file and line when known
    line: int | None = None
    col: int | None = None


@dataclass
class ValidationReport:
    kind: Literal["problem", "candidate"]
    issues: list[Issue] = field(default_factory=list)
    # Candidates only: which build backend the code appears to use ("cuda", "cpp", "nvrtc", "triton").
    backend_hint: str | None = None

    @property
    def ok(self) -> bool:
        return not self.errors()

    def errors(self) -> list[Issue]:
        return [i for i in self.issues if i.severity == "error"]

    def warnings(self) -> list[Issue]:
        return [i for i in self.issues if i.severity == "warning"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "ok": self.ok,
            "backend_hint": self.backend_hint,
            "issues": [asdict(i) for i in self.issues],
        }


@dataclass(frozen=True)
class ProblemNames:
    """The names a problem module uses; the upload form lets a user map other names (DESIGN §3)."""

    model: str = "Model"
    get_inputs: str = "get_inputs"
    get_init_inputs: str = "get_init_inputs"

    def __post_init__(self) -> None:
        for label, value in asdict(self).items():
            if not value.isidentifier():
                raise ValueError(f"ProblemNames.{label}={value!r} is not a Python identifier; set it to a name defined in the module")


def validate_problem(source: str, *, filename: str = "problem.py", names: ProblemNames | None = None) -> ValidationReport:
    names = names or ProblemNames()
    report = ValidationReport(kind="problem")
    tree = _parse(source, filename, report)
    if tree is None:
        return report
    module = ParsedModule(tree)
    _check_duplicates(module, filename, report)
    model = _require_class(module, names.model, filename, report)
    if model is not None:
        _require_forward(module, model, names.model, filename, report)
    _require_function(module, names.get_inputs, "the inputs passed to forward", filename, report)
    _require_function(module, names.get_init_inputs, "the arguments passed to the constructor", filename, report)
    if module.last(INPUT_VARIANTS) is not None:  # optional (DESIGN §3): checked like the required ones when present
        _require_function(module, INPUT_VARIANTS, "input lists (other shapes forward must serve)", filename, report)
    return report


def validate_candidate(
    source: str,
    *,
    filename: str = "candidate.py",
    problem_source: str | None = None,
    problem_names: ProblemNames | None = None,
) -> ValidationReport:
    """Check a candidate; with `problem_source`, also that ModelNew can be called like the problem's Model."""
    report = ValidationReport(kind="candidate")
    tree = _parse(source, filename, report)
    if tree is None:
        return report
    module = ParsedModule(tree)
    _check_duplicates(module, filename, report)
    model_new = _require_class(module, CANDIDATE_CLASS, filename, report)
    if model_new is not None:
        _require_forward(module, model_new, CANDIDATE_CLASS, filename, report)
    if model_new is not None and problem_source is not None:
        _compare_with_problem(module, model_new, problem_source, problem_names or ProblemNames(), filename, report)
    report.issues.extend(_risky_uses(module, filename))
    report.issues.extend(_dispatch_controls(source, filename))
    report.backend_hint = _backend_hint(module)
    return report


# PyTorch's switches for its dispatch keys and its Python modes, in Python (torch._C) and in C++ (c10::impl). With them
# a forward runs PyTorch's own ops unseen by the evaluation's op recorder (a dispatch mode) and op census (a function
# mode), and tells its checked calls from its timed ones. No kernel needs them.
_DISPATCH_CONTROLS = ("DisableTorchFunction", "_ExcludeDispatchKeyGuard", "_IncludeDispatchKeyGuard",
                      "_DisableTorchDispatch", "_disable_current_modes", "_pop_torch_dispatch_stack",
                      "_pop_torch_function_stack", "_unset_dispatch_mode", "_set_dispatch_mode",
                      "_len_torch_dispatch_stack", "_len_torch_function_stack", "_get_dispatch_stack_at",
                      "_get_function_stack_at", "_dispatch_tls_set_dispatch_key_excluded",
                      "_dispatch_tls_set_dispatch_key_included", "_ForceDispatchKeyGuard", "_PreserveDispatchKeyGuard",
                      "_AutoDispatchBelowAutograd", "_get_current_dispatch_mode", "ExcludeDispatchKeyGuard",
                      "IncludeDispatchKeyGuard", "tls_set_dispatch_key", "_force_tls_local_dispatch_key_set",
                      # The Python dispatcher runs an op's Python kernels (py_impl, and the tables it fills) beneath
                      # both records: a forward of zeros_like with F.silu as its CPU kernel was accepted with no
                      # kernel of its own (the eighth red team).
                      "PythonDispatcher", "python_dispatcher", "py_impl", "py_kernels", "python_key_table",
                      "functorch_table",
                      # The ATen observer (evaluate/aten_watch.py) is a record-function callback: these switch record
                      # functions off on a thread, remove callbacks, or reach the observer's own module.
                      "_enable_record_function", "_clear_callbacks", "enableRecordFunction", "RecordFunctionGuard",
                      "clearCallbacks", "clearGlobalCallbacks", "clearThreadLocalCallbacks", "removeCallback",
                      "disableCallback", "set_record_function_tls_", "kstudio_aten_watch",
                      # An op's kernel run past the dispatcher's record of calls, from Python
                      "redispatch_boxed", "_op_dk", "_get_operation_overload", "_SafeKernelFunction",
                      "_dispatch_get_computed_kernel_for_dispatch_key", "getAllOperatorsFor", "findOperatorFor",
                      "getOperatorForLiteral", "aoti_torch_",
                      # A thread's dispatch state set wholesale (record functions and mode stacks with it)
                      "ThreadLocalState", "PythonTorchFunctionTLS", "TorchDispatchModeTLS", "PythonDispatcherTLS",
                      "_RestorePythonTLSSnapshot",
                      # CUPTI, whose activity records the kernel census is (evaluate/kernel_census.py)
                      "cuptiActivity", "cuptiFinalize", "cuptiSubscribe", "cuptiUnsubscribe", "libcupti",
                      "kstudio_kernel_census")


_DISPATCH_CONTROL_NAMES = re.compile("|".join(map(re.escape, sorted(_DISPATCH_CONTROLS, key=len, reverse=True))))


def _dispatch_controls(source: str, filename: str) -> list[Issue]:
    """An error for each of PyTorch's dispatch switches the source names (anywhere: Python or an extension's C++), at
    its first use; the longest name wins where one holds another (_ExcludeDispatchKeyGuard, ExcludeDispatchKeyGuard)."""
    first: dict[str, int] = {}
    for match in _DISPATCH_CONTROL_NAMES.finditer(source):
        first.setdefault(match.group(), match.start())
    issues = []
    for name, at in first.items():
        line = source.count("\n", 0, at) + 1
        issues.append(Issue("error", f"{filename}, line {line}: the candidate uses {name}, which switches off or "
                            "inspects PyTorch's dispatch keys or modes: that hides the PyTorch ops it runs from the "
                            "evaluation (or tells its checked calls from its timed ones), so it is not allowed; do the "
                            "work in your own kernels", line))
    return issues


# --- parsing -------------------------------------------------------------------------------------


def _parse(source: str, filename: str, report: ValidationReport) -> ast.Module | None:
    size = len(source.encode("utf-8", errors="surrogatepass"))
    if size > MAX_SOURCE_BYTES:
        report.issues.append(Issue("error", f"{filename}: the file is {size:,} bytes, over the {MAX_SOURCE_BYTES:,}-byte limit; upload only the module itself, without embedded data or generated code"))
        return None
    if "\0" in source:
        line = source.count("\n", 0, source.index("\0")) + 1
        report.issues.append(Issue("error", f"{filename}, line {line}: the source contains a NUL character, so it is not Python text; save the file as UTF-8 text and upload it again", line))
        return None
    if not source.strip():
        kind = "a problem module (class Model, get_inputs, get_init_inputs)" if report.kind == "problem" else f"a candidate module defining class {CANDIDATE_CLASS}"
        report.issues.append(Issue("error", f"{filename}: the file is empty; paste or upload {kind}"))
        return None
    try:
        # feature_version is left alone: the sandbox runs the same Python as this process.
        return ast.parse(source, filename=filename)
    except SyntaxError as exc:
        report.issues.append(_syntax_issue(exc, filename))
    except (RecursionError, MemoryError):
        report.issues.append(Issue("error", f"{filename}: the source is nested too deeply to parse; split the deeply nested expression into smaller statements"))
    return None


def _syntax_issue(exc: SyntaxError, filename: str) -> Issue:
    text = (exc.text or "").strip()
    if len(text) > 120:  # a minified line can be a megabyte long; the start is enough to find it
        text = text[:117] + "..."
    shown = f": `{text}`" if text else ""
    where = f", line {exc.lineno}" if exc.lineno else ""
    return Issue("error", f"{filename}{where}: syntax error, {exc.msg}{shown}; fix the syntax there and upload again", exc.lineno, exc.offset)


# --- what the module defines --------------------------------------------------------------------


def _is_main_guard(node: ast.stmt) -> bool:
    """`if __name__ == "__main__":` runs only when executed as a script, never when the sandbox imports it."""
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    test = node.test
    sides = [test.left, *test.comparators]
    return (
        len(test.ops) == 1
        and isinstance(test.ops[0], ast.Eq)
        and any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides)
        and any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides)
    )


def _module_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements that run at import time: the module body and its if/try/with/for blocks, without main guards."""
    for node in body:
        if _is_main_guard(node):
            continue
        yield node
        if isinstance(node, (ast.If, ast.For, ast.While)):
            yield from _module_statements(node.body)
            yield from _module_statements(node.orelse)
        elif isinstance(node, ast.With):
            yield from _module_statements(node.body)
        elif isinstance(node, ast.Try):
            yield from _module_statements(node.body)
            for handler in node.handlers:
                yield from _module_statements(handler.body)
            yield from _module_statements(node.orelse)
            yield from _module_statements(node.finalbody)


def _bound_names(node: ast.stmt) -> list[str]:
    if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        return [node.name]
    if isinstance(node, ast.Assign):  # `a = b = 1` and `h, w = 32, 32` bind every name they name
        return [n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
        return [node.target.id]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"]
    return []


class ParsedModule:
    """The module-level bindings of a parsed module, in source order."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.bindings: dict[str, list[ast.stmt]] = {}
        for node in _module_statements(tree.body):
            for name in _bound_names(node):
                self.bindings.setdefault(name, []).append(node)
        self.aliases = _import_aliases(tree)

    def last(self, name: str) -> ast.stmt | None:
        # The last binding in source order is what the name refers to after import.
        nodes = self.bindings.get(name)
        return nodes[-1] if nodes else None

    def resolve_class(self, name: str, seen: frozenset[str] = frozenset()) -> ast.ClassDef | None:
        """The class a module-level name refers to, following simple aliases (`Model = MyNet`)."""
        node = self.last(name)
        if isinstance(node, ast.ClassDef):
            return node
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and name not in seen:
            return self.resolve_class(node.value.id, seen | {name})
        return None


def _check_duplicates(module: ParsedModule, filename: str, report: ValidationReport) -> None:
    """Two definitions of one name in the same block: only the last counts, which is rarely intended.

    Definitions in different branches (if/else, try/except ImportError) are alternatives, not duplicates.
    """
    blocks: list[list[ast.stmt]] = [module.tree.body]
    blocks += [n.body for n in _module_statements(module.tree.body) if isinstance(n, ast.ClassDef)]
    for block in blocks:
        seen: dict[str, ast.stmt] = {}
        for node in block:
            if not isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            first = seen.get(node.name)
            if first is not None:
                report.issues.append(_at(node, "warning", filename, f"`{node.name}` is defined again here (previously on line {first.lineno}); only this last definition is used, so delete or rename the other one"))
            seen[node.name] = node


def _require_class(module: ParsedModule, name: str, filename: str, report: ValidationReport) -> ast.ClassDef | None:
    node = module.last(name)
    if node is None:
        mapping = " (or map your class's name in the upload form)" if report.kind == "problem" else ""
        report.issues.append(Issue("error", f"{filename}: no class `{name}` is defined at module level{_main_guard_note(module, name)}; define `class {name}(nn.Module):` with a forward method{mapping}"))
        return None
    cls = module.resolve_class(name)
    if cls is None:
        report.issues.append(_at(node, "error", filename, f"`{name}` must be a class defined in this module, but here it is bound by {_binding_kind(node)}; write `class {name}(nn.Module):` with a forward method"))
    return cls


def _require_function(module: ParsedModule, name: str, returns: str, filename: str, report: ValidationReport) -> None:
    node = module.last(name)
    if node is None:
        report.issues.append(Issue("error", f"{filename}: no function `{name}()` is defined at module level{_main_guard_note(module, name)}; add `def {name}():` returning a list of {returns}, or map your function's name in the upload form"))
        return
    if isinstance(node, ast.ClassDef):
        report.issues.append(_at(node, "error", filename, f"`{name}` must be a function but is a class here; write `def {name}():` returning a list"))
        return
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        if isinstance(node, ast.AsyncFunctionDef):
            report.issues.append(_at(node, "error", filename, f"`{name}` is `async def`, so calling it returns a coroutine, not a list; make it a plain `def`"))
        low, _high = _arity(node.args, skip_self=False)
        required_kw = [a.arg for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults) if d is None]
        if low > 0 or required_kw:
            report.issues.append(_at(node, "error", filename, f"`{name}` has required parameters, but the evaluator calls it with no arguments; give every parameter a default or remove it"))


def _binding_kind(node: ast.stmt) -> str:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return "an import (its code is not part of the upload)"
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return "a function definition"
    return "an assignment"


def _main_guard_note(module: ParsedModule, name: str) -> str:
    """A common slip: the definition sits under the main guard, which never runs when the sandbox imports the module."""
    for node in module.tree.body:
        if _is_main_guard(node) and any(name in _bound_names(inner) for inner in ast.walk(node) if isinstance(inner, ast.stmt)):
            return f' (it is defined only under `if __name__ == "__main__":` on line {node.lineno}, which does not run on import)'
    return ""


# --- methods and signatures ---------------------------------------------------------------------


_MODULE_BASES = {"Module", "nn.Module", "torch.nn.Module", "object"}


Member = ast.FunctionDef | ast.AsyncFunctionDef | ast.Assign


def _own_member(cls: ast.ClassDef, name: str) -> Member | None:
    """`def name` or `name = ...` directly in the class body; the last one wins, as at runtime."""
    found: Member | None = None
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            found = node
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            found = node
    return found


def find_method(module: ParsedModule, cls: ast.ClassDef, name: str) -> tuple[Member | None, bool]:
    """Find a method on the class or on its bases defined in this module (breadth-first, close to the MRO).

    Returns (definition or None, whether every base was seen). A base we cannot see (imported or
    computed) may well provide the method, so callers soften their complaint then.
    """
    queue = [cls]
    seen: set[str] = set()
    all_known = True
    while queue:
        current = queue.pop(0)
        if current.name in seen:
            continue
        seen.add(current.name)
        member = _own_member(current, name)
        if member is not None:
            return member, all_known
        for base in current.bases:
            dotted = _dotted(base)
            if dotted in _MODULE_BASES:
                continue
            base_cls = module.resolve_class(dotted) if dotted and "." not in dotted else None
            if base_cls is None:
                all_known = False
            else:
                queue.append(base_cls)
    return None, all_known


def _require_forward(module: ParsedModule, cls: ast.ClassDef, label: str, filename: str, report: ValidationReport) -> None:
    forward, all_known = find_method(module, cls, "forward")
    if forward is not None:
        return
    if all_known:
        report.issues.append(_at(cls, "error", filename, f"class `{label}` has no `forward` method, so calling the model fails; add `def forward(self, ...):` computing the output"))
    else:
        report.issues.append(_at(cls, "warning", filename, f"class `{label}` defines no `forward` itself; this is fine only if a base class not in this file provides one, so define `forward` here to be sure"))


def _arity(args: ast.arguments, *, skip_self: bool) -> tuple[int, float]:
    """(fewest, most) positional arguments a call may pass; most is infinite with *args."""
    positional = [*args.posonlyargs, *args.args]
    if skip_self and positional:
        positional = positional[1:]
    defaults = min(len(args.defaults), len(positional))
    high: float = float("inf") if args.vararg else len(positional)
    return len(positional) - defaults, high


def _method_arity(module: ParsedModule, cls: ast.ClassDef, name: str) -> tuple[int, float] | None:
    method, all_known = find_method(module, cls, name)
    if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return _arity(method.args, skip_self=True)
    if method is None and all_known and name == "__init__":
        return 0, 0  # nn.Module's own __init__ takes no arguments
    return None  # assigned, inherited from an unseen base, or absent: nothing to compare


def _describe(span: tuple[int, float]) -> str:
    low, high = span
    if high == float("inf"):
        count = f"{low} or more"
    elif low == high:
        count = str(low)
    else:
        count = f"{low} to {int(high)}"
    return f"{count} positional argument{'' if count == '1' else 's'}"


def _compare_with_problem(module: ParsedModule, model_new: ast.ClassDef, problem_source: str, names: ProblemNames, filename: str, report: ValidationReport) -> None:
    try:
        problem_tree = ast.parse(problem_source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # ValueError: NUL bytes on some 3.11 releases
        report.issues.append(Issue("warning", f"{filename}: the problem module does not parse, so ModelNew's signature was not compared with it; fix the problem first"))
        return
    problem = ParsedModule(problem_tree)
    model = problem.resolve_class(names.model)
    if model is None:
        return  # validate_problem reports this; a candidate cannot fix it
    for method, what in (("forward", "inputs from get_inputs()"), ("__init__", "arguments from get_init_inputs()")):
        ref = _method_arity(problem, model, method)
        new = _method_arity(module, model_new, method)
        if ref is None or new is None:
            continue
        node = find_method(module, model_new, method)[0] or model_new
        accepts_all = new[0] <= ref[0] and new[1] >= ref[1]
        overlaps = new[0] <= ref[1] and ref[0] <= new[1]
        if accepts_all:
            continue
        message = f"`{CANDIDATE_CLASS}.{method}` takes {_describe(new)} but `{names.model}.{method}` takes {_describe(ref)}; the evaluator passes the same {what} to both, so give {CANDIDATE_CLASS}.{method} the same parameters as {names.model}.{method}"
        report.issues.append(_at(node, "warning" if overlaps else "error", filename, message))


# --- candidate-only warnings --------------------------------------------------------------------


def _walk_skipping_main(tree: ast.Module) -> Iterator[ast.AST]:
    """Every node, except under main guards; iterative, so a deeply nested expression cannot overflow the stack."""
    stack: list[ast.AST] = [n for n in reversed(tree.body) if not _is_main_guard(n)]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _dotted(node: ast.AST) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _import_aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> the module path it stands for (`import time as t`, `from torch import cuda`)."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    aliases[a.asname] = a.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                if a.name != "*":
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    return aliases


def resolved_name(node: ast.AST, aliases: dict[str, str]) -> str | None:
    dotted = _dotted(node)
    if dotted is None:
        return None
    head, _, rest = dotted.partition(".")
    if head in aliases:
        return aliases[head] + ("." + rest if rest else "")
    return dotted


_MODULE_WARNINGS: dict[str, str] = {
    "subprocess": "starts other programs, which the sandbox forbids; the evaluation will fail or be rejected, so compute everything in this process",
    "socket": "opens network connections, which the sandbox blocks; the evaluation will fail, so remove it",
    "ctypes": "calls native code behind PyTorch's back (e.g. to read device memory or patch the runtime), which the evaluator treats as tampering; build kernels with load_inline, NVRTC or Triton instead",
    "threading": f"starts background threads; work that runs after forward returns is flagged ({Flag.BACKGROUND_THREAD.value}) and the candidate rejected, so do all work inside forward",
    "_thread": f"starts background threads; work that runs after forward returns is flagged ({Flag.BACKGROUND_THREAD.value}) and the candidate rejected, so do all work inside forward",
    "multiprocessing": "starts other processes, which the sandbox's process limit forbids; the evaluation will fail, so compute in this process",
    "concurrent.futures": f"runs work on background threads or processes; it is flagged ({Flag.BACKGROUND_THREAD.value}) and the candidate rejected, so do all work inside forward",
}

_OS_CALLS = {"system", "popen", "fork", "forkpty", "kill", "killpg"}
_OS_CALL_PREFIXES = ("exec", "spawn", "posix_spawn")
_OS_WARNING = "starts or signals other processes, which the sandbox forbids; the evaluation will fail or be rejected, so remove it"

# Rebinding attributes under these roots changes how the evaluator times or checks the candidate.
_PATCH_ROOTS = ("time", "torch.cuda", "torch.Tensor", "torch.allclose", "torch.testing", "torch.utils.benchmark")
_PATCH_WARNING = f"replaces part of a module the evaluator uses to time and check candidates; this is flagged ({Flag.TIMER_TAMPERING.value}) and the candidate rejected, so leave library attributes alone"

_STREAM_CALLS = {"torch.cuda.Stream", "torch.cuda.ExternalStream", "torch.Stream"}
_STREAM_WARNING = f"creates a side stream; work on it is invisible to the timing events and is flagged ({Flag.SIDE_STREAM.value}) unless it is joined to the current stream, so launch kernels on torch.cuda.current_stream()"


def _in_patch_roots(path: str | None) -> bool:
    return path is not None and any(path == root or path.startswith(root + ".") for root in _PATCH_ROOTS)


def _imported_module(name: str) -> str | None:
    for module in _MODULE_WARNINGS:
        if name == module or name.startswith(module + "."):
            return module
    return None


def _risky_uses(module: ParsedModule, filename: str) -> list[Issue]:
    """One warning per risky API, at its first use, with how many more uses follow."""
    found: dict[str, list[tuple[ast.stmt | ast.expr, str]]] = {}

    def note(key: str, node: ast.stmt | ast.expr, why: str) -> None:
        found.setdefault(key, []).append((node, why))

    aliases = module.aliases
    for node in _walk_skipping_main(module.tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if (hit := _imported_module(a.name)) is not None:
                    note(f"import {hit}", node, _MODULE_WARNINGS[hit])
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            hits = {h for n in names if (h := _imported_module(n)) is not None}
            for hit in sorted(hits):
                note(f"import {hit}", node, _MODULE_WARNINGS[hit])
        elif isinstance(node, ast.Call):
            target = resolved_name(node.func, aliases)
            if target is None:
                continue
            head, _, attr = target.rpartition(".")
            if head == "os" and (attr in _OS_CALLS or attr.startswith(_OS_CALL_PREFIXES)):
                note(target, node, _OS_WARNING)
            elif target in _STREAM_CALLS:
                note(target, node, _STREAM_WARNING)
            elif target in {"__import__", "importlib.import_module"} and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                if (hit := _imported_module(node.args[0].value)) is not None:
                    note(f"import {hit}", node, _MODULE_WARNINGS[hit])
            elif target == "setattr" and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
                owner = resolved_name(node.args[0], aliases)
                if _in_patch_roots(owner):
                    note(f"{owner}.{node.args[1].value}", node, _PATCH_WARNING)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for target_node in targets:
                if isinstance(target_node, ast.Attribute):
                    path = resolved_name(target_node, aliases)
                    if _in_patch_roots(path):
                        note(path or "", node, _PATCH_WARNING)

    issues = []
    for key, uses in found.items():
        node, why = uses[0]
        more = f" (and {len(uses) - 1} more place{'s' if len(uses) > 2 else ''})" if len(uses) > 1 else ""
        issues.append(_at(node, "warning", filename, f"`{key}`{more} {why}"))
    issues.sort(key=lambda i: (i.line or 0, i.col or 0))
    return issues


def _backend_hint(module: ParsedModule) -> str | None:
    """A guess for the UI and the build step's default; the build itself decides from what actually runs."""
    seen: set[str] = set()
    for node in _walk_skipping_main(module.tree):
        if isinstance(node, ast.Call):
            target = resolved_name(node.func, module.aliases) or ""
            last = target.rpartition(".")[2]
            if last == "load_inline":
                seen.add("cuda" if _passes_cuda_sources(node) else "cpp")
            elif last in {"_compile_kernel", "compile_kernel"}:
                seen.add("nvrtc")
        elif isinstance(node, ast.Import) and any(a.name.split(".")[0] == "triton" for a in node.names):
            seen.add("triton")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "triton":
            seen.add("triton")
    # One candidate may mix backends; the one doing GPU work wins over C++ glue (BACKENDS is in that order).
    for backend in BACKENDS:
        if backend in seen:
            return backend
    return None


def _passes_cuda_sources(call: ast.Call) -> bool:
    def given(value: ast.expr) -> bool:
        empty = isinstance(value, ast.Constant) and value.value in (None, "")
        return not empty and not (isinstance(value, (ast.List, ast.Tuple)) and not value.elts)

    # load_inline(name, cpp_sources, cuda_sources=None, ...)
    if len(call.args) >= 3 and given(call.args[2]):
        return True
    return any(k.arg == "cuda_sources" and given(k.value) for k in call.keywords)


def _at(node: ast.stmt | ast.expr, severity: Severity, filename: str, text: str) -> Issue:
    return Issue(severity, f"{filename}, line {node.lineno}: {text}", node.lineno, node.col_offset + 1)
