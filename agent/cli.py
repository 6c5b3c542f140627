"""`python -m agent evaluate PROBLEM.py CANDIDATE.py --device cpu|cuda [--backend B] [--json]`
`python -m agent optimize PROBLEM.py --policy builtin|scripted-demo|openai|transformers [--model M --base-url URL] [--json]
    [--trajectory RUNS.jsonl]`
`python -m agent export RUNS.jsonl --out DIR` (trajectory records to a Hugging Face datasets dataset)

With --json, stdout carries exactly one JSON document (the verdict; for optimize, the run's outcome
with its best verdict); everything else goes to stderr.
Exit status: 0 accepted, 1 evaluated but not accepted, 2 bad input (unreadable file, invalid problem).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path

from agent.engine.backends import BACKENDS
from agent.engine.evaluate import EvalConfig, Evaluator, ProblemError
from agent.engine.sandbox import Limits
from agent.loop.policies.base import Policy, PolicyError
from agent.loop.policies.factory import PolicySpec, make_policy
from agent.loop.policies.scripted import ScriptedPolicy, demo_files, script_of_files
from agent.engine.verdict import Verdict
from agent.loop.state import Budgets
from agent.described import help_of


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m agent", description="Kernel Studio's agent and evaluation engine.")
    sub = parser.add_subparsers(dest="command", required=True)
    ev = sub.add_parser("evaluate", help="build, verify and benchmark a candidate against a problem")
    ev.add_argument("problem", type=Path, help="KernelBench-format problem: Model, get_inputs, get_init_inputs")
    ev.add_argument("candidate", type=Path, help="candidate module defining ModelNew")
    ev.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ev.add_argument("--backend", choices=BACKENDS, default=None,
                    help="default: guessed from the candidate's source")
    ev.add_argument("--json", action="store_true", help="print exactly one JSON verdict on stdout")
    ev.add_argument("--quiet", action="store_true", help="print no progress on stderr (each phase as it starts)")
    ev.add_argument("--no-timing", action="store_true", help="check correctness only")
    ev.add_argument("--no-compile-baseline", action="store_true", help="skip the torch.compile baseline")
    ev.add_argument("--profile", action="store_true", help="attach a profiler summary")
    ev.add_argument("--seed", type=int, default=None, help="fix the secret seed (to reproduce a verdict)")
    ev.add_argument("--allow-ops", default="", help="extra ATen ops the candidate may call, comma-separated")
    ev.add_argument("--cache-dir", type=Path, default=None, help="build cache (default: $KSTUDIO_CACHE_DIR or .cache/kstudio)")
    ev.add_argument("--device-memory-mb", type=int, default=None, help=_DEVICE_MEMORY_HELP)
    ev.add_argument("--candidate-seconds", type=float, default=CANDIDATE_SECONDS, help=_CANDIDATE_SECONDS_HELP)
    bd = sub.add_parser("build", help="compile a candidate's extensions into the shared build cache (no GPU needed)")
    bd.add_argument("candidate", type=Path, help="candidate module defining ModelNew")
    bd.add_argument("--device", choices=("cpu", "cuda"), default="cuda", help="the device the build is for")
    bd.add_argument("--json", action="store_true", help="print the build report as JSON")
    bd.add_argument("--cache-dir", type=Path, default=None, help="build cache (default: $KSTUDIO_CACHE_DIR or .cache/kstudio)")
    op = sub.add_parser("optimize", help="let the agent write, test and improve kernels for a problem over many turns")
    op.add_argument("problem", type=Path, help="KernelBench-format problem: Model, get_inputs, get_init_inputs")
    op.add_argument("--policy", choices=("builtin", "scripted-demo", "openai", "transformers"), default=None,
                    help="default: builtin, or scripted-demo when --script is given. "
                         "builtin: our own kernel templates searched over turns (no model); scripted-demo: replay "
                         "candidate files; openai: any OpenAI-compatible endpoint (vLLM, transformers serve); "
                         "transformers: a local checkpoint run in this process")
    op.add_argument("--script", type=Path, nargs="+", default=None,
                    help="scripted-demo: candidate files to write in order, then benchmark and submit "
                         "(default: the corpus's demo for elementwise_silu_bias)")
    op.add_argument("--base-url", default="http://127.0.0.1:8001/v1", help="openai: the endpoint's base URL")
    op.add_argument("--model", default=None,
                    help="openai: the model name the endpoint serves; transformers: the checkpoint directory "
                         "(config.json, weights, a tokenizer with a chat template)")
    op.add_argument("--api-key-env", default="OPENAI_API_KEY", help="openai: environment variable holding the API key")
    op.add_argument("--temperature", type=float, default=0.2,
                    help="openai, transformers: sampling temperature (transformers: 0 decodes greedily)")
    op.add_argument("--max-new-tokens", type=int, default=4096,
                    help="openai, transformers: the longest completion of one model turn")
    op.add_argument("--top-p", type=float, default=0.95, help="transformers: nucleus sampling's probability mass")
    op.add_argument("--seed", type=int, default=None,
                    help="transformers: seed for sampling, for a reproducible run (turn i uses seed + i)")
    op.add_argument("--model-device", default=None,
                    help="transformers: where the model runs, e.g. cuda:1 (default: --device)")
    op.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where candidates are built and timed")
    for name, kind in (("max_turns", int), ("max_tokens", int), ("max_wall_seconds", float), ("max_gpu_seconds", float)):
        op.add_argument("--" + name.replace("_", "-"), type=kind, default=getattr(Budgets(), name),
                        help="budget: " + help_of(Budgets, name))
    op.add_argument("--no-compile-baseline", action="store_true", help="skip the torch.compile baseline")
    op.add_argument("--trajectory", type=Path, default=None,
                    help="append the run's training record to this JSON lines file (one run a line; "
                         "`export` turns the file into a dataset)")
    op.add_argument("--json", action="store_true", help="print exactly one JSON document on stdout")
    op.add_argument("--cache-dir", type=Path, default=None, help="build cache (default: $KSTUDIO_CACHE_DIR or .cache/kstudio)")
    op.add_argument("--device-memory-mb", type=int, default=None, help=_DEVICE_MEMORY_HELP)
    op.add_argument("--candidate-seconds", type=float, default=CANDIDATE_SECONDS, help=_CANDIDATE_SECONDS_HELP)
    ex = sub.add_parser("export", help="turn trajectory records (JSON lines) into a Hugging Face datasets dataset")
    ex.add_argument("trajectories", type=Path, help="JSON lines of trajectory records, as optimize --trajectory writes")
    ex.add_argument("--out", type=Path, required=True,
                    help="directory to write the dataset to (save_to_disk; read it with datasets.load_from_disk)")
    return parser


def _read(path: Path, what: str) -> str:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise SystemExit(_fail(f"cannot read the {what} {path}: {exc}"))


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def _human(verdict: Verdict) -> str:
    lines = [f"status: {verdict.status.value}  ({verdict.stage.value})", verdict.message]
    for f in verdict.flags:
        lines.append(f"  flag {f.flag.value}: {f.detail}")
    for t in verdict.trials:
        lines.append(f"  trial {t.index} {t.distribution:<12} {'ok ' if t.passed else 'BAD'} max abs {t.max_abs_error:.3g} "
                     f"max rel {t.max_rel_error:.3g}")
    if verdict.timing:
        t = verdict.timing
        lines.append(f"  candidate {t.candidate_ms:.4f} ms | eager {t.eager_ms:.4f} ms ({t.speedup_vs_eager:.2f}x)"
                     + (f" | torch.compile {t.compile_ms:.4f} ms ({t.speedup_vs_compile:.2f}x)" if t.compile_ms else ""))
    return "\n".join(lines)


# The studio's own default (KSTUDIO_CANDIDATE_WALL_SECONDS). A candidate's job lives through the whole evaluation, the
# reference's batches and torch.compile's compile included, so EvalConfig's 120 s ended an honest CPU evaluation of
# KernelBench's 40_LayerNorm at its own size as a timeout (its checks alone took 38 s on a loaded 2-core box).
CANDIDATE_SECONDS = 300.0
_CANDIDATE_SECONDS_HELP = ("wall-clock limit of each candidate's job, in seconds (the studio's default): the job lives "
                           "through the whole evaluation, the baselines' timing and torch.compile's compile included")
_DEVICE_MEMORY_HELP = ("device memory the evaluation's two jobs may use together, in MiB (default: the GPU's own; "
                       "none on the CPU): a problem that does not fit gets a capacity verdict")


def _device_memory(args: argparse.Namespace) -> int | None:
    return args.device_memory_mb << 20 if args.device_memory_mb else None


def _candidate_limits(args: argparse.Namespace) -> Limits:
    if args.candidate_seconds <= 0:
        raise SystemExit("--candidate-seconds must be positive: the wall-clock limit of each candidate's job, in seconds")
    return Limits(wall_seconds=args.candidate_seconds)


def _show_phase(phase: str, what: str, elapsed: float) -> None:
    """Long work shows progress: each phase of the evaluation on stderr as it starts (stdout keeps the verdict)."""
    print(f"[{elapsed:6.1f} s] {what}", file=sys.stderr, flush=True)


def evaluate_command(args: argparse.Namespace) -> int:
    problem = _read(args.problem, "problem")
    candidate = _read(args.candidate, "candidate")
    config = EvalConfig(device=args.device, backend=args.backend, timing=not args.no_timing,
                        compile_baseline=not args.no_compile_baseline, profile=args.profile, seed=args.seed,
                        allowed_ops=tuple(o.strip() for o in args.allow_ops.split(",") if o.strip()),
                        device_memory_bytes=_device_memory(args), limits=_candidate_limits(args))
    try:
        with Evaluator(config, cache_root=args.cache_dir) as evaluator:
            verdict = evaluator.evaluate(problem, candidate, on_phase=None if args.quiet else _show_phase)
    except ProblemError as exc:
        return _fail(str(exc))
    if args.json:
        json.dump(verdict.to_dict(), sys.stdout)
        sys.stdout.write("\n")
    else:
        print(_human(verdict))
    return 0 if verdict.accepted else 1


def build_command(args: argparse.Namespace) -> int:
    candidate = _read(args.candidate, "candidate")
    with Evaluator(EvalConfig(device=args.device), cache_root=args.cache_dir) as evaluator:
        info, header = evaluator.build(candidate)
    report = {"ok": bool(header.get("ok")), "error": header.get("error"), "build": dataclasses.asdict(info)}
    if args.json:
        json.dump(report, sys.stdout)
        sys.stdout.write("\n")
    else:
        status = "built" if report["ok"] else f"build failed: {report['error']}"
        print(f"{args.candidate}: {status} in {info.seconds:.1f} s ({info.cache_hits} cached, {info.cache_misses} compiled)")
    return 0 if report["ok"] else 1


def _policy(args: argparse.Namespace) -> Policy:
    if args.policy == "scripted-demo":
        paths = args.script or demo_files(args.device)
        missing = [str(p) for p in paths if not p.is_file()]
        if missing:
            raise SystemExit(_fail(f"scripted-demo: no candidate file {', '.join(missing)}; pass --script FILE..."))
        spec = PolicySpec("scripted", script=script_of_files(paths))
    elif not args.model:
        what = "the checkpoint directory" if args.policy == "transformers" else "the name the endpoint serves"
        raise SystemExit(_fail(f"--policy {args.policy} needs --model ({what})"))
    elif args.policy == "transformers":
        spec = PolicySpec("transformers", model=args.model, temperature=args.temperature, max_tokens=args.max_new_tokens,
                          top_p=args.top_p, seed=args.seed, model_device=args.model_device or "")
    else:
        spec = PolicySpec("openai", model=args.model, base_url=args.base_url,
                          api_key=os.environ.get(args.api_key_env, "EMPTY"), temperature=args.temperature,
                          max_tokens=args.max_new_tokens)
    try:
        # A checkpoint we cannot use is bad input, found before any evaluation starts.
        return make_policy(spec, device=args.device, load=True)
    except PolicyError as exc:
        raise SystemExit(_fail(str(exc)))


def optimize_command(args: argparse.Namespace) -> int:
    from agent.builtin.trace import trace_graph
    from agent.loop import runner as loop
    from agent.loop.tools import Toolbox
    from agent.loop.trajectory import to_record

    problem = _read(args.problem, "problem")
    args.policy = args.policy or ("scripted-demo" if args.script else "builtin")
    policy = None if args.policy == "builtin" else _policy(args)  # builtin traces through the evaluator's sandbox
    max_turns = args.max_turns
    if isinstance(policy, ScriptedPolicy):
        max_turns = min(max_turns, len(policy.turns))  # the script ends the run, not a "policy error"
    try:
        budgets = loop.Budgets(max_turns=max_turns, max_tokens=args.max_tokens,
                               max_wall_seconds=args.max_wall_seconds, max_gpu_seconds=args.max_gpu_seconds)
    except ValueError as exc:
        return _fail(str(exc))
    config = EvalConfig(device=args.device, compile_baseline=not args.no_compile_baseline,
                        device_memory_bytes=_device_memory(args), limits=_candidate_limits(args))

    def progress(state: loop.AgentState) -> None:
        record = state.turns[-1] if state.turns else None
        if record is not None:
            statuses = ", ".join(_turn_verdict(v) for v in record.verdicts) or "no evaluation"
            # Counted from 1, as the run page and the loop's texts count turns (the JSON keeps the 0-based index).
            print(f"\nturn {record.turn + 1}: {', '.join(record.tools) or 'no tool call'} -> {statuses} "
                  f"(reward {record.reward:g})", file=sys.stderr)

    try:
        with Evaluator(config, cache_root=args.cache_dir) as evaluator:
            toolbox = Toolbox(evaluator, config, on_phase=_show_phase)
            state = loop.start(problem, toolbox)
            if policy is None:
                policy = make_policy(PolicySpec("builtin"), device=args.device, problem_source=problem,
                                     tracer=lambda source: trace_graph(evaluator, source))
            state = loop.run(state, policy, toolbox, budgets, on_text=lambda text: print(text, end="", file=sys.stderr),
                             on_step=progress)
    except ProblemError as exc:
        return _fail(str(exc))
    if state.status == loop.FAILED and state.stop_reason.startswith("the problem failed"):
        return _fail(state.stop_reason)
    if args.trajectory:
        from agent.export.dataset import write_jsonl

        write_jsonl([to_record(state)], args.trajectory, append=True)
    best = state.best_verdict()
    outcome = {"status": state.status, "stop_reason": state.stop_reason, "policy": state.policy, "turns": state.turn,
               "prompt_tokens": state.prompt_tokens, "completion_tokens": state.completion_tokens,
               "wall_seconds": state.wall_seconds, "gpu_seconds": state.gpu_seconds,
               "best_turn": state.best["turn"] if state.best else None,
               "best_source": state.best["source"] if state.best else None,
               "verdict": best.to_dict() if best else None,
               # Every evaluation's summary, turn by turn: why a candidate other than the best lost.
               "evaluations": [{"turn": r.turn, **v} for r in state.turns for v in r.verdicts]}
    if args.json:
        json.dump(outcome, sys.stdout)
        sys.stdout.write("\n")
    else:
        print(f"run {state.status}: {state.stop_reason} after {state.turn} turns")
        print(_human(best) if best else "no candidate was accepted")
    return 0 if best is not None else 1


def _turn_verdict(summary: dict) -> str:
    """A turn's verdict in a progress line: its status, and its times where it was correct and timed."""
    if summary.get("candidate_ms") is None or not summary.get("correct"):
        return summary["status"]
    text = f"{summary['status']} {summary['candidate_ms']:.4f} ms"
    if summary.get("speedup_vs_eager") is not None:
        text += f", {summary['speedup_vs_eager']:.2f}x vs eager"
    if summary.get("speedup_vs_compile") is not None:
        text += f", {summary['speedup_vs_compile']:.2f}x vs torch.compile"
    return text


def export_command(args: argparse.Namespace) -> int:
    from agent.export.dataset import read_jsonl, save

    try:
        records = read_jsonl(args.trajectories)
        if not records:
            return _fail(f"{args.trajectories} holds no trajectory records")
        dataset = save(records, args.out)
    except OSError as exc:
        return _fail(f"cannot read {args.trajectories} or write {args.out}: {exc}")
    except ValueError as exc:  # a line that is not JSON, a record that is not a trajectory
        return _fail(str(exc))
    print(f"wrote {dataset.num_rows} trajectories to {args.out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "evaluate":
        return evaluate_command(args)
    if args.command == "build":
        return build_command(args)
    if args.command == "optimize":
        return optimize_command(args)
    if args.command == "export":
        return export_command(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
