"""The reference's job: the problem's own model, every input, every check, and the baselines' batches.

It runs the user's problem and our code, never a candidate's (another sandbox, another pid namespace, not
dumpable), and does what the parent asks, one command at a time (session.py):

  weights            the constructor's arguments and the model's weights, written to the exchange file
  inputs {index}     checked call `index`'s inputs (drawn from the secret seed), written to the exchange file
  compare {index, layout}   the reference's outputs for that call against the candidate's (outputs file)
  bases              the two input sets every timed batch mixes (keyed.py)
  compile            torch.compile the model and warm it up
  ping {probe}       awake, and (probe, on a GPU) the time of a fixed device spin just before a timed batch
  batch {model, keys}  a timed batch of eager, compiled or null calls (null: only the keyed inputs and
                     projections, the harness's own share of every batch, which the parent takes off)
  verify {keys}      the reference's projection of each key's outputs and the bound a candidate's must meet
  work               the least work any correct kernel does (bytes, FLOPs) and the device's copy bandwidth
  park               the sequential fallback (memory.py): its device state to the host until the next command
"""
from __future__ import annotations

import base64
import math
import dataclasses
import time
from dataclasses import asdict
from typing import Any, BinaryIO

import torch

from agent.engine.evaluate.batch import ping, as_list, parking, probe_ms, run_batch_figures, stand_in_specs, zero_stand_ins
from agent.engine.evaluate.channel import JobEnd
from agent.engine.evaluate.codec import write_result
from agent.engine.evaluate.compare import Comparison, combined, compare_each, compare_outputs, held_to_eager, joined, \
    real_numbers
from agent.engine.evaluate.exact import Float64Reference, synced_seconds
from agent.engine.evaluate.jobs import PROBLEM_MODULE, hardware_facts, setup_device, work_estimate
import agent.engine.evaluate.keyed_cuda as keyed_cuda
import agent.engine.evaluate.kernel_census as kernel_census
from agent.engine.evaluate.keyed import WIDE_EVERY, WIDE_SCALE, Pools, bound_of_figures, derive, few_outputs, project, \
    projection_bound, scaled, wide_sign
from agent.engine.evaluate.loader import exec_module
from agent.engine.evaluate.memory import CHUNK_BYTES
from agent.engine.evaluate.parking import Shelf
from agent.engine.evaluate.plan import TrialPlan, build_model, variant_count
from agent.engine.evaluate.tensor_file import TensorFileReader, TensorFileWriter
import agent.engine.sandbox.isolation as isolation

_PROBE_US = 100.0


def reference(payload: dict[str, Any], result: BinaryIO, context: dict[str, Any]) -> None:
    isolation._libc.prctl(isolation.PR_SET_DUMPABLE, 0, 0, 0, 0)
    command_fd, reply_fd, exchange_fd, outputs_fd = context["fds"][:4]
    end = JobEnd(command_fd, reply_fd)
    device = payload["device"]
    started = time.monotonic()
    try:
        setup_device(device, context["limits"], payload.get("threads"))
        # The kernel census runs here as in the candidate's job (the same cost on both sides); its null batches' tallies
        # are the harness's own share, which the parent holds the candidate's batches to (kernel_census.py).
        kernels, kernels_off = kernel_census.start(payload)
        state = _State(payload, device, exchange_fd, outputs_fd, context["limits"])
        state.kernels = kernels
    except BaseException as exc:  # noqa: BLE001 - the problem's own failure: the user's to fix
        end.reply({"fatal": True, "error": _describe(exc)})
        return
    end.reply({"ready": True, "labels": state.plan.labels(), "hardware": hardware_facts(device),
               "toolchain": {"torch": torch.__version__, "torch_cuda": torch.version.cuda},
               "setup_seconds": time.monotonic() - started, "kernel_census": kernels_off or "on"})
    for command in end.commands():
        try:
            reply = state.handle(command)
        except BaseException as exc:  # noqa: BLE001 - the problem failed on this command
            reply = {"fatal": True, "error": _describe(exc)}
        end.reply(reply)
        if command.get("cmd") == "exit" or reply.get("fatal"):
            break
    write_result(result, {"ended_at": time.monotonic()})


def _outputs_described(reader: TensorFileReader, refs: list[torch.Tensor]) -> list[torch.Tensor]:
    """The candidate's outputs of one call as host mappings (read onto the device in pieces by the comparison), only
    where each is the reference's output in number, shape and dtype; any other is a meta tensor of what the layout
    claims, which the comparison fails on its shape, dtype or count without reading a byte. So entries that the
    candidate's job described, however many and however large, map nothing the reference's outputs would not."""
    count = reader.count("out")
    if count != len(refs):
        return [torch.empty(0, device="meta")] * count  # judged by their number alone
    got: list[torch.Tensor] = []
    for i, ref in enumerate(refs):
        dtype, shape = reader.described(("out", i))
        same = shape == list(ref.shape) and dtype == ref.dtype
        got.append(reader.get(("out", i)) if same else torch.empty(shape, dtype=dtype, device="meta"))
    return got


def _put_values(writer: TensorFileWriter, prefix: str, values: list[Any]) -> list[Any]:
    """Tensors into the exchange file (key [prefix, position]); what is not a tensor (a scalar get_inputs()
    returns, a list of ints) goes as a JSON value: [{"tensor": true} or {"value": v}, ...]."""
    described: list[Any] = []
    for j, value in enumerate(values):
        if isinstance(value, torch.Tensor):
            writer.put([prefix, j], value)
            described.append({"tensor": True})
        else:
            described.append({"value": _plain(value, j)})
    return described


def _plain(value: Any, position: int) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)) and all(v is None or isinstance(v, (bool, int, float, str)) for v in value):
        return list(value)
    raise TypeError(f"get_inputs() returned a {type(value).__name__} at position {position}: inputs must be tensors, "
                    "numbers, strings or lists of them")


def _describe(exc: BaseException) -> str:
    import traceback

    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-6000:]


def _same_values(first: list[Any], second: list[Any]) -> bool:
    """Whether two input sets hold equal tensors everywhere (and at least one tensor)."""
    tensors = [(a, b) for a, b in zip(first, second) if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)]
    return bool(tensors) and len(first) == len(second) and all(
        a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b) for a, b in tensors)


def _generator_states(device: str) -> list[torch.Tensor]:
    """The default random generators' states: the CPU's, and the device's where it is a GPU."""
    states = [torch.get_rng_state()]
    if device == "cuda" and torch.cuda.is_available():
        states.append(torch.cuda.get_rng_state())
    return states


def _same_states(before: list[torch.Tensor], after: list[torch.Tensor]) -> bool:
    return len(before) == len(after) and all(torch.equal(b, a) for b, a in zip(before, after))


def _wide_words(signs: tuple[int, ...], wanted: Any, wide_noise: dict[int, list[float] | None]) -> str:
    """What the verdict's harness line says of the wide timed calls."""
    if not wanted:
        return ""
    if not signs:
        return "; no wide timed calls (the reference leaves its domain there)"
    factors = " and ".join(f"{'+' if s > 0 else '-'}{WIDE_SCALE:g}" for s in signs)
    words = f"; one timed call in {WIDE_EVERY} on its inputs times {factors}"
    if wide_noise:
        measured = [s for s in signs if wide_noise.get(s) is not None]
        words += (", its checks widened by the reference's own float64 error at that scale" if len(measured) == len(signs)
                  else ", its checks strict where the reference's float64 error at that scale could not be measured")
    return words


class _State:
    def __init__(self, payload: dict[str, Any], device: str, exchange_fd: int, outputs_fd: int, limits: Any) -> None:
        self.payload, self.device = payload, device
        # The harness's GPU kernels (keyed_cuda.py), compiled while the problem is set up and checked.
        self.harness_build = keyed_cuda.start_compile() if device == "cuda" else None
        self.exchange_fd, self.outputs_fd = exchange_fd, outputs_fd
        self.tolerances = (payload.get("rtol"), payload.get("atol_scale"))
        self.problem = exec_module(payload["problem_source"], PROBLEM_MODULE, "problem.py")
        self.plan = dataclasses.replace(TrialPlan.from_payload(payload["plan"]), variants=variant_count(self.problem))
        self.init = self.plan.init_inputs(self.problem, device)
        self.model = build_model(getattr(self.problem, self.plan.names["model"]), self.init, self.plan.weights_seed, device)
        self.inputs: dict[int, list[Any]] = {}
        self.base_calls: list[int] = []  # the checked calls whose inputs are the timed batches' two bases
        self.parked = False
        self.stand_ins: list[torch.Tensor] = []
        self.stand_in_shapes: list[tuple[torch.Size, torch.dtype]] = []  # while parked
        self.shelf = Shelf()
        self.compiled: Any = None
        self.pools = Pools(0)
        self.probe_cycles = 0
        self.kernels: kernel_census.Census | None = None
        # The last eager batch's keys and figures (batch.run_batch_figures): the expected projections and bounds of the
        # candidate's calls on the same keys, without running the reference again (the "expected" command).
        self.eager_figures: tuple[list[int], torch.Tensor] | None = None
        # A checked call the candidate failed is judged again against the reference in float64 (exact.py), until one
        # fails for good: the verdict is then "incorrect" whatever the others say, and no float64 run is spent on them.
        self.rejudge = True
        self.ill_conditioned = False  # a checked call found the reference's own output out of tolerance of float64's
        # The reference's forward drew random numbers (dropout in training mode...): its outputs are a draw, and a float64
        # run is another draw, so no output is ever "as accurate as eager" against it (_against_exact).
        self.random = False
        self.noise: list[float] | None = None  # per output, for the keyed checks' bounds (Float64Reference.noise)
        # The same at a wide call's scale, per sign (_wide_signs): the noise measured on the bases bounds no other scale.
        self.wide_noise: dict[int, list[float] | None] = {}
        self.float64 = Float64Reference(self.model, device, limits)

    @property
    def bases(self) -> list[list[Any]]:
        return [self.inputs[i] for i in self.base_calls]

    def handle(self, command: dict[str, Any]) -> dict[str, Any]:
        name = command.get("cmd")
        parked = parking(self, name)
        if parked is not None:
            return parked
        with torch.no_grad():
            if name == "ping":
                reply = ping(self.device)
                if command.get("probe") and self.device == "cuda":
                    # Here, not in the batch: the parent's clock times the batch command alone, and a probe inside it
                    # would be a share of the reference's batches (the null batch's too) that the candidate's batches
                    # never have, taken off the candidate's time (docs/benchmarks.md §15, session 17).
                    reply["probe_ms"] = self._probe()
                return reply
            if name == "weights":
                return self.weights()
            if name == "inputs":
                return self.write_inputs(int(command["index"]))
            if name == "compare":
                return self.compare(int(command["index"]), command.get("layout"))
            if name == "bases":
                self.pools = Pools(int(command["pool_seed"]))
                self.eager_figures = None
                reply = self.set_bases() if command.get("variant") is None else self.set_variant_bases(int(command["variant"]))
                # Decided here, where the outputs are known; the parent hands it to the candidate's job with the bases
                # (keyed.FEW_OUTPUTS), and a candidate's job that mixed otherwise only gets its outputs wrong.
                self.pools.fresh = reply["fresh_mix"] = few_outputs(self.stand_ins)
                # Likewise the GPU's fused mix and projections (keyed_cuda.py): only where this job can compile them.
                why_not = keyed_cuda.unavailable(self.harness_build) if self.device == "cuda" else "not a GPU"
                self.pools.fused = reply["fused_mix"] = not why_not
                if self.pools.fused:  # the candidate's job loads the same binary, and compiles nothing
                    reply["harness_binary"] = base64.b64encode(keyed_cuda.Kernels.load().binary).decode()
                reply["harness"] = "fused GPU kernels (keyed_cuda.py)" if self.pools.fused else f"torch ops ({why_not})"
                # Last: a wide call's inputs are this evaluation's mixes (fresh or pooled, fused or not), scaled.
                self.pools.wide = tuple(self._wide_signs())
                reply["wide"] = list(self.pools.wide)
                reply["harness"] += _wide_words(self.pools.wide, self.payload.get("wide_calls"), self.wide_noise)
                reply["stand_ins"] = stand_in_specs(self.stand_ins)  # the candidate's job runs a null batch of its own
                # Two equal sets (a get_inputs that seeds its own generator) leave every timed call one input: a kernel
                # that keeps its last answer is timed as free (the sixth red team). The parent flags the figure.
                reply["same_bases"] = _same_values(*self.bases)
                return reply
            if name == "compile":
                return self.compile()
            if name == "batch":
                return self.batch(command["model"], [int(k) for k in command["keys"]])
            if name == "verify":
                return self.verify([int(k) for k in command["keys"]])
            if name == "expected":
                return self.expected([int(k) for k in command["keys"]])
            if name == "work":
                return {"work": work_estimate(self.model, self.bases[0] if self.bases else self._call_inputs(0), self.device)}
            if name == "exit":
                return {"ok": True}
        raise ValueError(f"unknown command {name!r}")

    def move(self, to_host: bool) -> None:
        """Everything this job keeps on the device, to the host or back (the inputs through its shelf: parking.py). The keyed
        draws are dropped and drawn again, identically, on the way back (keyed.Pools.restore), and the null batch's
        stand-in outputs are dropped: only their shapes matter, so they come back as zeros."""
        if hasattr(self.model, "to"):
            self.model.to("cpu" if to_host else self.device)
        kept = list(self.inputs.values())
        moved = self.shelf.park_sets("inputs", kept) if to_host else Shelf.unpark_sets(kept, self.device)
        self.inputs = dict(zip(self.inputs, moved))
        if to_host:
            self.stand_in_shapes = [(t.shape, t.dtype) for t in self.stand_ins]
            self.stand_ins = []
            self.pools.release()
        else:
            self.stand_ins = zero_stand_ins(self.stand_in_shapes, self.device)
            self.pools.restore()

    def weights(self) -> dict[str, Any]:
        writer = TensorFileWriter(self.exchange_fd)
        init: list[Any] = []
        for i, value in enumerate(self.init):
            if isinstance(value, torch.Tensor):
                writer.put(["init", i, 0], value)
                init.append({"tensor": True})
            else:
                init.append(value)
        state = self.model.state_dict()
        for i, tensor in enumerate(state.values()):
            writer.put(["weight", i, 0], tensor)
        return {"init": init, "weights": list(state), "layout": writer.layout, "weights_seed": self.plan.weights_seed}

    def _call_inputs(self, index: int) -> list[Any]:
        if index not in self.inputs:
            self.inputs[index] = self.plan.inputs(self.problem, index, self.device)
        return self.inputs[index]

    def write_inputs(self, index: int) -> dict[str, Any]:
        writer = TensorFileWriter(self.exchange_fd)
        return {"layout": writer.layout, "values": _put_values(writer, "input", self._call_inputs(index))}

    def compare(self, index: int, layout: Any) -> dict[str, Any]:
        """The reference's outputs for call `index`, compared with the candidate's when it gave a layout."""
        inputs = self._call_inputs(index)
        before = _generator_states(self.device)
        started = time.monotonic()
        raw = self.model(*inputs)
        seconds = synced_seconds(self.device, started) if layout is not None else 0.0
        self.random = self.random or not _same_states(before, _generator_states(self.device))
        refs = as_list(raw)
        shapes = [{"shape": list(o.shape), "dtype": str(o.dtype)} for o in refs]
        constants = [_constant(o) for o in refs]
        if not self.stand_ins:
            self.stand_ins = [o.clone() for o in refs]  # the null batch projects outputs like the real ones
        try:
            if layout is None:
                return {"outputs": shapes, "returns_sequence": isinstance(raw, (tuple, list)), "constants": constants}
            try:
                got = _outputs_described(TensorFileReader(self.outputs_fd, layout), refs)
            except (ValueError, TypeError, OverflowError, OSError, RuntimeError, MemoryError) as exc:
                # The layout is the candidate's word: whatever in it cannot be read is its failure, never this job's.
                return {"outputs": shapes, "constants": constants, "comparison": {"passed": False,
                        "max_abs_error": float("inf"), "max_rel_error": float("inf"), "atol": 0.0, "rtol": 0.0,
                        "mismatched": 0, "numel": 0, "note": f"the candidate's outputs could not be read: {exc}"}}
            piece = CHUNK_BYTES // max(max((o.element_size() for o in refs), default=1), 1)
            parts = compare_each(refs, got, *self.tolerances, piece=piece) if len(refs) == len(got) else None
            comparison = combined(parts) if parts else compare_outputs(refs, got, *self.tolerances, piece=piece)
            if not comparison.passed and self.rejudge:
                comparison = self._against_exact(index, refs, got, comparison, parts, piece, seconds)
            return {"outputs": shapes, "constants": constants, "comparison": asdict(comparison)}
        finally:
            if index not in (0, 1):
                self.inputs.pop(index, None)

    def _against_exact(self, index: int, refs: list[torch.Tensor], got: list[torch.Tensor], strict: Comparison,
                       parts: list[Comparison] | None, piece: int, float32_seconds: float) -> Comparison:
        """A failed checked call judged again against the reference in float64 (compare.held_to_eager). Never where the
        reference draws random numbers: its float32 and float64 runs are two draws, whose difference read as the
        reference's own error, and zeros passed as "as accurate as eager" on a dropout in training mode (the sixth red
        team). Such a reference is judged strictly, as it was before float64 judging existed."""
        if self.random:
            self.rejudge = False
            return dataclasses.replace(strict, note=joined(strict.note, "not judged against float64: the reference draws "
                                                                        "random numbers in forward (dropout in training mode?), "
                                                                        "so its outputs are one draw and only they count"))
        exacts, why_not = self.float64.outputs(self._call_inputs(index), refs, float32_seconds)
        if exacts is None:
            self.rejudge = False
            return dataclasses.replace(strict, note=joined(strict.note, f"not judged against float64: {why_not}"))
        judged, ill = held_to_eager(refs, got, exacts, *self.tolerances, piece=piece, strict=parts)
        self.ill_conditioned = self.ill_conditioned or ill
        self.rejudge = judged.passed
        return judged

    def set_bases(self) -> dict[str, Any]:
        """Checked calls 0 and 1 when the plan has two trials (the candidate kept their inputs); else call 0's
        and one more set of the problem's own, written to the exchange file."""
        if self.plan.trials >= 2:
            self.base_calls = [0, 1]
            self.stand_ins = self.stand_ins or [o.clone() for o in as_list(self.model(*self.bases[0]))]
            self._measure_noise()
            return {"from_calls": [0, 1]}
        self.base_calls = [0, len(self.plan.labels())]
        for index in self.base_calls:
            self._call_inputs(index)
        self.stand_ins = self.stand_ins or [o.clone() for o in as_list(self.model(*self.bases[0]))]
        self._measure_noise()
        writer = TensorFileWriter(self.exchange_fd)
        values = [_put_values(writer, f"base{i}", base) for i, base in enumerate(self.bases)]
        return {"layout": writer.layout, "values": values}

    def set_variant_bases(self, k: int) -> dict[str, Any]:
        """Variant k's two base sets (fresh draws of its shapes, never a checked call's), written to the exchange file;
        the sets timed before are dropped, and the null batch's stand-ins take the variant's output shapes."""
        for index in self.base_calls:  # the sets timed before (calls 0 and 1 are checked already: no command needs them)
            self.inputs.pop(index, None)
        first, second = -2 * (k + 1), -2 * (k + 1) - 1  # keys of no checked call
        self.inputs[first] = self.plan.variant_inputs(self.problem, k, "base0", self.device)
        self.inputs[second] = self.plan.variant_inputs(self.problem, k, "base1", self.device)
        self.base_calls = [first, second]
        self.stand_ins = [o.clone() for o in as_list(self.model(*self.bases[0]))]
        self._measure_noise()
        writer = TensorFileWriter(self.exchange_fd)
        values = [_put_values(writer, f"base{i}", base) for i, base in enumerate(self.bases)]
        return {"layout": writer.layout, "values": values}

    def _wide_signs(self) -> list[int]:
        """The signs a wide timed call's factor may take (keyed.wide_sign): each where the reference's outputs on a wide
        call of that sign are finite wherever they are on the plain mix of the same key. A wide call must never leave the
        problem's domain (a log of negatives): the projections count a non-finite output as zero, so any answer would
        agree there. Where a checked call found the reference ill-conditioned, the wide calls stay, their checks widened
        by the reference's own noise at their scale (_measure_wide_noise). They used to be dropped there, and whether
        the reference is found ill-conditioned is the candidate's choice (a more exact kernel fails the strict check):
        an exact log1p in checked calls turned them off, and a clamp skipped in timed calls was accepted."""
        self.wide_noise = {}
        if not self.payload.get("wide_calls"):
            return []
        if not any(isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel() > 1 for t in self.bases[0]):
            return []  # nothing a wide call would scale (indices only): no wide calls to speak of
        key = 3  # a key of its own (the compile warm-up uses 1 and 2); nothing secret rides on it
        def finite(sign: int) -> list[torch.Tensor]:
            outputs = as_list(self.model(*derive(self.bases, key, self.pools, sign=sign)))
            return [torch.isfinite(o) if isinstance(o, torch.Tensor) else torch.tensor(True) for o in outputs]
        plain = finite(0)
        allowed = []
        for sign in (1, -1):
            wide = finite(sign)
            if len(wide) == len(plain) and all(w.shape == p.shape and bool((w | ~p).all()) for w, p in zip(wide, plain)):
                allowed.append(sign)
        self._measure_wide_noise(allowed)
        return allowed

    def _measure_noise(self) -> None:
        """Where a checked call found the reference ill-conditioned, its own error on the timed calls' bases widens the
        keyed checks' bounds as the checked calls were widened (exact.Float64Reference.noise); elsewhere they stay strict."""
        self.noise = self.float64.noise(self.bases) if self.ill_conditioned else None

    def _measure_wide_noise(self, signs: list[int]) -> None:
        """Float64Reference.noise at each wide sign's scale, on the bases scaled as a wide call scales its mix, where a
        checked call found the reference ill-conditioned. A sign whose noise cannot be measured (no time or room left)
        keeps strict checks: an honest kernel may then fail them, which is visible, and no kernel is let off."""
        if self.ill_conditioned:
            self.wide_noise = {sign: self.float64.noise([scaled(base, sign * WIDE_SCALE) for base in self.bases])
                               for sign in signs}

    def _noise_for(self, key: int) -> list[float] | None:
        """The noise that widens timed call `key`'s checks: its wide sign's scale, or the bases' own."""
        sign = wide_sign(key, self.pools.wide) if self.wide_noise else 0
        return self.wide_noise.get(sign) if sign else self.noise

    def compile(self) -> dict[str, Any]:
        started = time.monotonic()
        try:
            compiled = torch.compile(self.model)
            compiled(*derive(self.bases, 1, self.pools))
            compiled(*derive(self.bases, 2, self.pools))
        except Exception as exc:  # noqa: BLE001 - a problem torch.compile cannot handle has no compile baseline
            return {"error": f"torch.compile failed: {type(exc).__name__}: {exc}"[:2000]}
        self.compiled = compiled
        return {"seconds": time.monotonic() - started}

    def batch(self, model: str, keys: list[int]) -> dict[str, Any]:
        if model == "null":
            stand_ins = self.stand_ins
            fn = lambda *args: stand_ins  # noqa: E731 - the harness's share of a batch, without the call
        else:
            fn = self.compiled if model == "compile" else self.model
        # Two tallies in every batch, as in the candidate's: what ran before it is not its, and what ran in it; only the
        # null batch's (the harness's own share) goes to the parent. The same two takes in every job's batch keep the
        # batches' costs alike.
        if self.kernels is not None:
            self.kernels.take(0)
        reply, figures = run_batch_figures(fn, self.bases, keys, self.device, self.pools)
        if self.kernels is not None:
            tally = self.kernels.take(kernel_census.batch_token(keys))
            if model == "null":
                reply["kernel_census"] = tally
        if model == "eager":
            self.eager_figures = (keys, figures) if figures is not None else None
        return reply

    def _probe(self) -> float:
        from agent.engine.evaluate.timing import busy_cycles

        if not self.probe_cycles:
            self.probe_cycles = max(1, int(busy_cycles() * _PROBE_US / 200.0))
        return probe_ms(self.probe_cycles)

    def verify(self, keys: list[int]) -> dict[str, Any]:
        """The reference's projections and bounds for `keys`: one batch where the fused kernels project (its figures
        hold both), else call by call."""
        if self.pools.fused:
            _, figures = run_batch_figures(self.model, self.bases, keys, self.device, self.pools)
            if figures is not None:
                return self._checks(keys, figures)
        expected, bounds = [], []
        for key in keys:
            refs = as_list(self.model(*derive(self.bases, key, self.pools)))
            expected.append(project(refs, key, self.pools).cpu().tolist())
            bounds.append(projection_bound(refs, key, self.pools, *self.tolerances, noise=self._noise_for(key)))
        return {"expected": expected, "bounds": bounds}

    def expected(self, keys: list[int]) -> dict[str, Any]:
        """verify's answer for `keys` from the last eager batch, where it ran them first (the parent draws a round's
        keys and hands every batch a prefix of them); else verify's own."""
        if self.eager_figures is not None:
            ran, figures = self.eager_figures
            if ran[:len(keys)] == keys:
                return self._checks(keys, figures[:len(keys)])
        return self.verify(keys)

    def _checks(self, keys: list[int], figures: torch.Tensor) -> dict[str, Any]:
        """Expected projections and their bounds from a batch's figures (calls x outputs x FIGURES) on `keys`, the
        outputs' dtypes being the reference's (its stand-ins are its outputs' clones)."""
        shapes = [(o.dtype, o.numel()) for o in self.stand_ins] or \
            [(dtype, math.prod(shape)) for shape, dtype in self.stand_in_shapes]
        dtypes, sizes = zip(*(real_numbers(*s) for s in shapes)) if shapes else ((), ())  # as projected (as_real)
        rows = figures.tolist()
        if any(len(call) != len(dtypes) for call in rows):
            raise ValueError(f"the reference gave {len(rows[0]) if rows else 0} outputs in a batch and {len(dtypes)} in its "
                             "checked calls")
        noises = [self._noise_for(key) or [] for key in keys]
        return {"expected": [[r[0] for r in call] for call in rows],
                "bounds": [[bound_of_figures(r[1:], dtype, numel, *self.tolerances, noise=noise[j] if j < len(noise) else 0.0)
                            for j, (r, dtype, numel) in enumerate(zip(call, dtypes, sizes))]
                           for call, noise in zip(rows, noises)]}


def _constant(output: Any) -> float | None:
    """The one value every element of a reference output holds, or None (several values, NaN, empty, not a real
    tensor). One reduction on the output's device: a problem whose outputs are the same constant for every input
    (KernelBench has some) is passed by any candidate that writes it, and the verdict says so (judge.py)."""
    if not isinstance(output, torch.Tensor) or output.numel() == 0 or output.is_complex():
        return None
    flat = output.detach().reshape(-1)
    low, high = torch.aminmax(flat.to(torch.uint8) if flat.dtype == torch.bool else flat)
    low_value, high_value = float(low), float(high)
    return low_value if low_value == high_value else None

