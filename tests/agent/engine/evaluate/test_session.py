"""The parent's statistics and its line to a job (agent/engine/evaluate/session.py, channel.py)."""
import os
import random
from pathlib import Path

import pytest

from agent.engine.evaluate.channel import ChannelError, JobFailed, ParentEnd
from agent.engine.evaluate.session import Measured, Outcome, Session, median_interval


def test_the_speedup_interval_covers_the_median_and_narrows_with_more_rounds():
    five = median_interval([1.0, 1.1, 0.9, 1.05, 3.0])
    assert five[0] == 1.05 and five[1] == 0.9 and five[2] == 3.0  # 5 rounds: the whole range (93.75% coverage)
    many = median_interval([1.0 + 0.01 * (i % 7) for i in range(15)] + [5.0])
    assert many[1] >= 1.0 and many[2] < 5.0, "an outlier round leaves the interval of 16 rounds"


def test_a_reply_that_is_not_one_json_object_per_line_is_the_jobs_failure():
    end = ParentEnd()
    _, reply_w = end.job_fds()
    os.write(reply_w, b'{"ok": true}\n[1, 2]\nnot json\n{"fatal": true, "error": "boom", "kind": "runtime_error"}\n')
    assert end.receive(1.0)[0] == {"ok": True}
    with pytest.raises(ChannelError, match="not a JSON object"):
        end.receive(1.0)
    with pytest.raises(ChannelError, match="not JSON"):
        end.receive(1.0)
    with pytest.raises(JobFailed, match="boom"):
        end.receive(1.0)
    end.close()


def test_a_job_that_goes_quiet_or_away_is_noticed():
    end = ParentEnd(alive=lambda: False)
    with pytest.raises(ChannelError, match="ended without answering"):
        end.receive(5.0)
    end.close()


def _sized(per_call: float, overhead: float, most: int = 20_000) -> tuple[list[int], int]:
    """The warm-up's batch sizes and its chosen size, on a job whose batches take `overhead + calls * per_call`."""
    session = object.__new__(Session)  # only the sizing: no jobs behind it
    sizes: list[int] = []

    def batch(model, keys, events=False):
        sizes.append(len(keys))
        return overhead + per_call * len(keys), None, float("nan")

    session._reference_batch = batch
    return sizes, session._autorange("eager", 0.05, Measured(), most)


def test_the_warm_up_jumps_to_the_batch_size_its_calls_predict_instead_of_doubling():
    sizes, calls = _sized(per_call=0.001, overhead=0.0002)
    assert sizes == [1, 1, 46, 55], "two untimed first calls, then the prediction (doubling took 1, 1, 2, ... 64)"
    assert calls == 50 and 0.05 <= 0.0002 + 55 * 0.001
    tiny, tiny_calls = _sized(per_call=2e-6, overhead=0.0005)
    assert tiny == [1, 1, 110, 8403, 20_000] and tiny_calls == 20_000, "calls lost in a batch's fixed cost: the cap"
    assert _sized(per_call=0.02, overhead=0.001) == ([1, 1, 3], 3), "slow calls: a batch of the target at once"
    capped, capped_calls = _sized(per_call=0.001, overhead=0.0, most=8)
    assert max(capped) == 8 and capped_calls == 8, "never past the most the caller allows"


def test_a_steady_compile_baseline_is_kept_however_noisy_the_candidate_was():
    from agent.engine.evaluate.session import keeps_compile_baseline

    steady = Measured(eager=[1.0, 1.01, 0.99, 1.0, 1.02], compile=[0.5, 0.51, 0.5, 0.49, 0.5],
                      candidate=[0.3, 2.0, 0.1, 5.0, 0.7])  # the candidate never converged
    assert keeps_compile_baseline(steady, 0.15)
    noisy = Measured(eager=[1.0, 1.01, 0.99, 1.0, 1.02], compile=[0.5, 0.9, 0.3, 0.49, 0.7])
    assert not keeps_compile_baseline(noisy, 0.15), "a ratio that moved is not stored for other evaluations"
    assert not keeps_compile_baseline(Measured(eager=steady.eager, compile=steady.compile, contended=1), 0.15)
    assert not keeps_compile_baseline(Measured(eager=steady.eager, compile=steady.compile, mismatched_calls=[3]), 0.15)
    assert not keeps_compile_baseline(Measured(eager=steady.eager), 0.15), "nothing compiled, nothing kept"


def _rounds(own_nulls: list[float | None], reference_nulls: list[float] | None = None) -> Measured:
    """Timing rounds on jobs whose batches take: candidate 0.050 s, eager 0.060 s (10 calls each), the reference's
    null reference_nulls[i] (0.040 s by default), the candidate's own null own_nulls[i] (None: its job ran none)."""
    session = object.__new__(Session)  # only the rounds' arithmetic: no jobs behind it
    session._batch_cpu = None  # and no CPU readings
    m = Measured(calls={"candidate": 10, "eager": 10})
    reference_nulls = reference_nulls or [0.040] * len(own_nulls)
    for own, reference in zip(own_nulls, reference_nulls):
        session._run_candidate_batch = lambda keys, rewarm=False: (0.050, {"projections": []})
        session._check_batch = lambda keys, got, m, command="verify": None
        session._candidate_null = lambda keys, own=own: own
        session._reference_batch = lambda model, keys, events=False, rewarm=False, reference=reference: \
            (0.060 if model == "eager" else reference, None, float("nan"))
        session._round(["eager"], m, [], flip=False)
    return m


def test_the_candidate_figure_never_takes_off_more_than_the_reference_null_so_its_own_job_cannot_make_it_faster():
    none = _rounds([None])
    assert none.candidate == [pytest.approx(1.0)] and none.eager == [pytest.approx(2.0)]  # ms per call, less 0.040 s
    assert none.null_scale == 1.0
    faster_harness = _rounds([0.035])  # its process runs the harness faster: that is not its kernel's speed
    assert faster_harness.candidate == [pytest.approx(1.5)] and faster_harness.null_scale == pytest.approx(0.875)
    slowed = _rounds([0.049])  # a candidate that slows its own null batch gains nothing
    assert slowed.candidate == [pytest.approx(1.0)] and slowed.null_scale == 1.0
    assert slowed.eager == faster_harness.eager == [pytest.approx(2.0)], "the baselines keep the reference's null"
    rng = random.Random(7)
    for _ in range(50):  # whatever its own nulls say, round by round
        own = [rng.choice([None, rng.uniform(0.0, 0.2)]) for _ in range(rng.randint(1, 9))]
        assert all(c >= 1.0 - 1e-9 for c in _rounds(own).candidate), own


def test_a_candidate_cannot_pick_its_rounds_by_slowing_its_own_null_in_some_of_them():
    # Small own nulls in three rounds, huge ones in two: a per-round "smaller of the two" took 0.040 s off the
    # two rounds it chose (1.0 ms) and 0.035 s off the rest (1.5 ms). One scale for the evaluation treats every round
    # alike; here its interval reaches past 1, so the reference's null alone comes off (as with no null of its own).
    picked = _rounds([0.035, 0.035, 0.5, 0.035, 0.5])
    assert picked.null_scale == 1.0
    assert picked.candidate == [pytest.approx(1.0)] * 5
    steady = _rounds([0.035, 0.036, 0.034, 0.035, 0.035])  # a process surely faster at the harness: less comes off
    assert steady.null_scale == pytest.approx(0.036 / 0.040)
    assert steady.candidate == [pytest.approx(1.4)] * 5


def test_noise_alike_in_both_nulls_costs_the_candidate_nothing():
    # The same noisy nulls in both jobs, in another order: the smaller of two noisy draws per round took off less than
    # the baselines got (a bias against the candidate that grew with the box's load); the median ratio does not.
    reference = [0.030, 0.042, 0.036, 0.039, 0.033]
    noisy = _rounds([0.042, 0.030, 0.039, 0.033, 0.036], reference)
    assert noisy.null_scale == 1.0
    assert noisy.candidate == pytest.approx([(0.050 - r) * 100 for r in reference])


def test_a_busy_device_before_the_references_null_batch_counts_as_contended_like_one_before_a_baseline():
    # The reference's null of the candidate's size comes off the candidate's time: work the candidate's job left queued
    # on the GPU, running through that null, would lengthen it and make the candidate faster. Its probe went unused.
    for slow in ("null", "eager", None):
        session = object.__new__(Session)
        session._batch_cpu = None
        m = Measured(calls={"candidate": 10, "eager": 10})
        session._run_candidate_batch = lambda keys, rewarm=False: (0.050, {"projections": []})
        session._check_batch = lambda keys, got, m, command="verify": None
        session._candidate_null = lambda keys: None
        probes: list[float] = []
        for round_ in range(3):
            session._reference_batch = lambda model, keys, events=False, rewarm=False, late=round_ == 2: \
                (0.060 if model == "eager" else 0.040, 0.2 if late and model == slow else 0.1, float("nan"))
            session._round(["eager"], m, probes, flip=round_ % 2 == 1)
        assert len(probes) == 6, "each round probes before its baseline and before its null"
        assert m.contended == (0 if slow is None else 1), slow


def test_each_round_pairs_the_candidates_batch_with_its_own_null_batch_for_the_cpu_reading():
    """The calls-alone CPU figure (cpu_share.call_over_threads) takes each timed batch's CPU and wall time against
    the own null batch of the same round. A round whose null the job did not answer as one (its reply is its word)
    is read whole, nothing credited: left out, it let a job that answered none of them unread (red team, session 38).
    A round whose CPU was not read pairs nothing."""
    for null_ran, read, pairs in [(True, True, [((0.07, 0.050), (0.03, 0.030))]),
                                  (False, True, [((0.07, 0.050), (0.0, 0.0))]), (True, False, [])]:
        session = object.__new__(Session)
        session.outcome = Outcome()
        m = Measured(calls={"candidate": 10, "eager": 10})

        def batch(keys, rewarm=False, read=read):
            session._batch_cpu = 0.07 if read else None
            return 0.050, {"projections": []}

        def null(keys, null_ran=null_ran, read=read):
            session._batch_cpu = 0.03 if read else None
            return 0.030 if null_ran else None
        session._run_candidate_batch, session._candidate_null = batch, null
        session._check_batch = lambda keys, got, m, command="verify": None
        session._reference_batch = lambda model, keys, events=False, rewarm=False: \
            (0.060 if model == "eager" else 0.040, None, float("nan"))
        session._round(["eager"], m, [], flip=False)
        assert session.outcome.cpu_rounds == pairs


def _timed_rounds(finding_in_round: int | None, flag: str, in_warm_up: bool = False,
                  compiled: list[str] | None = None) -> int:
    """How many timing rounds a session runs (min 5, max 15, noisy figures that never converge) when the candidate's
    job reports `flag` with the reply of round `finding_in_round` (1-based), or during the warm-up. With `compiled`,
    torch.compile is due after the warm-up: each compile is recorded there, and the baselines measured after it."""
    from agent.engine.evaluate.config import EvalConfig

    session = object.__new__(Session)  # only the timing loop: no jobs behind it
    session.cfg, session.outcome, session._eager_checks = EvalConfig(min_rounds=5, max_rounds=15), Outcome(), False
    session.progress = lambda *args: None
    flagged = {"flag": flag, "detail": "as the job reported it"}

    def autorange(name, target, m, most):
        if in_warm_up:
            session.outcome.flags.append(flagged)
        return 10

    def one_round(models, m, probes, flip):
        m.eager.append(1.0)
        m.candidate.append((0.2, 5.0)[m.rounds % 2])  # never within the interval's width: rounds to the most
        if m.rounds + 1 == finding_in_round:
            session.outcome.flags.append(flagged)
    def compile_reference(m):
        compiled.append("compiled")
        return True
    session._autorange, session._round, session._compile = autorange, one_round, compile_reference
    m = Measured()
    models = session._measure(m, ["eager"], compile_after=compiled is not None)
    if compiled is not None:
        compiled.append(",".join(models))
    return m.rounds


def test_timing_stops_at_the_round_whose_reply_carried_a_rejecting_finding():
    """A rejecting finding (e.g. the op census's in timed calls) decides the verdict: more rounds would only spend the
    turn's time on a figure no verdict will carry. A finding that does not reject changes nothing."""
    assert _timed_rounds(None, "forbidden_torch_op") == 15
    assert _timed_rounds(2, "forbidden_torch_op") == 2
    assert _timed_rounds(None, "forbidden_torch_op", in_warm_up=True) == 0
    assert _timed_rounds(2, "noisy_timing") == 15


def test_torch_compile_waits_for_the_candidates_warm_up_and_is_skipped_when_that_decided_the_verdict():
    """Compiling the reference takes seconds on a GPU and tens of them on the CPU: a candidate whose first timed calls
    already reject it (the op census's finding in its warm-up batches) ends without that wait."""
    compiled: list[str] = []
    assert _timed_rounds(None, "forbidden_torch_op", in_warm_up=True, compiled=compiled) == 0
    assert compiled == ["eager"], "not compiled; eager alone was measured"
    compiled.clear()
    assert _timed_rounds(None, "forbidden_torch_op", compiled=compiled) == 15
    assert compiled == ["compiled", "eager,compile"], "an open verdict gets its second baseline"



@pytest.mark.slow
def test_on_the_cpu_a_rounds_first_batch_after_the_other_jobs_work_follows_untimed_calls_of_its_own(monkeypatch):
    """On the CPU the first batch after a switch ran on the caches the other job had filled: its harness about 15%
    slower, and which batch paid for it went with the round's order. Each round's batch that follows the other job's
    work now comes after untimed calls (fresh keys, never checked) in its own job. A real evaluation, every command
    the parent sends to either job recorded on its way."""
    from pathlib import Path

    from agent.engine.evaluate import EvalConfig, Evaluator
    from agent.engine.evaluate.channel import ParentEnd as End
    from agent.engine.evaluate.session import _REWARM_CALLS

    sent: list[tuple[int, dict]] = []
    send = End.send
    monkeypatch.setattr(End, "send", lambda self, command: (sent.append((id(self), command)), send(self, command))[1])
    # The untimed batches are the ones the session asks for and does not time (_ask_cand): told apart by that, not by
    # their size, which a timed batch on a slow box can share (calls per batch follow the call's time).
    from agent.engine.evaluate.session import Session

    asked: list[int] = []
    ask = Session._ask_cand
    monkeypatch.setattr(Session, "_ask_cand", lambda self, command, *a, **k: (asked.append(id(command)),
                                                                               ask(self, command, *a, **k))[1])
    corpus = Path(__file__).resolve().parents[3] / "corpus"
    with Evaluator(EvalConfig(device="cpu", compile_baseline=False, min_rounds=3, max_rounds=3)) as evaluator:
        verdict = evaluator.evaluate((corpus / "problems" / "elementwise_silu_bias.py").read_text(),
                                     (corpus / "candidates" / "legit_cpp_silu_bias.py").read_text())
    assert verdict.accepted and verdict.timing.rounds == 3, verdict.message
    candidate = next(end for end, command in sent if command.get("cmd") == "call")
    log = [("candidate" if end == candidate else "reference", command) for end, command in sent
           if command.get("cmd") != "ping"]
    untimed = [i for i, (_, command) in enumerate(log) if command.get("cmd") == "batch"
               and len(command["keys"]) == _REWARM_CALLS and (log[i][0] == "reference" or id(command) in asked)]
    # Every round ends with the reference's check of the candidate's calls, so the candidate's job is re-warmed in
    # all three (the reference's as often as the round's order hands it over, which the batch sizes decide).
    assert [log[i][0] for i in untimed].count("candidate") == 3 and "reference" in [log[i][0] for i in untimed]
    rounds = log[untimed[0]:]  # from the first round on: no timed batch straight after the other job's work
    assert not [i for i in range(1, len(rounds)) if rounds[i][1].get("cmd") == "batch"
                and len(rounds[i][1]["keys"]) > _REWARM_CALLS and rounds[i - 1][0] != rounds[i][0]]
    for i in untimed:
        job = log[i][0]
        assert log[i - 1][0] != job, "only after the other job's work"
        assert log[i + 1][0] == job and log[i + 1][1]["cmd"] == "batch" and len(log[i + 1][1]["keys"]) > _REWARM_CALLS, \
            "right before a timed batch of its own"


@pytest.mark.slow
def test_a_candidate_its_warm_up_rejects_ends_without_torch_compile_or_rounds():
    """The real path of the two tests above: a forward that runs its C++ kernel in the first calls and PyTorch after
    them is found by the op census in its warm-up batches; the evaluation ends there, torch.compile never compiled."""
    from pathlib import Path

    from agent.engine.evaluate import EvalConfig, Evaluator

    corpus = Path(__file__).resolve().parents[3] / "corpus"
    with Evaluator(EvalConfig(device="cpu", compile_baseline=True)) as evaluator:
        verdict = evaluator.evaluate((corpus / "problems" / "elementwise_silu_bias.py").read_text(),
                                     (corpus / "candidates" / "exploit_cpp_timed_only_fallback_count.py").read_text())
    assert verdict.status.value == "rejected" and "forbidden_torch_op" in verdict.flag_names(), verdict.message
    assert "session.commands.reference.compile" not in verdict.seconds, verdict.seconds
    assert verdict.timing is None or verdict.timing.compile_ms is None


@pytest.mark.parametrize("n, run", [(1, None), (5, None), (8, None), (20, None), (64, 8), (40, 3)])
def test_every_run_of_a_batchs_keys_holds_one_wide_key_at_a_place_that_changes_from_run_to_run(n, run):
    from agent.engine.evaluate.keyed import WIDE_EVERY, is_wide
    from agent.engine.evaluate.session import _keys

    length = max(1, min(WIDE_EVERY, n if run is None else run))
    places = set()
    for _ in range(150):
        keys = _keys(n, run)
        assert len(keys) == n == len(set(keys))
        whole = n - n % length
        for start in range(0, whole, length):
            flags = [is_wide(k) for k in keys[start:start + length]]
            assert flags.count(True) == 1, (n, run, flags)  # every whole run: exactly one, so every batch of a run or more
            places.add(flags.index(True))
        assert sum(is_wide(k) for k in keys[whole:]) <= 1
    assert len(places) == length  # a forward counting its calls cannot know which of a run's is the wide one


SLOW_WARM_UP = '''
import time

import torch
import torch.nn as nn

CALLS = [0]


class ModelNew(nn.Module):
    def forward(self, x):
        CALLS[0] += 1
        if 6 <= CALLS[0] <= 12:  # the first warm-up calls, which size its timed batches
            time.sleep(0.05)
        return torch.relu(x)
'''


@pytest.mark.slow
def test_a_candidate_is_timed_in_batches_of_whole_runs_of_keys_however_slow_its_warm_up(quick_cpu_evaluator):
    """Each run of keys holds one wide call, and runs were as long as the candidate's batch where that was shorter: a
    candidate that slowed the warm-up calls that size its batches was timed in batches of one call, every one of them
    wide (the baselines' too), on a kernel fast only on large inputs (the third red team's w1, 2.5-3.3x its figure on
    the problem's own inputs)."""
    from agent.engine.evaluate.keyed import WIDE_EVERY
    from tests.agent.engine.evaluate.relu_case import relu_problem

    verdict = quick_cpu_evaluator.evaluate(relu_problem(64, 64), SLOW_WARM_UP)
    assert verdict.timing is not None, verdict.message
    assert verdict.timing.calls_per_batch["candidate"] >= WIDE_EVERY, verdict.timing.calls_per_batch


class _SilentZygote:
    """A JobControl whose stops are never acknowledged (the zygote's walk of the job outran the stop's deadline)."""

    stopped = False
    escaped = False

    def stop(self) -> bool:
        return False


@pytest.mark.parametrize("job_alive, flagged", [(True, True), (False, False)])
def test_a_stop_the_zygote_never_acknowledged_is_not_taken_for_a_stop(job_alive, flagged):
    """Its CPU reading is stale and the job may run beside the baselines: work_after_return, which rejects. A job that
    has ended answers no stop either, and is a failure of its own, not this."""
    from types import SimpleNamespace

    session = SimpleNamespace(control=_SilentZygote(), cand=SimpleNamespace(alive=lambda: job_alive), outcome=Outcome())
    Session._stop_candidate(session)
    assert [f["flag"] for f in session.outcome.flags] == (["work_after_return"] if flagged else [])


LATE_EXTENSION = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CALLS = [0]


class ModelNew(nn.Module):
    def forward(self, x):
        CALLS[0] += 1
        if CALLS[0] == 40:  # well past the checked calls: in the warm-up or the rounds
            load_inline(name="late_relu", cpp_sources="int late() { return 1; }", functions=["late"])
        return torch.relu(x)
'''


@pytest.mark.slow
def test_an_extension_asked_for_after_the_checked_calls_is_the_candidates_failure_not_a_new_start(quick_cpu_evaluator):
    """Every input shape a candidate is timed on was among its checked calls, so a build it asks for later is no lazy
    build. Built and started again, the evaluation dropped the batches not yet checked and let the job keep whichever
    session's times it liked (the third red team's w2: garbage in a round's batch, then a new extension at its null
    batch; accepted)."""
    from tests.agent.engine.evaluate.relu_case import relu_problem

    verdict = quick_cpu_evaluator.evaluate(relu_problem(64, 64), LATE_EXTENSION)
    assert verdict.status.value == "runtime_error", verdict.message
    assert "after its checked calls" in verdict.message


# A candidate that, once (at its import, at the first checked call or at the first timed call), writes 8 MiB into the
# files the parent lent its job, far past anything the protocol put there, through a shared mapping it unmaps after:
# stores its file-size rlimit does not stop, in pages that leave its resident memory (the red team's h3).
_HOARDER = '''
import gc
import mmap
import os

import torch
import torch.nn as nn


def _job_state():
    return next(o for o in gc.get_objects() if type(o).__name__ == "_State" and hasattr(o, "outputs_fd"))


def _hoard(fd):
    window = mmap.mmap(fd, 8 << 20, flags=mmap.MAP_SHARED, offset=1 << 30)
    for offset in range(0, 8 << 20, mmap.PAGESIZE):
        window[offset] = 1
    window.close()


if WHEN == "import":  # before any _State exists: every memfd the job holds
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}").startswith("/memfd:kstudio"):
                _hoard(int(name))
        except OSError:
            pass


class ModelNew(nn.Module):
    hoarded = WHEN == "import"

    def forward(self, x):
        if not ModelNew.hoarded:
            state = _job_state()
            if WHEN == "checked" or state.bases:  # the bases come with the timing's first command
                ModelNew.hoarded = True
                _hoard(getattr(state, WHICH + "_fd"))
        return torch.relu(x)
'''


@pytest.mark.slow
@pytest.mark.parametrize("which, when, stage", [("exchange", "import", "load"), ("outputs", "checked", "correctness"),
                                                ("exchange", "checked", "correctness"), ("outputs", "timed", "timing")])
def test_a_job_that_writes_the_lent_files_beyond_what_the_protocol_put_there_is_stopped(which, when, stage, tmp_path):
    """Pages a job writes into the outputs or the exchange file through a mapping count in no process's resident
    memory: the parent holds each file to what the protocol wrote there (the candidate's outputs as the reference reads
    them; the reference's tensors) after every reply of the candidate's job and every stop of it."""
    from agent.engine.evaluate import Evaluator
    from tests.agent.engine.evaluate.relu_case import CANDIDATE, CONFIG, relu_problem

    hoarder = f"WHICH, WHEN = {which!r}, {when!r}\n" + _HOARDER
    with Evaluator(CONFIG, cache_root=tmp_path / "cache") as evaluator:
        verdict = evaluator.evaluate(relu_problem(64, 64), hoarder)
        assert verdict.status.value == "runtime_error", (verdict.status, verdict.message)
        assert verdict.stage.value == stage and f"the {which} file" in verdict.message, verdict.message
        honest = evaluator.evaluate(relu_problem(64, 64), CANDIDATE)
        assert honest.accepted, honest.message


# A candidate whose forward names its process and stalls: the test ends its sandbox's zygote meanwhile, as whatever a
# candidate's job could do to its own sandbox would (tests/agent/engine/sandbox/test_sandbox.py has what it cannot).
_STALLS = '''
import time

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        with open("/proc/self/comm", "w") as comm:
            comm.write("ks-stalled-call")
        time.sleep(60)
        return torch.relu(x)
'''
# The red team's h2: its forward signals pid 1 (the zygote, under bubblewrap) and its first process's parent with every
# signal there is, SIGINT among them (which ended the zygote), then answers right.
_SIGNALS_ITS_ZYGOTE = '''
import os

import torch
import torch.nn as nn


def _parent_of(pid):
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[1])


class ModelNew(nn.Module):
    def forward(self, x):
        first = os.getppid()
        for pid in {1, *([_parent_of(first)] if first > 0 else [])} - {os.getpid(), first, 0}:
            for number in [*range(1, 9), *range(10, 65), 9]:
                try:
                    os.kill(pid, number)
                except OSError:
                    pass
        return torch.relu(x)
'''


def _zygote(sandbox):
    """The sandbox's zygote on the host (bubblewrap's child under it), or None while none runs."""
    import psutil

    if sandbox._proc is None or sandbox._proc.poll() is not None:
        return None
    top = psutil.Process(sandbox._proc.pid)
    return next((p for p in [top, *top.children(recursive=True)]
                 if p.name() != "bwrap" and "agent.engine.sandbox.zygote" in p.cmdline()), None)


def _job_threads() -> list[str]:
    import threading

    return [t.name for t in threading.enumerate() if t.name.startswith("kstudio-job")]


def _kill_zygote_once(sandbox, name: str) -> list[int]:
    """Kills `sandbox`'s zygote (SIGKILL, from the host) once a process of its named `name` runs, from a thread; the
    list gets the zygote's pid then."""
    import threading
    import time

    killed: list[int] = []

    def watch() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not killed:
            try:
                zygote = _zygote(sandbox)
                if zygote is not None and any(p.name() == name for p in zygote.children(recursive=True)):
                    zygote.kill()
                    killed.append(zygote.pid)
            except Exception:  # noqa: BLE001 - a process that went meanwhile: look again
                pass
            time.sleep(0.05)

    threading.Thread(target=watch, daemon=True).start()
    return killed


def test_a_candidate_whose_sandbox_dies_during_its_job_gets_a_runtime_error_blaming_it(quick_cpu_evaluator):
    """Nothing runs in the candidate's sandbox but its job and our supervisor: the sandbox dying under the job is the
    candidate's runtime error (-1 as a reward), never an exception out of evaluate() (no score: a candidate that could
    turn its failure into one escaped its penalty). The evaluation's threads end with it (one left waiting held the CLI
    at its exit), and the next evaluation gets a new sandbox."""
    import dataclasses

    from agent.engine.verdict import Status
    from tests.agent.engine.evaluate.relu_case import CANDIDATE, relu_problem

    evaluator = quick_cpu_evaluator
    cfg = dataclasses.replace(evaluator.config, timing=False)
    killed = _kill_zygote_once(evaluator.sandbox, "ks-stalled-call")
    verdict = evaluator.evaluate(relu_problem(64, 64), _STALLS, cfg)
    assert killed, "the candidate's call never stalled"
    assert verdict.status is Status.RUNTIME_ERROR, (verdict.status, verdict.message)
    assert "the candidate's sandbox died during its job" in verdict.message, verdict.message
    assert not _job_threads()
    assert evaluator.evaluate(relu_problem(64, 64), CANDIDATE, cfg).status is Status.ACCEPTED


def test_a_candidate_whose_import_kills_its_sandbox_while_it_is_built_gets_a_build_error(quick_cpu_evaluator):
    """The build's discovery job imports the candidate in the candidate's sandbox: that sandbox dying there is the
    candidate's failed build, never an exception out of evaluate()."""
    import dataclasses

    from agent.engine.verdict import Status
    from tests.agent.engine.evaluate.relu_case import relu_problem

    evaluator = quick_cpu_evaluator
    stalls_on_import = _STALLS.replace("class ModelNew", "with open('/proc/self/comm', 'w') as comm:\n    "
                                       "comm.write('ks-stalled-load')\ntime.sleep(60)\n\n\nclass ModelNew")
    killed = _kill_zygote_once(evaluator.sandbox, "ks-stalled-load")
    verdict = evaluator.evaluate(relu_problem(64, 64), stalls_on_import, dataclasses.replace(evaluator.config, timing=False))
    assert killed, "the candidate's import never stalled"
    assert verdict.status is Status.BUILD_ERROR, (verdict.status, verdict.message)
    assert "the candidate's sandbox died while its import was run" in verdict.message, verdict.message


def test_a_candidate_that_signals_its_zygote_gets_its_own_verdict(quick_cpu_evaluator):
    """The red team's h2 (os.kill(1, SIGINT) from its forward ended the zygote and the evaluation with an exception):
    every signal at its zygote changes nothing, and its verdict is the one its outputs earn."""
    import dataclasses

    from agent.engine.verdict import Status
    from tests.agent.engine.evaluate.relu_case import relu_problem

    evaluator = quick_cpu_evaluator
    evaluator.sandbox.start()  # anew where an earlier test's candidate ended it
    zygote = _zygote(evaluator.sandbox)
    assert zygote is not None
    verdict = evaluator.evaluate(relu_problem(64, 64), _SIGNALS_ITS_ZYGOTE, dataclasses.replace(evaluator.config, timing=False))
    assert verdict.status is Status.ACCEPTED, (verdict.status, verdict.message)
    assert _zygote(evaluator.sandbox) == zygote, "the candidate's sandbox was started anew"
    assert not _job_threads()


def test_a_field_missing_from_the_candidates_reply_is_its_runtime_error_not_the_engines_key_error():
    # A construct reply without "weights" (its harness patched at import) ended the evaluation with an uncaught KeyError
    # and no verdict (the eighth red team).
    from agent.engine.evaluate.session import _CandidateFailed, _CandidateReply

    session = object.__new__(Session)
    session.outcome = Outcome()
    reply = _CandidateReply({"ok": True}, session._fail)
    assert reply["ok"] is True and reply.get("weights") is None
    with pytest.raises(_CandidateFailed):
        reply["weights"]
    assert session.outcome.failure == ("runtime_error", "the candidate's job answered without 'weights' (its harness "
                                                        "was changed?)")


@pytest.mark.slow
def test_a_session_started_again_draws_a_fresh_seed(quick_cpu_evaluator, monkeypatch):
    """An extension built in __init__ is asked of the parent, and the evaluation starts again with it installed. The
    build cache every job can read keeps the request's text, so a job could carry what it saw in its first session (the
    checked inputs, written into a request) into the next: with the same seed they were the next session's inputs too
    (the eighth red team's G8). Each start now draws its own."""
    import agent.engine.evaluate.evaluator as evaluator_module

    seeds: list[int] = []
    real_session = evaluator_module.Session

    def recording(*args, **kwargs):
        seeds.append(args[4]["plan"]["seed"])  # the reference's payload: the only job that gets the seed
        return real_session(*args, **kwargs)

    monkeypatch.setattr(evaluator_module, "Session", recording)
    corpus = Path(__file__).resolve().parents[3] / "corpus"
    verdict = quick_cpu_evaluator.evaluate((corpus / "problems" / "softmax_rows.py").read_text(),
                                           (corpus / "candidates" / "legit_cpp_lazy_build_softmax.py").read_text())
    assert verdict.status.value == "accepted", verdict.message
    assert len(seeds) == 2 and seeds[0] != seeds[1]
