"""The knowledge base's logic (KernelBlaster): what a finished run teaches, how to find it again, how the
model reads it. Plain Python; the studio stores entries in its database (apps/knowledge) and passes them
here as dicts.

    signature = problem_signature(problem_source)      # ops, input shapes, dtypes: AST only
    entries = distill(state)                            # after a run: a few entries, best first
    ranked = rank(stored, signature, query, limit=5)    # signature similarity + BM25 text similarity
    text = format_entries(ranked)                       # what the model reads

An entry is a dict with the keys of ENTRY_KEYS: title, body, status, speedup_vs_eager, speedup_vs_compile,
backend, device, signature (Signature.to_dict()), profile (a small dict or None), turn.
"""
from __future__ import annotations

import ast
import json
import math
import re
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rank_bm25 import BM25L

# The validator's AST helpers (module bindings, import aliases, method lookup through local bases) read problems
# exactly as it does; the same untrusted-source rules apply here.
from agent.validation import MAX_SOURCE_BYTES, ProblemNames, _method, _Module, _resolved, validate_candidate
from agent.verdict import Status

if TYPE_CHECKING:
    from agent.loop import AgentState

ENTRY_KEYS = ("title", "body", "status", "speedup_vs_eager", "speedup_vs_compile", "backend", "device", "signature",
              "profile", "turn")

# A run yields a handful of entries: the knowledge base should hold lessons, not trajectories.
MAX_ENTRIES_PER_RUN = 5
MAX_ACCEPTED_FIRST = 3
TITLE_CHARS = 160
BODY_CHARS = 1500
NOTE_CHARS = 400
MESSAGE_CHARS = 300
# What the model reads from one search or at the start: a few KB, next to many turns of its own.
FORMAT_CHARS = 4000
ENTRY_FORMAT_CHARS = 900

NO_ENTRIES = ("The knowledge base has no entries relevant to this yet; rely on the skills (read_skill) and your "
              "own measurements.")

# How much each part of a signature counts in `signature_similarity` (they add up to 1).
OPS_WEIGHT, SHAPES_WEIGHT, DTYPES_WEIGHT, DEVICE_WEIGHT = 0.55, 0.15, 0.10, 0.20
# With a query, text similarity counts as much as the problem's likeness.
TEXT_WEIGHT = 0.5

DEFAULT_DTYPE = "float32"


# ---------------------------------------------------------------------------------- signatures

@dataclass
class Signature:
    """What a problem computes, read off its source: the ops, the input shapes and dtypes."""

    ops: list[str] = field(default_factory=list)
    """Sorted, distinct op names: "matmul", "relu", "conv2d", "softmax", "add", ..."""
    shapes: list[list[int | None] | None] = field(default_factory=list)
    """One per input of get_inputs(); None for a dimension or a whole shape that could not be read."""
    dtypes: list[str | None] = field(default_factory=list)
    """One per input ("float32" unless a dtype was given); None where the input could not be read."""

    def to_dict(self) -> dict[str, Any]:
        return {"ops": list(self.ops), "shapes": [None if s is None else list(s) for s in self.shapes],
                "dtypes": list(self.dtypes)}

    @classmethod
    def from_dict(cls, data: Any) -> Signature:
        """Lenient: signatures are edited by hand in the admin, so a malformed part is dropped, never raised."""
        if not isinstance(data, Mapping):
            return cls()
        ops = data.get("ops")
        shapes = data.get("shapes")
        dtypes = data.get("dtypes")
        return cls(
            ops=sorted({o for o in ops if isinstance(o, str) and o}) if isinstance(ops, list) else [],
            shapes=[_clean_shape(s) for s in shapes] if isinstance(shapes, list) else [],
            dtypes=[d if isinstance(d, str) else None for d in dtypes] if isinstance(dtypes, list) else [])


def _clean_shape(shape: Any) -> list[int | None] | None:
    if not isinstance(shape, list):
        return None
    return [d if isinstance(d, int) and not isinstance(d, bool) else None for d in shape]


def problem_signature(source: str, names: ProblemNames | None = None) -> Signature:
    """The problem's signature by reading its syntax tree only: the module is untrusted and never imported.
    Whatever cannot be read statically becomes None (or is left out); this never raises on bad input."""
    names = names or ProblemNames()
    if not isinstance(source, str) or "\0" in source or len(source.encode("utf-8", "surrogatepass")) > MAX_SOURCE_BYTES:
        return Signature()
    try:
        module = _Module(ast.parse(source))
        return Signature(ops=_ops(module, names.model), **_inputs(module, names.get_inputs))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return Signature()


# Calls that move, view or convert data: they say nothing about the computation's kind.
_NOT_OPS = frozenset({
    "view", "reshape", "permute", "transpose", "contiguous", "size", "dim", "unsqueeze", "squeeze", "flatten",
    "expand", "expand_as", "to", "cuda", "cpu", "float", "half", "double", "bfloat16", "numel", "t", "clone", "detach",
    "type", "type_as", "item", "tolist", "new_empty", "new_zeros", "zeros", "ones", "empty", "zeros_like",
    "ones_like", "empty_like", "arange", "tensor", "as_tensor", "stride", "is_contiguous", "chunk", "split", "cat",
    "stack", "Parameter", "super", "__init__"})
# nn classes that hold other modules or tensors rather than compute.
_CONTAINERS = frozenset({"Module", "Sequential", "ModuleList", "ModuleDict", "Parameter", "ParameterList",
                         "ParameterDict", "Identity", "Buffer"})
# Tensor methods that compute (x.sum(), x.relu()); other attribute calls may be anything.
_TENSOR_METHODS = frozenset({
    "sum", "mean", "max", "min", "amax", "amin", "prod", "softmax", "log_softmax", "exp", "log", "sigmoid", "tanh",
    "relu", "gelu", "matmul", "mm", "bmm", "clamp", "clip", "pow", "sqrt", "rsqrt", "abs", "norm", "var", "std",
    "cumsum", "cumprod", "argmax", "argmin", "logsumexp", "mul", "add", "sub", "div", "neg", "reciprocal", "sin",
    "cos", "erf", "where", "masked_fill", "topk", "sort", "gather", "scatter", "baddbmm", "addmm", "einsum"})
_OPERATORS: dict[type[ast.operator], str] = {ast.MatMult: "matmul", ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul",
                                             ast.Div: "div", ast.Pow: "pow"}


def _ops(module: _Module, model_name: str) -> list[str]:
    model = module.resolve_class(model_name)
    if model is None:
        return []
    ops: set[str] = set()
    init, _ = _method(module, model, "__init__")
    if isinstance(init, ast.FunctionDef):
        # nn layers built in the constructor: nn.Conv2d -> conv2d (their use in forward is self.conv(x)).
        for node in ast.walk(init):
            if isinstance(node, ast.Call):
                target = _resolved(node.func, module.aliases) or ""
                head, _, layer = target.rpartition(".")
                if head == "torch.nn" and layer not in _CONTAINERS:
                    ops.add(layer.lower())
    # forward, and the model's own helper methods that forward calls (self._block(x)), transitively.
    pending, seen = ["forward"], set()
    while pending:
        name = pending.pop()
        method, _ = _method(module, model, name)
        if name in seen or not isinstance(method, ast.FunctionDef):
            continue
        seen.add(name)
        for node in ast.walk(method):
            if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
                ops.add(_OPERATORS[type(node.op)])
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                owner = node.func.value
                if isinstance(owner, ast.Name) and owner.id == "self":
                    pending.append(node.func.attr)
                    continue
                target = _resolved(node.func, module.aliases) or ""
                attr = node.func.attr
                if target.startswith("torch.") and attr not in _NOT_OPS:
                    ops.add(attr.lower())
                elif attr in _TENSOR_METHODS:
                    ops.add(attr)
    return sorted(ops)


# Tensor constructors whose shape is given by their size arguments; randint's default dtype is int64.
_CONSTRUCTORS = frozenset({"randn", "rand", "zeros", "ones", "empty", "full", "randint"})
_DTYPES = {
    "float32": "float32", "float": "float32", "float16": "float16", "half": "float16", "bfloat16": "bfloat16",
    "float64": "float64", "double": "float64", "int64": "int64", "long": "int64", "int32": "int32", "int": "int32",
    "int16": "int16", "short": "int16", "int8": "int8", "uint8": "uint8", "bool": "bool",
    "float8_e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8_e5m2"}
# Chained conversions after a constructor: torch.randn(n).half().cuda()
_CAST_METHODS = {"half": "float16", "float": "float32", "double": "float64", "bfloat16": "bfloat16", "long": "int64",
                 "int": "int32", "bool": "bool"}
_PASS_METHODS = frozenset({"cuda", "cpu", "contiguous", "requires_grad_", "clone", "detach"})
_CHAINED = frozenset(_CAST_METHODS) | _PASS_METHODS | {"to"}
# Ints beyond this are not sizes; stop arithmetic on hostile input (2 ** 10 ** 9) from running away.
_MAX_INT = 1 << 62

Tensor = tuple[list[int | None] | None, str | None]


class _Scope:
    """Names as get_inputs sees them: its own assignments first, then the module's (resolved lazily, once)."""

    def __init__(self, module: _Module) -> None:
        self.module = module
        self.local: dict[str, Any] = {}
        self._globals: dict[str, Any] = {}
        self._resolving: set[str] = set()

    def lookup(self, name: str, module_level: bool = False) -> Any:
        if not module_level and name in self.local:
            return self.local[name]
        if name in self._globals:
            return self._globals[name]
        node = self.module.last(name)
        if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None or name in self._resolving:
            return None  # not a simple constant, or defined in terms of itself
        self._resolving.add(name)
        try:
            self._globals[name] = self.value(node.value, module_level=True)
        finally:
            self._resolving.discard(name)
        return self._globals[name]

    def value(self, node: ast.expr, module_level: bool = False) -> Any:
        """An int, float or dtype name ("dtype:float16"); None when not a simple constant expression.
        A module-level expression sees module names only, never get_inputs' locals."""
        if isinstance(node, ast.Constant) and _is_number(node.value):
            return node.value
        if isinstance(node, ast.Name):
            return self.lookup(node.id, module_level)
        if isinstance(node, ast.Attribute):
            dtype = _dtype_name(node, self.module)
            return f"dtype:{dtype}" if dtype else None
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            operand = self.value(node.operand, module_level)
            return None if not _is_number(operand) else (-operand if isinstance(node.op, ast.USub) else operand)
        if isinstance(node, ast.BinOp):
            return _arithmetic(node.op, self.value(node.left, module_level), self.value(node.right, module_level))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "int" and len(node.args) == 1:
            number = self.value(node.args[0], module_level)
            return int(number) if _is_number(number) and math.isfinite(number) and abs(number) < _MAX_INT else None
        return None

    def size(self, node: ast.expr) -> int | None:
        number = self.value(node)
        return number if isinstance(number, int) and 0 <= number < _MAX_INT else None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _arithmetic(op: ast.operator, left: Any, right: Any) -> int | float | None:
    if not (_is_number(left) and _is_number(right)):
        return None
    try:
        if isinstance(op, ast.Add):
            result = left + right
        elif isinstance(op, ast.Sub):
            result = left - right
        elif isinstance(op, ast.Mult):
            result = left * right
        elif isinstance(op, ast.FloorDiv):
            result = left // right
        elif isinstance(op, ast.Div):
            result = left / right
        elif isinstance(op, ast.Mod):
            result = left % right
        elif isinstance(op, ast.Pow) and abs(right) <= 64 and abs(left) <= 1 << 16:
            result = left ** right
        elif isinstance(op, (ast.LShift, ast.RShift)) and isinstance(left, int) and isinstance(right, int) and 0 <= right <= 62:
            result = left << right if isinstance(op, ast.LShift) else left >> right
        else:
            return None
    except (ZeroDivisionError, OverflowError):
        return None
    if isinstance(result, complex) or abs(result) >= _MAX_INT:
        return None
    return result


def _dtype_name(node: ast.expr, module: _Module) -> str | None:
    """torch.float16 (or an alias of torch) -> "float16"."""
    target = _resolved(node, module.aliases) or ""
    head, _, name = target.rpartition(".")
    return _DTYPES.get(name) if head == "torch" else None


def _inputs(module: _Module, function_name: str) -> dict[str, list[Any]]:
    function = module.last(function_name)
    if not isinstance(function, ast.FunctionDef):
        return {"shapes": [], "dtypes": []}
    scope = _Scope(module)
    tensors: dict[str, Tensor] = {}
    returned: list[Tensor] | None = None
    for statement in function.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name):
            name = statement.targets[0].id
            tensor = _tensor(statement.value, scope)
            if tensor is not None:
                tensors[name] = tensor
            else:
                scope.local[name] = scope.value(statement.value)
        elif isinstance(statement, ast.Return) and isinstance(statement.value, (ast.List, ast.Tuple)):
            returned = [_returned(element, scope, tensors) for element in statement.value.elts]
            returned = [t for t in returned if t is not _NOT_A_TENSOR]
    if returned is None:
        # Not a literal list (a comprehension, a helper): the constructors in order are the best guess.
        calls = sorted((n for n in ast.walk(function) if isinstance(n, ast.Call)), key=lambda n: (n.lineno, n.col_offset))
        returned = [t for node in calls if (t := _tensor(node, scope, unwrap=False)) is not None]
    return {"shapes": [shape for shape, _ in returned], "dtypes": [dtype for _, dtype in returned]}


_NOT_A_TENSOR: Tensor = (None, "not a tensor")


def _returned(element: ast.expr, scope: _Scope, tensors: dict[str, Tensor]) -> Tensor:
    if isinstance(element, ast.Name):
        if element.id in tensors:
            return tensors[element.id]
        if _is_number(scope.lookup(element.id)):
            return _NOT_A_TENSOR  # an int or float argument of forward
    elif isinstance(element, ast.Constant):
        return _NOT_A_TENSOR
    tensor = _tensor(element, scope)
    return tensor if tensor is not None else (None, None)


def _tensor(node: ast.expr, scope: _Scope, unwrap: bool = True) -> Tensor | None:
    """The (shape, dtype) of a tensor-constructor expression; None when it is not one."""
    cast: str | None = None
    while unwrap:
        if isinstance(node, ast.BinOp):  # torch.randn(n) * 0.1
            node = node.left
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _CHAINED:
            attr = node.func.attr
            if attr == "to":
                given = [*node.args, *(k.value for k in node.keywords if k.arg == "dtype")]
                dtypes = [v for a in given if isinstance(v := scope.value(a), str)]
                cast = cast or (dtypes[0].removeprefix("dtype:") if dtypes else None)
            elif attr in _CAST_METHODS:
                cast = cast or _CAST_METHODS[attr]
            node = node.func.value
        else:
            break
    if not isinstance(node, ast.Call):
        return None
    target = _resolved(node.func, scope.module.aliases) or ""
    head, _, name = target.rpartition(".")
    if head != "torch" or name not in _CONSTRUCTORS:
        return None
    keywords = {k.arg: k.value for k in node.keywords if k.arg}
    dtype = "int64" if name == "randint" else DEFAULT_DTYPE
    if "dtype" in keywords:
        given = scope.value(keywords["dtype"])
        dtype = given.removeprefix("dtype:") if isinstance(given, str) else None
    return _shape(name, node.args, keywords, scope), cast or dtype


def _shape(name: str, args: list[ast.expr], keywords: dict[str, ast.expr], scope: _Scope) -> list[int | None] | None:
    if "size" in keywords:
        sizes: list[ast.expr] | ast.expr = keywords["size"]
    elif name == "randint":
        # randint(high, size) or randint(low, high, size)
        sizes = args[-1] if len(args) in (2, 3) else []
    elif name == "full":
        sizes = args[0] if args else []
    else:
        sizes = args
    if isinstance(sizes, list) and len(sizes) == 1 and isinstance(sizes[0], (ast.Tuple, ast.List)):
        sizes = sizes[0]  # torch.randn((b, n))
    if isinstance(sizes, (ast.Tuple, ast.List)):
        sizes = sizes.elts
    if not isinstance(sizes, list) or not sizes or any(isinstance(s, ast.Starred) for s in sizes):
        return None
    return [scope.size(s) for s in sizes]


# ---------------------------------------------------------------------------------- distilling a run

_EVALUATING_TOOLS = frozenset({"write_candidate", "benchmark", "profile"})
_DEVICE_WORDS = {"cpu": "CPU", "cuda": "GPU"}

# Keywords in a candidate's source and the technique they reveal, in the words an engineer would search for.
_TECHNIQUES = (
    ("__shared__", "shared memory"), ("extern __shared__", "dynamic shared memory"),
    ("float4", "float4 vector loads"), ("half2", "half2 vector math"), ("__shfl", "warp shuffles"),
    ("wmma", "WMMA tensor cores"), ("mma.sync", "mma.sync tensor cores"), ("cp.async", "cp.async copies"),
    ("__ldg", "read-only cache loads"), ("__launch_bounds__", "launch bounds"), ("#pragma unroll", "loop unrolling"),
    ("atomicAdd", "atomics"), ("__expf", "fast-math intrinsics"), ("use_fast_math", "fast math"),
    ("cublas", "cuBLAS"), ("tl.dot", "tl.dot"), ("triton.autotune", "Triton autotune"),
    ("tl.atomic", "Triton atomics"), ("#pragma omp simd", "OpenMP SIMD"), ("#pragma omp", "OpenMP threads"),
    ("_mm256", "AVX intrinsics"), ("_mm512", "AVX-512 intrinsics"), ("__restrict__", "restrict pointers"))
_KERNEL_NAMES = (re.compile(r"__global__\s+(?:__launch_bounds__\([^)]*\)\s+)?void\s+(\w+)"),
                 re.compile(r"@triton\.(?:jit|autotune)[^\n]*\n(?:\s*@[^\n]*\n)*\s*def\s+(\w+)"))
_FUNCTIONS_ARG = re.compile(r"functions\s*=\s*\[([^\]]*)\]")


@dataclass
class _Evaluation:
    turn: int
    source: str
    summary: dict[str, Any]
    note: str
    """The assistant's own text in the turn that asked for this evaluation."""
    profile_text: str
    """The profile part of the observation, for a profile call."""


def distill(state: AgentState) -> list[dict[str, Any]]:
    """The entries worth keeping from a finished run, best first: each accepted candidate (fastest first) and
    one per failure class (build error, incorrect, ...), at most MAX_ENTRIES_PER_RUN."""
    signature = problem_signature(state.problem_source)
    by_source: dict[str, list[_Evaluation]] = {}
    for evaluation in _evaluations(state):
        by_source.setdefault(evaluation.source, []).append(evaluation)
    accepted: list[tuple[_Evaluation, list[_Evaluation]]] = []
    failures: dict[str, tuple[_Evaluation, list[_Evaluation]]] = {}
    for evaluations in by_source.values():
        passed = [e for e in evaluations if e.summary["status"] == Status.ACCEPTED.value]
        if passed:
            accepted.append((passed[-1], evaluations))  # the newest figures stand, as in the loop
        else:
            failures[evaluations[-1].summary["status"]] = (evaluations[-1], evaluations)  # the latest of a class
    accepted.sort(key=lambda pair: pair[0].summary.get("speedup_vs_eager") or 0.0, reverse=True)
    chosen = accepted[:MAX_ACCEPTED_FIRST] + list(failures.values()) + accepted[MAX_ACCEPTED_FIRST:]
    best_source = state.best["source"] if state.best else None
    best_profile = (state.best.get("verdict") or {}).get("profile") if state.best else None
    return [_entry(state, signature, outcome, evaluations,
                   best_profile if outcome.source == best_source else None)
            for outcome, evaluations in chosen[:MAX_ENTRIES_PER_RUN]]


def _evaluations(state: AgentState) -> list[_Evaluation]:
    """Every evaluation of the run with the candidate source it judged. Sources come from write_candidate's
    arguments; benchmark and profile re-judge the best or latest one, tracked here as the loop tracks them."""
    observations = {m.get("tool_call_id"): m.get("content") or "" for m in state.messages if m.get("role") == "tool"}
    assistant = [m for m in state.messages if m.get("role") == "assistant"]
    evaluations: list[_Evaluation] = []
    latest: str | None = None
    best: tuple[str, float] | None = None
    # The loop appends one assistant message and one TurnRecord per step, in the same order.
    for record, message in zip(state.turns, assistant):
        summaries = iter(record.verdicts)
        for call in message.get("tool_calls") or []:
            name = call.get("function", {}).get("name")
            observation = observations.get(call.get("id"), "")
            if name not in _EVALUATING_TOOLS or observation.startswith(("error:", "not run:")):
                continue  # refused or never run: no verdict was recorded for it
            summary = next(summaries, None)
            if summary is None:
                break
            arguments = _json_object(call.get("function", {}).get("arguments", ""))
            if name == "write_candidate":
                source = arguments.get("source")
            elif arguments.get("candidate", "best") == "best" and best is not None:
                source = best[0]
            else:
                source = latest
            if not isinstance(source, str):
                continue
            latest = source
            speed = summary.get("speedup_vs_eager") or 0.0
            if summary["status"] == Status.ACCEPTED.value and (best is None or best[0] == source or speed > best[1]):
                best = (source, speed)
            profile = observation[observation.find("\nprofile ("):].strip() if "\nprofile (" in observation else ""
            evaluations.append(_Evaluation(record.turn, source, summary, message.get("content") or "", profile))
    return evaluations


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return {}
    return value if isinstance(value, dict) else {}


def _entry(state: AgentState, signature: Signature, outcome: _Evaluation, evaluations: list[_Evaluation],
           verdict_profile: dict[str, Any] | None) -> dict[str, Any]:
    summary = outcome.summary
    backend = validate_candidate(outcome.source).backend_hint or ""
    kernels = _kernel_names(outcome.source)
    techniques = [label for keyword, label in _TECHNIQUES if keyword in outcome.source]
    profile = _profile(verdict_profile) if verdict_profile else None
    profile_text = next((e.profile_text for e in reversed(evaluations) if e.profile_text), "")
    if profile is None and profile_text:
        profile = {"text": _clip(profile_text, 800)}
    effect = speedups(summary) if summary["status"] == Status.ACCEPTED.value else _first_line(summary["message"])
    ops = " ".join(signature.ops[:5]) or "unknown ops"
    title = f"{ops}, {backend or 'unknown'} kernel on {_DEVICE_WORDS.get(state.device, state.device)}: {summary['status']}, {effect}"
    lines = [f"Tried: a {backend or 'kernel'} candidate (turn {outcome.turn})"
             + (f"; kernels {', '.join(kernels)}" if kernels else "")
             + (f"; techniques: {', '.join(techniques)}" if techniques else "") + "."]
    # The model explains its approach in the turn that wrote the candidate; later turns only re-measure it.
    note = " ".join(next((e.note for e in evaluations if e.note.strip()), "").split())
    if note:
        lines.append("Reasoning: " + _clip(note, NOTE_CHARS))
    result = f"Result: {summary['status']}; {speedups(summary)}"
    if summary.get("flags"):
        result += f"; flags: {', '.join(summary['flags'])}"
    if summary["status"] != Status.ACCEPTED.value and summary.get("message"):
        result += "; message: " + _clip(" ".join(summary["message"].split()), MESSAGE_CHARS)
    lines.append(result + ".")
    if len(evaluations) > 1:
        lines.append(f"Evaluated {len(evaluations)} times: " + ", ".join(e.summary["status"] for e in evaluations) + ".")
    if profile:
        lines.append("Profile: " + profile_line(profile))
    return {"title": _clip(title, TITLE_CHARS), "body": _clip("\n".join(lines), BODY_CHARS),
            "status": summary["status"], "speedup_vs_eager": summary.get("speedup_vs_eager"),
            "speedup_vs_compile": summary.get("speedup_vs_compile"), "backend": backend, "device": state.device,
            "signature": signature.to_dict(), "profile": profile, "turn": outcome.turn}


def _kernel_names(source: str) -> list[str]:
    names = [m.group(1) for pattern in _KERNEL_NAMES for m in pattern.finditer(source)]
    for match in _FUNCTIONS_ARG.finditer(source):
        names += re.findall(r"['\"](\w+)['\"]", match.group(1))
    return list(dict.fromkeys(names))[:6]


def _profile(profile: dict[str, Any]) -> dict[str, Any]:
    """The top kernels of a verdict's profile, small enough to keep per entry."""
    return {"tool": profile.get("tool"), "total_us": profile.get("total_us"),
            "kernels": [dict(k) for k in (profile.get("kernels") or [])[:5] if isinstance(k, dict)]}


def profile_line(profile: Mapping[str, Any]) -> str:
    if profile.get("text"):
        return str(profile["text"])
    parts = []
    for kernel in profile.get("kernels") or []:
        figures = ", ".join(f"{key} {kernel[key]}" for key in ("pct", "avg_us", "duration_us", "dram_pct", "sm_pct",
                                                               "occupancy_pct") if kernel.get(key) is not None)
        parts.append(f"{str(kernel.get('name', '?'))[:80]} ({figures})")
    return f"top kernels ({profile.get('tool') or 'profiler'}): " + "; ".join(parts) if parts else "no kernels recorded"


def speedups(summary: Mapping[str, Any]) -> str:
    eager, compiled = summary.get("speedup_vs_eager"), summary.get("speedup_vs_compile")
    if eager is None:
        return "not timed"
    return f"{eager:.2f}x vs eager" + (f", {compiled:.2f}x vs torch.compile" if compiled is not None else "")


def _first_line(text: str) -> str:
    return next((line.strip() for line in (text or "").splitlines() if line.strip()), "no message")


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


# ---------------------------------------------------------------------------------- ranking

@dataclass
class Scored:
    entry: Mapping[str, Any]
    score: float
    signature_score: float
    text_score: float


def rank(entries: Sequence[Mapping[str, Any]], signature: Signature, query: str = "", limit: int = 5, *,
         device: str | None = None, min_score: float = 0.0) -> list[Mapping[str, Any]]:
    """The `limit` entries most relevant to a problem (and to a query, when given), most relevant first."""
    return [s.entry for s in scored(entries, signature, query, device=device) if s.score >= min_score][:limit]


def scored(entries: Sequence[Mapping[str, Any]], signature: Signature, query: str = "", *,
           device: str | None = None) -> list[Scored]:
    """Every entry with its score, best first. Score = signature similarity, averaged with the query's BM25
    similarity to the entry's text when there is a query. Ties go to accepted, faster entries."""
    texts = text_scores(entries, query)
    results = []
    for entry, text in zip(entries, texts):
        likeness = signature_similarity(signature, Signature.from_dict(entry.get("signature")))
        if device is not None:
            likeness += DEVICE_WEIGHT * (entry.get("device") == device)
        score = (1 - TEXT_WEIGHT) * likeness + TEXT_WEIGHT * text if query.strip() else likeness
        results.append(Scored(entry, score, likeness, text))
    results.sort(key=lambda s: (s.score, s.entry.get("status") == Status.ACCEPTED.value,
                                s.entry.get("speedup_vs_eager") or 0.0), reverse=True)
    return results


def signature_similarity(a: Signature, b: Signature) -> float:
    """In [0, 1 - DEVICE_WEIGHT]: ops by Jaccard, then shapes and dtypes input by input (the device is scored
    by the caller, which knows it)."""
    ops_a, ops_b = set(a.ops), set(b.ops)
    ops = len(ops_a & ops_b) / len(ops_a | ops_b) if ops_a | ops_b else 0.0
    return OPS_WEIGHT * ops + SHAPES_WEIGHT * _positional(a.shapes, b.shapes, _shape_similarity) + \
        DTYPES_WEIGHT * _positional(a.dtypes, b.dtypes, lambda x, y: float(x is not None and x == y))


def _positional(a: list[Any], b: list[Any], similar: Callable[[Any, Any], float]) -> float:
    """Inputs compared in order; a missing input counts 0."""
    if not a or not b:
        return 0.0
    return sum(similar(x, y) for x, y in zip(a, b)) / max(len(a), len(b))


def _shape_similarity(a: list[int | None] | None, b: list[int | None] | None) -> float:
    """Half for the same rank, half for the size: 1 when equal, 0.5 at 16x apart, falling slowly after."""
    if a is None or b is None:
        return 0.0
    same_rank = 0.5 * (len(a) == len(b))
    if None in a or None in b:
        return same_rank
    numel_a, numel_b = math.prod(a), math.prod(b)  # type: ignore[arg-type]
    if numel_a <= 0 or numel_b <= 0:
        return same_rank + 0.5 * (numel_a == numel_b)
    return same_rank + 0.5 / (1 + abs(math.log2(numel_a / numel_b)) / 4)


def text_scores(entries: Sequence[Mapping[str, Any]], query: str) -> list[float]:
    """BM25 (the BM25L variant: it stays positive on corpora of one or two entries, where Okapi's idf turns
    negative) of the query against each entry's text, scaled so the best match is 1; 0 with no match."""
    terms = tokens(query)
    documents = [tokens(_entry_text(e)) for e in entries]
    if not terms or not any(documents):
        return [0.0] * len(entries)
    raw = BM25L(documents).get_scores(terms)
    top = float(max(raw))
    return [float(s) / top if top > 0 else 0.0 for s in raw]


def _entry_text(entry: Mapping[str, Any]) -> str:
    signature = Signature.from_dict(entry.get("signature"))
    return " ".join([str(entry.get("title") or ""), str(entry.get("body") or ""), " ".join(signature.ops),
                     str(entry.get("backend") or ""), str(entry.get("status") or "")])


def tokens(text: str) -> list[str]:
    """Lowercase words; underscores split too, so __shfl_xor_sync matches a query for "shfl". A plural's "s"
    goes, so "shuffles" matches "shuffle"; a crude stem, but applied alike to queries and entries."""
    words = re.findall(r"[a-z0-9]+", text.lower())
    return [w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w for w in words]


# ---------------------------------------------------------------------------------- what the model reads

def format_entries(entries: Sequence[Mapping[str, Any]], limit: int = FORMAT_CHARS) -> str:
    """Numbered entries, most relevant first, capped to `limit` characters; NO_ENTRIES when there are none."""
    if not entries:
        return NO_ENTRIES
    lines = [f"Knowledge base: {len(entries)} entr{'y' if len(entries) == 1 else 'ies'} from past runs, most relevant first."]
    used = len(lines[0])
    for number, entry in enumerate(entries, 1):
        body = textwrap.indent(_clip(str(entry.get("body") or "").strip(), ENTRY_FORMAT_CHARS), "   ")
        block = f"{number}. {entry.get('title') or 'untitled'}" + (f"\n{body}" if body.strip() else "")
        if used + len(block) > limit:
            lines.append(f"({len(entries) - number + 1} more not shown: search with a narrower query)")
            break
        lines.append(block)
        used += len(block) + 1
    return "\n".join(lines)
