"""The kernel census: which kernels the device ran in each timed batch of the candidate's job, judged by the parent.

Every other record of the candidate's PyTorch compute (the op census, the ATen recorder, the ATen observer) lives in
the candidate's interpreter and names ops as PyTorch's Python or its dispatcher sees them, so code written against
the harness or against PyTorch's internals can reach past each of them: the harness's own observer switched off and
on through the garbage collector (c5), a wrapper's original dug out of its closure (c8c), libtorch's C functions
called through ctypes (c12c). None of them changes what the GPU runs. This census reads CUPTI's activity records
(`kernel_census.cpp`), which the driver writes for every kernel launched on the process's contexts, whatever thread,
library or dispatch path launched it; it is switched on before the candidate's import, and each timed batch's
tally (every kernel by name, with its count and device time) reaches the parent signed with SipHash under a key made
by the parent, handed to the native module and dropped from the job's Python before the candidate's import. The
parent then judges it (`judge`):

- **PyTorch's own compute in a timed batch.** A kernel of PyTorch's (`at::native::...`, its softmax and norm
  kernels) that is not a memory op's (copy, fill, cat, index) is the candidate's compute done by PyTorch, unless the
  problem allows that op (a convolution adds its bias with PyTorch's add) or the harness itself runs as many: the
  harness's own share is read from the reference's job, whose null batches run the same keyed inputs and
  projections with no call, and PyTorch's kernels up to that rate per call are the harness's.
- **The census saw the harness.** The keyed inputs and projections are kernels of the harness's own: each kernel the
  reference's null batches ran once or more per call must be in the candidate's batch as often, or the census was
  switched off, its callbacks replaced, or a tally taken early to drop what came before (each take is counted in
  the signed text, and the parent knows how many it asked for).

What native code in the job could still do: switch CUPTI off around a call (cuptiActivityDisable through dlsym; the
binary scan and validation refuse CUPTI's names) and on again before the harness's kernels run, or read the key out
of the module's memory and sign a tally of its own. Both are code written against this harness, in native code.
"""
from __future__ import annotations

import hashlib
import os
import re
import secrets
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.engine.build.toolchain import detect_toolchain
import agent.engine.evaluate.harness_binary as harness_binary

SOURCE = Path(__file__).with_name("kernel_census.cpp")
MODULE = "kstudio_kernel_census"
_FILE = MODULE + ".so"
_KEY_BYTES = 16

# PyTorch's own kernels, by their demangled names.
_PYTORCH = re.compile(r"\bat::(native|cuda)::|\bcunn_|\bsoftmax_warp_|\bc10::cuda::|\bat_cuda_detail::")
# A memory op's kernels: copies (dtype casts included), fills, concatenation, indexing. PyTorch's memory ops are allowed
# everywhere (guards.MEMORY_OPS), and these are what they launch.
_MEMORY = re.compile(r"copy_kernel|direct_copy|CatArray|FillFunctor|fill_kernel|index_elementwise|indexSelect|"
                     r"index_put|nchwToNhwc|nhwcToNchw|arange|linspace|range_cuda|triu_tril|contiguous|vectorized_gather")
# Where the problem allows some of PyTorch's compute (a GEMM, a convolution, an op the config adds), a kernel of PyTorch's
# is the candidate's only if it is one of these families and none of the family's ops is allowed: an allowed op's own
# implementation launches kernels of other names (a convolution's bias add, a GEMM's accumulation).
FAMILIES: tuple[tuple[str, str, frozenset[str]], ...] = (
    ("silu", r"silu", frozenset({"silu", "silu_"})),
    ("gelu", r"gelu|GeluCUDA", frozenset({"gelu", "gelu_"})),
    ("sigmoid", r"sigmoid", frozenset({"sigmoid", "sigmoid_", "silu"})),
    ("tanh", r"tanh", frozenset({"tanh", "tanh_", "gelu"})),
    ("relu", r"clamp|threshold|relu|hardtanh", frozenset({"relu", "relu_", "clamp", "clamp_", "clamp_min", "clamp_max",
                                                          "threshold", "hardtanh", "relu6", "leaky_relu"})),
    ("exp/log", r"\bexp_kernel|\blog_kernel|expm1|log1p|softplus|elu_kernel|mish|logsigmoid",
     frozenset({"exp", "log", "expm1", "log1p", "softplus", "elu", "mish", "log_sigmoid", "selu", "celu"})),
    ("softmax", r"SoftMax|softmax", frozenset({"softmax", "_softmax", "log_softmax", "_log_softmax"})),
    ("norm", r"layer_norm|LayerNorm|RowwiseMoments|group_norm|GroupNorm|batch_norm|BatchNorm|welford|Welford",
     frozenset({"layer_norm", "native_layer_norm", "group_norm", "native_group_norm", "batch_norm",
                "native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_no_training",
                "instance_norm", "rms_norm", "_fused_rms_norm"})),
    ("reduction", r"reduce_kernel|ReduceOp", frozenset({"sum", "mean", "amax", "amin", "max", "min", "norm",
                                                         "linalg_vector_norm", "argmax", "argmin", "logsumexp", "prod",
                                                         "var", "std", "var_mean", "std_mean", "all", "any"})),
    ("pooling", r"pool", frozenset({"max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
                                    "max_pool2d_with_indices", "max_pool3d_with_indices", "adaptive_avg_pool2d",
                                    "adaptive_max_pool2d", "_adaptive_avg_pool2d", "adaptive_avg_pool3d",
                                    "_adaptive_avg_pool3d", "adaptive_avg_pool1d"})),
    ("scan", r"scan|cumsum|cumprod", frozenset({"cumsum", "cumprod", "cummax", "cummin", "logcumsumexp"})),
    ("arithmetic", r"MulFunctor|mul_kernel|AddFunctor|add_kernel|CUDAFunctor_add|DivFunctor|div_true|div_trunc|"
                   r"div_floor|sub_kernel|pow_tensor|pow_kernel|sqrt_kernel|rsqrt_kernel|reciprocal|where_kernel|"
                   r"addcmul|addcdiv|lerp",
     frozenset({"add", "add_", "mul", "mul_", "div", "div_", "sub", "sub_", "pow", "sqrt", "rsqrt", "reciprocal",
                "where", "addcmul", "addcdiv", "lerp", "addmm_", "addmv_", "baddbmm_"})),
)


class CensusError(ValueError):
    """A tally the parent cannot take as the census's: not signed by it, another batch's, or malformed."""


@dataclass
class Tally:
    """One take: the kernels completed since the take before, by demangled name: (count, device ns)."""
    token: int
    take: int
    dropped: int
    flushed: int
    kernels: dict[str, tuple[int, int]] = field(default_factory=dict)


def _build_key() -> str:
    toolchain = detect_toolchain()
    digest = hashlib.sha256(SOURCE.read_bytes() + SOURCE.with_name("siphash.h").read_bytes())
    digest.update(toolchain.fingerprint().encode())
    return "kernel-census-" + digest.hexdigest()[:40]


def cupti_include(cuda_home: str | None) -> Path | None:
    """Where cupti_activity.h is under a CUDA toolkit (its include/ or extras/CUPTI/include), or None."""
    if not cuda_home:
        return None
    for candidate in (Path(cuda_home) / "include", Path(cuda_home) / "extras" / "CUPTI" / "include"):
        if (candidate / "cupti_activity.h").is_file():
            return candidate
    return None


def built(cache_root: str | os.PathLike[str] | None) -> dict[str, str] | None:
    """Trusted side: the census's binary in the build cache, with a fresh key for one evaluation; None where no CUDA
    toolkit with CUPTI's headers is here (the verdict then says the census did not run)."""
    if cupti_include(detect_toolchain().cuda_home) is None:
        return None
    described = harness_binary.built(cache_root, _build_key(), _FILE, _compile)
    return described


def _compile(out: Path) -> dict[str, str]:
    toolchain = detect_toolchain()
    include = cupti_include(toolchain.cuda_home)
    command = [toolchain.cxx, "-O2", "-std=c++17", "-shared", "-fPIC", "-w", f"-I{toolchain.python_include}",
               f"-I{include}", f"-I{Path(str(toolchain.cuda_home)) / 'include'}", str(SOURCE), "-ldl",
               "-o", str(out / _FILE)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"the harness's kernel census did not compile ({' '.join(command[:3])} ...): "
                           f"{(done.stderr or done.stdout)[-2000:]}")
    return {"source_sha256": hashlib.sha256(SOURCE.read_bytes()).hexdigest()}


def find_cupti() -> str:
    """The libcupti this process already holds (PyTorch's profiler links it), else the one beside PyTorch's CUDA
    libraries or the toolkit's: one copy of CUPTI per process."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1] if line.strip() else ""
            if "/libcupti.so" in path:
                return path
    import torch

    roots = [Path(torch.__file__).parent.parent / "nvidia"]
    home = detect_toolchain().cuda_home
    if home:
        roots += [Path(home) / "extras" / "CUPTI" / "lib64", Path(home) / "lib64"]
    for root in roots:
        found = sorted(root.rglob("libcupti.so*")) if root.is_dir() else []
        if found:
            return str(found[0])
    return "libcupti.so"


class Census:
    """The started census, seen from a job: its module's functions captured at start, before the candidate's import."""

    def __init__(self, module: Any) -> None:
        self._take, self._resume = module.take, module.resume

    def take(self, token: int) -> dict[str, str]:
        """The kernels since the last take (the caller synchronised the device), signed: what the parent judges."""
        text, tag = self._take(token & (2**64 - 1))
        return {"text": text, "tag": tag}

    def resume(self) -> None:
        """After the harness's own torch.profiler, which registers CUPTI callbacks of its own."""
        self._resume()


def start(payload: dict[str, Any]) -> tuple[Census | None, str | None]:
    """In a job on a GPU, before anything of the candidate's runs: the census loaded from the build cache and switched
    on, its key taken out of the payload. (census, None), or (None, why it is not running)."""
    described = payload.pop("kernel_census", None)
    if not described or payload.get("device") != "cuda":
        return None, "no census on this device"
    secret = bytes.fromhex(str(described.pop("secret")))
    try:
        module = harness_binary.load(described, payload.get("cache_root"), MODULE, "the harness's kernel census")
        import torch

        torch.cuda.init()  # a context first: CUPTI's records are per context
        module.start(find_cupti(), secret)
    except (RuntimeError, OSError) as exc:
        return None, str(exc)
    finally:
        del secret
    return Census(module), None


def batch_token(keys: list[int]) -> int:
    """What ties a tally to its batch: the batch's keys, which the parent chose."""
    digest = hashlib.sha256(",".join(str(int(k)) for k in keys).encode()).digest()
    return int.from_bytes(digest[:8], "little")


def siphash24(key: bytes, data: bytes) -> int:
    """SipHash-2-4 (the census's tag, kernel_census.cpp), in the parent."""
    mask = 2**64 - 1

    def rotl(x: int, b: int) -> int:
        return ((x << b) | (x >> (64 - b))) & mask

    def rounds(v: list[int], n: int) -> None:
        for _ in range(n):
            v[0] = (v[0] + v[1]) & mask
            v[1] = rotl(v[1], 13) ^ v[0]
            v[0] = rotl(v[0], 32)
            v[2] = (v[2] + v[3]) & mask
            v[3] = rotl(v[3], 16) ^ v[2]
            v[0] = (v[0] + v[3]) & mask
            v[3] = rotl(v[3], 21) ^ v[0]
            v[2] = (v[2] + v[1]) & mask
            v[1] = rotl(v[1], 17) ^ v[2]
            v[2] = rotl(v[2], 32)

    k0, k1 = int.from_bytes(key[:8], "little"), int.from_bytes(key[8:16], "little")
    v = [0x736F6D6570736575 ^ k0, 0x646F72616E646F6D ^ k1, 0x6C7967656E657261 ^ k0, 0x7465646279746573 ^ k1]
    whole = len(data) - len(data) % 8
    for i in range(0, whole, 8):
        m = int.from_bytes(data[i:i + 8], "little")
        v[3] ^= m
        rounds(v, 2)
        v[0] ^= m
    last = ((len(data) & 0xFF) << 56) | int.from_bytes(data[whole:], "little")
    v[3] ^= last
    rounds(v, 2)
    v[0] ^= last
    v[2] ^= 0xFF
    rounds(v, 4)
    return v[0] ^ v[1] ^ v[2] ^ v[3]


def signed_lines(signed: Any, secret: str, what: str, signer: str) -> list[str]:
    """The lines of a text a native module of the harness signed (this census, the ATen observer's counts), once its
    tag is checked under the job's key; CensusError says what was wrong, naming `what` and its `signer`."""
    if not isinstance(signed, dict) or not isinstance(signed.get("text"), str) or not isinstance(signed.get("tag"), str):
        raise CensusError(f"the reply carries no {what}")
    text = signed["text"]
    if len(text) > 4 << 20:
        raise CensusError(f"the {what} is larger than {signer} ever makes it")
    tag = f"{siphash24(bytes.fromhex(secret), text.encode()):016x}"
    if not secrets.compare_digest(tag, signed["tag"]):
        raise CensusError(f"the {what} is not signed by {signer} (its tag does not match)")
    return text.split("\n")


def read(signed: Any, secret: str, token: int) -> Tally:
    """A reply's tally, checked: signed under this evaluation's key and taken for this batch."""
    header, *lines = signed_lines(signed, secret, "kernel census", "the census")
    try:
        got_token, take, dropped, flushed = (int(x) for x in header.split("\t"))
        kernels: dict[str, tuple[int, int]] = {}
        for line in lines:
            if line:
                count, ns, name = line.split("\t", 2)
                kernels[name] = (int(count), int(ns))
    except ValueError as exc:
        raise CensusError(f"the batch's kernel census is malformed: {exc}") from None
    if got_token != token:
        raise CensusError("the batch's kernel census was taken for another batch")
    return Tally(got_token, take, dropped, flushed, kernels)


def pytorch_kernel(name: str) -> bool:
    return bool(_PYTORCH.search(name))


def memory_kernel(name: str) -> bool:
    return bool(_MEMORY.search(name))


@dataclass
class HarnessShare:
    """What the harness's own work launches per call, read from the reference's null batches (the same keyed inputs
    and projections, no call): the most of each kernel per call, and the least (to know which are in every call)."""
    most: dict[str, float] = field(default_factory=dict)
    least: dict[str, float] = field(default_factory=dict)
    fixed: dict[str, int] = field(default_factory=dict)  # the most of each in one batch, whatever its calls
    batches: int = 0

    def add(self, tally: Tally, calls: int) -> None:
        for name, (count, _) in tally.kernels.items():
            rate = count / max(calls, 1)
            self.most[name] = max(self.most.get(name, 0.0), rate)
            self.fixed[name] = max(self.fixed.get(name, 0), count)
        for name in set(self.least) | set(tally.kernels):
            rate = tally.kernels.get(name, (0, 0))[0] / max(calls, 1)
            self.least[name] = min(self.least.get(name, rate), rate) if name in self.least else rate
        self.batches += 1

    def every_call(self) -> dict[str, float]:
        """The harness's own kernels (not PyTorch's) that ran at least once per call in every null batch."""
        return {name: rate for name, rate in self.least.items() if rate >= 1.0 and not pytorch_kernel(name)}


def allowed_family(name: str, allowed: frozenset[str]) -> bool:
    """Whether a kernel of PyTorch's may be an allowed op's (where the problem allows some compute)."""
    for _, pattern, ops in FAMILIES:
        if re.search(pattern, name):
            return bool(ops & allowed)
    return True  # not a family the census knows: an allowed op's inside, as far as it can tell


def judge(tally: Tally, calls: int, harness: HarnessShare, allowed: frozenset[str], compute: bool = True) -> list[str]:
    """What one candidate batch's tally shows against it (empty: nothing). `allowed`: the problem's allowed compute
    ops beyond the memory ops, by aten name (with the internals of the allowed GEMMs and convolutions). `compute`:
    whether PyTorch's compute kernels in it are judged (not in the first batch on new base sets: Judge.bases_sent)."""
    found = []
    extra = []
    for name, (count, ns) in tally.kernels.items() if compute else ():
        if not pytorch_kernel(name) or memory_kernel(name):
            continue
        own = harness.most.get(name, 0.0) * calls + harness.fixed.get(name, 0)
        if count <= own:
            continue
        if allowed and allowed_family(name, allowed):
            continue
        extra.append((ns, count, name))
    if extra:
        extra.sort(reverse=True)
        names = "; ".join(f"{_short(name)} x{count} ({ns / 1e3:.0f} us)" for ns, count, name in extra[:4])
        found.append(f"PyTorch's own compute kernels ran in the candidate's timed batch, beyond what the harness runs: "
                     f"{names}")
    missing = [name for name, rate in harness.every_call().items()
               if tally.kernels.get(name, (0, 0))[0] < int(rate * calls)]
    if missing:
        found.append("it did not see the harness's own kernels in the batch (" + ", ".join(_short(m) for m in missing[:3])
                     + "): CUPTI's records were switched off or taken by someone else, or a tally was taken early")
    if tally.dropped:
        found.append(f"CUPTI dropped {tally.dropped} kernel records in the batch")
    return found


def _short(name: str) -> str:
    return name if len(name) <= 160 else name[:157] + "..."


def judged_ops(allowed_compute: frozenset[str] | set[str], internals: frozenset[str]) -> frozenset[str]:
    """The ops whose kernels may be in a candidate's batch beyond the memory ops', by aten name: the problem's allowed
    compute and, where it allows any, what an allowed GEMM or convolution runs inside itself (aten_watch.INTERNALS)."""
    names = {name.partition("::")[2] or name for name in allowed_compute}
    if names:
        names |= {name.partition("::")[2] for name in internals}
    return frozenset(names)


class Judge:
    """The parent's side of the census for one evaluation: every candidate batch's tally read and kept, the harness's
    share read from the reference's null batches, and both judged once timing is done."""

    def __init__(self, candidate_secret: str | None, reference_secret: str | None, allowed: frozenset[str]) -> None:
        self.on = bool(candidate_secret and reference_secret)
        self._secrets = (candidate_secret or "", reference_secret or "")
        self.allowed = allowed
        self.harness = HarnessShare()
        self.tallies: list[tuple[Tally, int, bool]] = []
        self.problems: list[str] = []
        self.asked = 0  # candidate batches asked for: each takes two tallies (before and after)
        self.reference_problem: str | None = None
        # The first batch after the candidate's job gets its base sets makes what the harness makes once per sets
        # (kept.py's masks of non-finite differences, draws of new sizes): PyTorch's kernels in it are not judged. It is
        # a warm-up batch, whose time is no figure's.
        self._first = False

    def bases_sent(self) -> None:
        self._first = True

    def candidate_batch(self, reply: dict[str, Any], keys: list[int]) -> None:
        if not self.on or reply.get("fatal"):
            return
        self.asked += 1
        try:
            tally = read(reply.get("kernel_census"), self._secrets[0], batch_token(keys))
        except CensusError as exc:
            self.problems.append(str(exc))
            return
        if tally.take != 2 * self.asked:
            self.problems.append(f"a tally was taken that the harness did not ask for (take {tally.take}, where the "
                                 f"harness had asked for {2 * self.asked})")
            self.asked = (tally.take + 1) // 2
        self.tallies.append((tally, len(keys), self._first))
        self._first = False

    def reference_null(self, reply: dict[str, Any], keys: list[int]) -> None:
        if not self.on:
            return
        try:
            self.harness.add(read(reply.get("kernel_census"), self._secrets[1], batch_token(keys)), len(keys))
        except CensusError as exc:
            self.reference_problem = f"the reference's job: {exc}"

    def findings(self) -> list[str]:
        """Against the candidate: each distinct finding once. Nothing where the reference's census did not run (the
        harness's share is unknown then; summary() says so)."""
        if not self.on or self.reference_problem or not self.harness.batches:
            return []
        found = list(dict.fromkeys(self.problems))
        for tally, calls, first in self.tallies:
            for text in judge(tally, calls, self.harness, self.allowed, compute=not first):
                if text not in found:
                    found.append(text)
        return found

    def summary(self) -> dict[str, Any]:
        """For the verdict: whether the census ran, over how many batches, and the candidate's kernels by device time."""
        if not self.on:
            return {"state": "off (no CUDA device, or no CUPTI headers where the parent runs)"}
        if self.reference_problem or not self.harness.batches:
            return {"state": "not judged: " + (self.reference_problem or "no null batch of the reference's was read")}
        totals: dict[str, list[int]] = {}
        for tally, _, _ in self.tallies:
            for name, (count, ns) in tally.kernels.items():
                entry = totals.setdefault(name, [0, 0])
                entry[0] += count
                entry[1] += ns
        top = sorted(totals.items(), key=lambda kv: -kv[1][1])[:8]
        return {"state": "judged", "batches": len(self.tallies),
                "kernels": [{"name": _short(name), "count": c, "device_ms": round(ns / 1e6, 3),
                             "pytorch": pytorch_kernel(name), "harness": name in self.harness.most}
                            for name, (c, ns) in top]}
