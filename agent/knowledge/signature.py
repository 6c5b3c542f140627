"""A problem's signature for the knowledge base: its ops, input shapes and dtypes, read from the AST only (the
trusted process never imports a problem), its dominant kind of work, and its text (docstrings, ops, kind of work)
for embeddings.

    signature = problem_signature(problem_source)      # ops, input shapes, dtypes
    op_structure(signature.ops)                         # "gemm", "conv", "norm", ... or "elementwise"
    about = problem_text(problem_source)                # what the embeddings compare
"""
from __future__ import annotations

import ast
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


# The validator's AST helpers (module bindings, import aliases, method lookup through local bases) read problems
# exactly as it does; the same untrusted-source rules apply here.
from agent.engine.validation import MAX_SOURCE_BYTES, ParsedModule, ProblemNames, find_method, resolved_name


DEFAULT_DTYPE = "float32"


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
        module = ParsedModule(ast.parse(source))
        return Signature(ops=_ops(module, names.model), **_inputs(module, names.get_inputs))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return Signature()


DOCSTRING_CHARS = 1000


def problem_text(source: str, names: ProblemNames | None = None, signature: Signature | None = None) -> str:
    """What the problem is about, in words a sentence embedding can compare with an entry's text: the module's,
    the model class's and its forward's docstrings, then its ops and kind of work. Syntax tree only, as for the
    signature; "" when nothing can be read."""
    names = names or ProblemNames()
    signature = signature if signature is not None else problem_signature(source, names)
    docstrings: list[str] = []
    if isinstance(source, str) and "\0" not in source and len(source.encode("utf-8", "surrogatepass")) <= MAX_SOURCE_BYTES:
        try:
            module = ParsedModule(ast.parse(source))
            model = module.resolve_class(names.model)
            forward = find_method(module, model, "forward")[0] if model is not None else None
            docstrings = [d for node in (module.tree, model, forward)
                          if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef))
                          and (d := ast.get_docstring(node))]
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            pass
    about = " ".join(" ".join(docstrings).split())[:DOCSTRING_CHARS]
    return " ".join(part for part in (about, ops_text(signature.ops)) if part)


def ops_text(ops: Sequence[str]) -> str:
    """A signature's ops and kind of work in words, the same for problems and entries."""
    if not ops:
        return ""
    return f"ops: {', '.join(ops)}; kind of work: {STRUCTURE_WORDS[op_structure(list(ops))]}."


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


def _ops(module: ParsedModule, model_name: str) -> list[str]:
    model = module.resolve_class(model_name)
    if model is None:
        return []
    ops: set[str] = set()
    init, _ = find_method(module, model, "__init__")
    if isinstance(init, ast.FunctionDef):
        # nn layers built in the constructor: nn.Conv2d -> conv2d (their use in forward is self.conv(x)).
        for node in ast.walk(init):
            if isinstance(node, ast.Call):
                target = resolved_name(node.func, module.aliases) or ""
                head, _, layer = target.rpartition(".")
                if head == "torch.nn" and layer not in _CONTAINERS:
                    ops.add(layer.lower())
    # forward, and the model's own helper methods that forward calls (self._block(x)), transitively.
    pending, seen = ["forward"], set()
    while pending:
        name = pending.pop()
        method, _ = find_method(module, model, name)
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
                target = resolved_name(node.func, module.aliases) or ""
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


def _bound_value(node: ast.Assign | ast.AnnAssign, name: str) -> ast.expr | None:
    """The expression `name` takes in this assignment: the whole value (`a = b = 1`), or its element where a
    literal tuple is unpacked (`h, w = 32, 32`); None where that cannot be read."""
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    for target in targets:
        if isinstance(target, ast.Name) and target.id == name:
            return node.value
        if isinstance(target, (ast.Tuple, ast.List)) and isinstance(node.value, (ast.Tuple, ast.List)) \
                and len(target.elts) == len(node.value.elts):
            for element, value in zip(target.elts, node.value.elts):
                if isinstance(element, ast.Name) and element.id == name:
                    return value
    return None


class _Scope:
    """Names as get_inputs sees them: its own assignments first, then the module's (resolved lazily, once)."""

    def __init__(self, module: ParsedModule) -> None:
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
        expression = _bound_value(node, name)
        if expression is None:
            return None  # unpacked from something that is not a literal tuple of the same length
        self._resolving.add(name)
        try:
            self._globals[name] = self.value(expression, module_level=True)
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


def _dtype_name(node: ast.expr, module: ParsedModule) -> str | None:
    """torch.float16 (or an alias of torch) -> "float16"."""
    target = resolved_name(node, module.aliases) or ""
    head, _, name = target.rpartition(".")
    return _DTYPES.get(name) if head == "torch" else None


def _inputs(module: ParsedModule, function_name: str) -> dict[str, list[Any]]:
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
    target = resolved_name(node.func, scope.module.aliases) or ""
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


# Op names by the kind of work they are; several spellings of one thing (torch.mm, @, nn.Linear) are one GEMM.
_FAMILIES: dict[str, frozenset[str]] = {
    "gemm": frozenset({"matmul", "mm", "bmm", "linear", "addmm", "baddbmm", "addbmm", "einsum", "bilinear",
                       "tensordot", "matrix_power", "mv", "addmv", "outer"}),
    "conv": frozenset({"conv1d", "conv2d", "conv3d", "convtranspose1d", "convtranspose2d", "convtranspose3d",
                       "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "unfold", "fold"}),
    "attention": frozenset({"scaled_dot_product_attention", "multiheadattention", "multi_head_attention_forward"}),
    "norm": frozenset({"softmax", "log_softmax", "softmin", "layernorm", "layer_norm", "batchnorm1d", "batchnorm2d",
                       "batchnorm3d", "batch_norm", "groupnorm", "group_norm", "instancenorm1d", "instancenorm2d",
                       "instancenorm3d", "instance_norm", "rmsnorm", "rms_norm", "normalize", "localresponsenorm",
                       "logsumexp", "cross_entropy", "crossentropyloss", "nll_loss", "kl_div", "kldivloss"}),
    "pool": frozenset({"maxpool1d", "maxpool2d", "maxpool3d", "avgpool1d", "avgpool2d", "avgpool3d",
                       "adaptiveavgpool1d", "adaptiveavgpool2d", "adaptiveavgpool3d", "adaptivemaxpool2d",
                       "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
                       "adaptive_avg_pool2d", "adaptive_max_pool2d"}),
    "scan": frozenset({"cumsum", "cumprod", "cummax", "cummin"}),
    "reduce": frozenset({"sum", "mean", "max", "min", "amax", "amin", "prod", "argmax", "argmin", "norm", "var", "std",
                         "mse_loss", "mseloss", "l1_loss", "smooth_l1_loss", "huber_loss", "cosine_similarity",
                         "triplet_margin_loss", "hinge_embedding_loss", "topk", "sort", "median"}),
}
# What dominates the cost when a problem has several kinds: the first present in this order.
_DOMINANCE = ("attention", "gemm", "conv", "norm", "pool", "scan", "reduce")
ELEMENTWISE = "elementwise"
# Each kind of work in words, for text similarity (problem_text, entry_text).
STRUCTURE_WORDS = {"attention": "attention (matmul, softmax, matmul)", "gemm": "matrix multiplication (GEMM)",
                   "conv": "convolution", "norm": "normalization (softmax, layer/batch/group norm)",
                   "pool": "pooling", "scan": "scan (cumulative sum or product)", "reduce": "reduction",
                   ELEMENTWISE: "elementwise"}


def op_structure(ops: list[str] | set[str]) -> str:
    """The problem's dominant kind of work: attention (a GEMM with a softmax between, or SDPA), gemm, conv, norm,
    pool, scan, reduce, else elementwise; "" with no ops at all."""
    names = {o.lower() for o in ops}
    if not names:
        return ""
    present = {family for family, members in _FAMILIES.items() if names & members}
    if "gemm" in present and "softmax" in names:
        return "attention"
    return next((family for family in _DOMINANCE if family in present), ELEMENTWISE)


def clip(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, "..." marking the cut."""
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."
