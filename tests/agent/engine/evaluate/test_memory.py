"""Memory planning (agent/engine/evaluate/memory.py) through the real engine on the CPU, where the "device memory" is the
budget EvalConfig.device_memory_bytes sets: a tiny one forces the sequential fallback and the capacity verdict.
Neither ever charges the candidate."""
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from agent.engine.evaluate import Evaluator
import agent.engine.evaluate.memory as memory
from agent.engine.sandbox import Limits
from agent.engine.verdict import Stage, Status
from tests.agent.engine.evaluate.relu_case import CANDIDATE, CONFIG, relu_problem

ROOT = Path(__file__).resolve().parents[4]
PROBLEM = relu_problem(64, 256)
# The reference's own forward needs a 4 GiB temporary; its job may address 3 GiB.
GREEDY_PROBLEM = PROBLEM.replace("return torch.relu(x)", "scratch = torch.empty(1 << 30)\n        return torch.relu(x)")
FOOTPRINT = memory.Footprint(input_bytes=64 * 256 * 4, weight_bytes=0, output_bytes=64 * 256 * 4,
                             input_elements=64 * 256, output_elements=64 * 256)


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory):
    with Evaluator(CONFIG, cache_root=tmp_path_factory.mktemp("kstudio-cache")) as ev:
        yield ev


def _budgets() -> tuple[int, int, int]:
    """(fits both, fits one at a time only, fits neither) for FOOTPRINT on the CPU."""
    cand, ref = memory.candidate_peak(FOOTPRINT, "cpu"), memory.reference_peak(FOOTPRINT, "cpu")
    return cand + ref, (max(cand, ref) + cand + ref) // 2, min(cand, ref) // 2


def test_the_plan_runs_the_jobs_beside_each_other_when_both_fit_and_one_after_the_other_when_one_does():
    both, one, neither = _budgets()
    assert memory.plan([FOOTPRINT], "cpu", both, "test").mode == memory.BESIDE
    assert memory.plan([FOOTPRINT], "cpu", None, "no budget").mode == memory.BESIDE
    assert memory.plan([FOOTPRINT], "cpu", one, "test").mode == memory.AFTER
    refused = memory.plan([FOOTPRINT], "cpu", neither, "test")
    assert refused.mode == memory.CAPACITY and "64.0 KiB" in refused.note and "limit is" in refused.note


def test_a_candidate_out_of_memory_beside_the_reference_is_retried_one_after_the_other_once():
    both, one, _ = _budgets()
    beside = memory.plan([FOOTPRINT], "cuda", both + 2 * memory.GIB, "test")
    retry = memory.after_out_of_memory(beside)
    assert beside.mode == memory.BESIDE and retry is not None and retry.mode == memory.AFTER
    assert memory.after_out_of_memory(retry) is None  # out of memory after the other is the candidate's own


# KernelBench's 19_ReLU at its own size: a 6 GiB input and a 6 GiB output on an 80 GB card.
RELU_6GIB = memory.Footprint(input_bytes=6 * memory.GIB, weight_bytes=0, output_bytes=6 * memory.GIB,
                             input_elements=3 << 29, output_elements=3 << 29)
H100_BUDGET = int(0.9 * 79.2 * memory.GIB)


def test_one_after_the_other_on_a_gpu_gives_each_job_room_on_the_host_for_what_it_parks():
    # Seen on the H100: parked, the reference's job held its two base sets and the stand-in outputs (18 GiB) on the
    # host and was killed at its usual 16 GiB limit; the problem ended in a capacity verdict it did not deserve.
    made = memory.plan([RELU_6GIB], "cuda", H100_BUDGET, "test", host_available=120 * memory.GIB)
    assert made.mode == memory.AFTER
    assert made.candidate_host_bytes == 12 * memory.GIB and made.reference_host_bytes == 18 * memory.GIB
    # Then each job waits while the other works, and the moves are the engine's: the candidate's job lives as long
    # as the reference's may (each command it answers keeps its own deadline, in session.py).
    usual, usual_ref = Limits(), Limits(wall_seconds=900)
    cand, ref = memory.job_limits(made, usual, usual_ref)
    files = made.exchange_bytes + made.outputs_bytes  # mapped by both jobs (the next test)
    assert ref.memory_bytes == usual_ref.memory_bytes + files + 18 * memory.GIB and ref.wall_seconds == 900
    assert cand.memory_bytes == usual.memory_bytes + files + 12 * memory.GIB and cand.wall_seconds == 900
    beside = memory.plan([FOOTPRINT], "cuda", H100_BUDGET, "test")
    cand, ref = memory.job_limits(beside, usual, usual_ref)
    assert beside.mode == memory.BESIDE and cand.wall_seconds == usual.wall_seconds
    assert cand.memory_bytes - usual.memory_bytes == ref.memory_bytes - usual_ref.memory_bytes == \
        2 * memory.FILE_SLACK + 2 * FOOTPRINT.input_bytes + FOOTPRINT.output_bytes


# KernelBench's 45_Average_Pooling_2D: a 16 GiB input, so two input sets (the timing's base sets) are 32 GiB.
POOL_16GIB = memory.Footprint(input_bytes=16 * memory.GIB, weight_bytes=0, output_bytes=2 * memory.GIB,
                              input_elements=1 << 32, output_elements=1 << 29)


def test_on_a_gpu_the_host_files_tensors_pass_through_are_sized_to_the_problem_and_counted_in_each_jobs_limit():
    # Seen on an H200: the import's check of 45_Average_Pooling_2D was killed at the job's usual 16 GiB of resident
    # memory while it wrote its 16 GiB input into the exchange file (itself 16 GiB, the job's limit): the problem was
    # refused as too big on a card of 139 GiB and a host of 128 GiB.
    made = memory.plan([POOL_16GIB], "cuda", 1 << 50, "test", host_available=120 * memory.GIB)
    assert made.mode == memory.BESIDE
    assert made.exchange_bytes == 32 * memory.GIB + memory.FILE_SLACK
    assert made.outputs_bytes == 2 * memory.GIB + memory.FILE_SLACK
    cand, ref = memory.job_limits(made, Limits(), Limits(wall_seconds=900))
    assert cand.memory_bytes == ref.memory_bytes == Limits().memory_bytes + 34 * memory.GIB + 2 * memory.FILE_SLACK
    # On the CPU the files stay within the jobs' usual limits (the device's memory is the host's), as before.
    on_cpu = memory.plan([POOL_16GIB], "cpu", None, "no budget")
    assert on_cpu.exchange_bytes == on_cpu.outputs_bytes == 0
    assert memory.job_limits(on_cpu, Limits(), Limits()) == (Limits(), Limits())


def test_host_files_the_host_cannot_hold_are_a_capacity_verdict_naming_the_host_and_the_footprint():
    made = memory.plan([POOL_16GIB], "cuda", 1 << 50, "test", host_available=32 * memory.GIB)
    assert made.mode == memory.CAPACITY
    assert "34.1 GiB of host memory" in made.note and "32.0 GiB free" in made.note and "inputs 16.0 GiB" in made.note


def test_parked_state_the_host_cannot_hold_is_a_capacity_verdict_naming_the_host():
    made = memory.plan([RELU_6GIB], "cuda", H100_BUDGET, "test", host_available=24 * memory.GIB)
    assert made.mode == memory.CAPACITY
    assert "30.0 GiB on the host" in made.note and "24.0 GiB free" in made.note and "inputs 6.0 GiB" in made.note


def test_on_the_cpu_parking_moves_nothing_so_no_room_is_added():
    _, one, _ = _budgets()
    made = memory.plan([FOOTPRINT], "cpu", one, "test")
    assert made.mode == memory.AFTER and made.candidate_host_bytes == made.reference_host_bytes == 0
    cand, ref = memory.job_limits(made, Limits(), Limits(wall_seconds=900))
    assert cand.memory_bytes == ref.memory_bytes == Limits().memory_bytes


def test_the_largest_input_set_decides_the_plan():
    large = dataclasses.replace(FOOTPRINT, input_bytes=FOOTPRINT.input_bytes * 8, input_elements=FOOTPRINT.input_elements * 8)
    _, one, _ = _budgets()
    assert memory.plan([FOOTPRINT, large], "cpu", one, "test").footprint["input_bytes"] == large.input_bytes


def test_it_falls_back_to_one_job_after_the_other_and_still_judges_the_candidate(evaluator):
    _, one, _ = _budgets()
    verdict = evaluator.evaluate(PROBLEM, CANDIDATE, dataclasses.replace(CONFIG, device_memory_bytes=one))
    assert verdict.memory is not None and verdict.memory["mode"] == memory.AFTER, verdict.memory
    assert verdict.memory["footprint"]["input_bytes"] == FOOTPRINT.input_bytes
    assert verdict.memory["footprint"]["output_bytes"] == FOOTPRINT.output_bytes
    assert verdict.status is Status.ACCEPTED, verdict.message
    assert verdict.timing is not None and verdict.timing.verified_calls > 0


def test_a_problem_too_large_for_the_device_gets_a_capacity_verdict_naming_footprint_and_limit(evaluator):
    _, _, neither = _budgets()
    verdict = evaluator.evaluate(PROBLEM, CANDIDATE, dataclasses.replace(CONFIG, device_memory_bytes=neither))
    assert verdict.status is Status.CAPACITY and verdict.stage is Stage.PLAN
    assert "inputs 64.0 KiB, weights 0 bytes, outputs 64.0 KiB" in verdict.message
    assert "EvalConfig.device_memory_bytes" in verdict.message and "not the candidate's fault" in verdict.message
    assert "build" not in verdict.seconds  # nothing was built, nothing ran: the plan decided
    assert json.loads(json.dumps(verdict.to_dict()))["memory"]["mode"] == memory.CAPACITY


def test_the_reference_running_out_of_memory_is_the_engines_limit_not_the_candidates_error(evaluator):
    config = dataclasses.replace(CONFIG, reference_limits=Limits(wall_seconds=120, memory_bytes=3 << 30))
    verdict = evaluator.evaluate(GREEDY_PROBLEM, CANDIDATE, config)
    assert verdict.status is Status.CAPACITY and verdict.stage is Stage.REFERENCE, verdict.message
    assert "not the candidate's failure" in verdict.message


def test_the_agent_and_the_builtin_policy_see_the_engines_limit_not_a_failed_kernel(tmp_path):
    problem = tmp_path / "relu.py"
    problem.write_text(relu_problem(512, 1024))  # 2 MiB a tensor: 1 MiB fits nothing
    proc = subprocess.run([sys.executable, "-m", "agent", "optimize", str(problem), "--policy", "builtin", "--device", "cpu",
                           "--json", "--no-compile-baseline", "--max-turns", "4", "--device-memory-mb", "1",
                           "--trajectory", str(tmp_path / "run.jsonl")],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    out = json.loads(proc.stdout)
    assert out["status"] == "failed", proc.stderr[-3000:]
    assert "the engine's limit" in out["stop_reason"] and "gap in our templates" not in proc.stdout + proc.stderr
    record = json.loads((tmp_path / "run.jsonl").read_text().splitlines()[0])
    assert record["turn_statuses"] == [["capacity"]] and record["turn_rewards"] == [0.0]
    assert record["final_reward"] == 0.0
