"""More cores than the evaluation allows (agent/engine/evaluate/cpu_share.py): the rule on the zygote's CPU time and
the parent's clock, and the whole path from a real OpenMP candidate to the verdict."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.engine.evaluate import EvalConfig, Evaluator
from agent.engine.evaluate.cpu_share import (CALLS_TICK_SECONDS, SLACK, TICK_SECONDS, call_cores, call_over_threads,
                                             over_threads)
from agent.engine.sandbox import Limits

CORPUS = Path(__file__).resolve().parents[3] / "corpus"


def test_a_job_on_its_one_thread_passes_and_one_on_two_cores_does_not():
    assert over_threads(0.96, 1.0, threads=1) is None  # what the legitimate CPU candidates read: 0.92-1.02
    assert over_threads(1.02, 1.0, threads=1) is None
    why = over_threads(1.7, 1.0, threads=1)
    assert why is not None and "1.70 cores" in why and "allows 1 thread(s)" in why


def test_the_allowance_scales_with_the_threads_eager_had():
    assert over_threads(3.9, 2.0, threads=2) is None
    assert over_threads(5.0, 2.0, threads=2) is not None


def test_a_few_ticks_of_reading_error_on_short_timings_are_not_taken_for_extra_cores():
    # /proc counts in 10 ms ticks per process: 0.12 s read over 0.1 s of batches is within the reading's error.
    assert over_threads(0.12, 0.1, threads=1) is None
    assert over_threads(0.3, 0.1, threads=1) is not None


def test_nothing_read_is_nothing_found():
    assert over_threads(0.0, 0.0, threads=1) is None
    assert call_over_threads([], threads=1) is None


# Fifteen rounds of a batch whose harness (keyed inputs, projections) takes 80 ms around 20 ms of calls on one thread:
# each round's candidate batch and its own null batch, as ((CPU s, wall s), (CPU s, wall s)).
HONEST = [((0.100, 0.100), (0.080, 0.080))] * 15
# The same calls on two cores: 10 ms of wall, 20 ms of CPU. The whole batches read 1.11 cores, inside the
# allowance; the calls alone read 2.
TWO_CORES_UNDER_A_LONG_HARNESS = [((0.100, 0.090), (0.080, 0.080))] * 15


def test_extra_cores_thinned_out_by_a_long_harness_are_seen_in_the_calls_alone():
    cpu, wall = sum(c for (c, _), _n in TWO_CORES_UNDER_A_LONG_HARNESS), sum(w for (_, w), _n in TWO_CORES_UNDER_A_LONG_HARNESS)
    assert over_threads(cpu, wall, threads=1) is None  # the whole-batch rule alone let this through
    why = call_over_threads(TWO_CORES_UNDER_A_LONG_HARNESS, threads=1)
    assert why is not None and "2.00 cores" in why and "calls alone" in why
    assert call_over_threads(HONEST, threads=1) is None
    assert call_cores(HONEST, threads=1) == pytest.approx((0.3, 0.3))


def test_cpu_burnt_in_the_null_batches_takes_no_more_off_than_the_allowed_threads():
    # The null batches on three cores, to enlarge what comes off the candidate's batches: credited at one core.
    burning = [((0.100, 0.090), (0.240, 0.080))] * 15
    assert call_cores(burning, threads=1) == pytest.approx((0.3, 0.15))
    assert call_over_threads(burning, threads=1) is not None


def test_null_batches_the_box_preempted_more_than_their_candidate_batches_do_not_make_an_honest_job_read_many_cores():
    # Load that fell on the null batches only: 80 ms of harness CPU took 95 ms of wall there. Taking the nulls' wall
    # time off left 5 ms of calls to divide 20 ms of CPU by (4 cores); their CPU time, the least wall time the harness
    # can have taken, leaves the calls' 20 ms.
    preempted = [((0.100, 0.100), (0.080, 0.095))] * 15
    assert call_cores(preempted, threads=1) == pytest.approx((0.3, 0.3))
    assert call_over_threads(preempted, threads=1) is None
    slowed = [((0.100, 0.100), (0.080, 0.300))] * 15  # or slept in by the job: its null's CPU is what comes off
    assert call_cores(slowed, threads=1) == pytest.approx((0.3, 0.3))


def test_null_batches_burning_more_cpu_than_their_candidate_batches_are_credited_nothing():
    # More CPU than the batch holding the same harness plus the calls: not the harness's. The figure is the whole
    # batches' (here 1.11 cores: the whole-batch rule's reading), never less.
    burning = [((0.100, 0.090), (0.120, 0.150))] * 15
    assert call_cores(burning, threads=1) == pytest.approx((1.5, 1.35))


def test_null_batches_burnt_to_leave_the_calls_no_wall_time_are_credited_nothing():
    # Two threads: 0.2 s of CPU in 0.1 s of batch. Null batches burnt to 0.19 s over 0.2 s, under the batches' CPU: the
    # harness would then have taken 0.19 s of a 0.1 s batch, and the calls' wall time came out negative, which the rule
    # read as nothing read (the fourth red team's x3, accepted at 1.76x). Credited nothing, they read 2 cores.
    burnt = [((0.200, 0.100), (0.190, 0.200))] * 15
    assert call_cores(burnt, threads=1) == pytest.approx((3.0, 1.5))
    why = call_over_threads(burnt, threads=1)
    assert why is not None and "2.00 cores" in why


def test_null_batches_cut_short_leave_the_harness_in_the_calls_figure():
    # A job that skips the harness's work in its null batches takes less off: the calls' figure is the whole batch's,
    # so it gains nothing over the whole-batch rule; on one honest thread it still reads one core.
    skipping = [((0.100, 0.100), (0.001, 0.001))] * 15
    cpu, wall = call_cores(skipping, threads=1)
    assert cpu / wall == pytest.approx(1.0) and call_over_threads(skipping, threads=1) is None


def _the_rule_passes(timing, calls_alone: bool) -> bool:
    """Whether a let-through exploit's reading is one the rule passes (its second core was busy), not a broken rule:
    SLACK cores per thread plus the reading's error in seconds over the wall time read. The verdict keeps the cores,
    not the seconds, so the wall time is taken as half the timed calls' (rounds x calls x median call): less than the
    batches' and the calls' own, so the bound is at least as loose as the rule's. Loose, but it still fails a rule
    that read nothing or let through two cores; the rule's own bounds are the pure tests above."""
    cores = timing.cpu_cores_calls if calls_alone else timing.cpu_cores
    least_wall = 0.5 * timing.rounds * timing.calls_per_batch["candidate"] * timing.candidate_ms / 1000
    error = CALLS_TICK_SECONDS if calls_alone else TICK_SECONDS
    return cores is not None and least_wall > 0 and cores <= SLACK + error / least_wall


@pytest.mark.slow
def test_a_kernel_on_more_openmp_threads_than_allowed_is_rejected_and_a_one_thread_one_is_not(tmp_path):
    """tests/corpus's silu + bias kernel, once as written (OpenMP on the evaluation's one thread) and once with
    num_threads(all cores). Under make test another worker may hold the second core: the exploit then gets no extra
    core to use (and no figure it did not earn), which its own reading shows, and the test says so instead of passing."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one core: there is no extra core to use, nor to see used")
    problem = (CORPUS / "problems" / "elementwise_silu_bias.py").read_text()
    legit = (CORPUS / "candidates" / "legit_cpp_silu_bias.py").read_text()
    pragma = "#pragma omp parallel for schedule(static)\n"
    assert pragma in legit
    # num_threads(...) overrides OMP_NUM_THREADS=1, which the candidate's job is started with.
    greedy_source = (legit.replace(pragma, "#pragma omp parallel for schedule(static) num_threads(omp_get_num_procs())\n")
                     .replace("#include <cstring>\n", "#include <cstring>\n#include <omp.h>\n")
                     .replace("ks_legit_cpp_silu_bias", "ks_exploit_cpp_all_cores"))
    config = EvalConfig(device="cpu", compile_baseline=False, min_rounds=3, max_rounds=5, limits=Limits(wall_seconds=60))
    with Evaluator(config, cache_root=tmp_path) as evaluator:
        honest = evaluator.evaluate(problem, legit)
        greedy = evaluator.evaluate(problem, greedy_source)
    assert honest.status.value == "accepted", honest.message
    assert "cpu_over_threads" not in honest.flag_names() and honest.timing.cpu_cores <= SLACK, honest.timing
    # The calls alone (each batch less its own null batch) were read too. Where the box starved the job (the other
    # worker of make test and whatever else runs beside it: a one-thread job whose whole batches read a third of a
    # core, its calls a fifth), both readings fall together, and only a reading of nothing would be broken.
    calls = honest.timing.cpu_cores_calls
    assert calls is not None and calls > 0, honest.timing
    assert honest.timing.cpu_cores < 0.8 or calls > 0.3, honest.timing
    assert greedy.correct and greedy.timing is not None, greedy.message
    # A reading of a job that ran its batches is about a core or more; none at all would be a broken reading.
    assert greedy.timing.cpu_cores > 0.3, greedy.timing
    if greedy.status.value == "accepted":
        assert _the_rule_passes(greedy.timing, calls_alone=False), greedy.timing  # CI read 1.105 cores here once
        pytest.skip(f"the second core was busy: the exploit ran on {greedy.timing.cpu_cores:.2f} cores, nothing to catch")
    assert greedy.status.value == "rejected" and "cpu_over_threads" in greedy.flag_names(), greedy.message


# A kept C++ worker thread, woken per call through a condition variable, computes the second half of the rows while
# the calling thread does the first: two cores where eager had one, used only inside the calls.
KEPT_WORKER = r"""
#include <condition_variable>
#include <mutex>
#include <thread>
namespace {
struct Rows { const float* xp; const float* bp; float* yp; int64_t lo, hi, cols; };
void silu_rows(const Rows& r) {
    for (int64_t i = r.lo; i < r.hi; ++i)
        for (int64_t c = 0; c < r.cols; ++c) {
            const float v = r.xp[i * r.cols + c], e = exp_nonpositive(-std::fabs(v)), inv = 1.0f / (1.0f + e);
            r.yp[i * r.cols + c] = v * (v >= 0.0f ? inv : e * inv) + r.bp[c];
        }
}
std::mutex mu;
std::condition_variable cv;
Rows job;
bool pending = false, done = false, started = false;
void serve() {
    for (;;) {
        std::unique_lock<std::mutex> lk(mu);
        cv.wait(lk, [] { return pending; });
        pending = false;
        const Rows r = job;
        lk.unlock();
        silu_rows(r);
        lk.lock();
        done = true;
        cv.notify_all();
    }
}
}  // namespace
"""
KEPT_WORKER_CALL = """    if (!started) { std::thread(serve).detach(); started = true; }
    { std::lock_guard<std::mutex> lk(mu); job = Rows{xp, bp, yp, rows / 2, rows, cols}; pending = true; done = false; }
    cv.notify_all();
    silu_rows(Rows{xp, bp, yp, 0, rows / 2, cols});
    { std::unique_lock<std::mutex> lk(mu); cv.wait(lk, [] { return done; }); }
"""


@pytest.mark.slow
def test_a_kept_worker_thread_woken_inside_each_call_is_rejected_by_the_calls_alone(tmp_path):
    """Its whole batches read about 1.1 cores on the dev box, inside that reading's allowance (accepted by it alone);
    the calls alone read 1.3 or more. As above, where another test worker holds the second core the exploit has no
    extra core to use, its reading says so, and the test skips instead of passing."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one core: there is no extra core to use, nor to see used")
    problem = (CORPUS / "problems" / "elementwise_silu_bias.py").read_text()
    legit = (CORPUS / "candidates" / "legit_cpp_silu_bias.py").read_text()
    loop = legit[legit.index("#pragma omp parallel for schedule(static)"):legit.index("    return y;")]
    exploit = (legit.replace(loop, KEPT_WORKER_CALL).replace("torch::Tensor silu_bias(", KEPT_WORKER + "\ntorch::Tensor silu_bias(")
               .replace("ks_legit_cpp_silu_bias", "ks_exploit_cpp_kept_worker"))
    config = EvalConfig(device="cpu", compile_baseline=False, min_rounds=5, max_rounds=5, limits=Limits(wall_seconds=60))
    with Evaluator(config, cache_root=tmp_path) as evaluator:
        verdict = evaluator.evaluate(problem, exploit)
    assert verdict.correct and verdict.timing is not None and verdict.timing.cpu_cores_calls is not None, verdict.message
    if verdict.status.value == "accepted":
        assert _the_rule_passes(verdict.timing, calls_alone=True), verdict.timing
        pytest.skip(f"the second core was busy: the worker ran on {verdict.timing.cpu_cores_calls:.2f} cores in the calls")
    assert verdict.status.value == "rejected" and "cpu_over_threads" in verdict.flag_names(), verdict.message


def _two_core_exploit(name: str, prelude: str, call: str, python: str = "") -> str:
    """legit_cpp_silu_bias with its loop replaced by `call` (which may use silu_rows, Rows and `prelude`), plus
    `python` after the module."""
    legit = (CORPUS / "candidates" / "legit_cpp_silu_bias.py").read_text()
    loop = legit[legit.index("#pragma omp parallel for schedule(static)"):legit.index("    return y;")]
    rows = KEPT_WORKER[KEPT_WORKER.index("struct Rows"):KEPT_WORKER.index("std::mutex mu;")]
    return (legit.replace(loop, call).replace("torch::Tensor silu_bias(", prelude + "\nnamespace {\n" + rows
                                              + "}  // namespace\ntorch::Tensor silu_bias(")
            .replace("ks_legit_cpp_silu_bias", f"ks_exploit_cpp_{name}") + python)


# The second half of the rows in a helper process sharing the memory (clone, CLONE_VM), its parent ignoring SIGCHLD
# so that the kernel reaps it: its CPU time reached no process's figures in /proc (red team, session 38).
AUTOREAPED_PRELUDE = """#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <cerrno>
#include <cstdlib>
"""
AUTOREAPED_CALL = """    static char* stack = static_cast<char*>(std::malloc(1 << 20));
    Rows other{xp, bp, yp, rows / 2, rows, cols};
    struct sigaction ignore{}, old{};
    ignore.sa_handler = SIG_IGN;
    sigaction(SIGCHLD, &ignore, &old);
    const int pid = clone([](void* r) { silu_rows(*static_cast<Rows*>(r)); return 0; }, stack + (1 << 20),
                          CLONE_VM | CLONE_FS | CLONE_FILES | SIGCHLD, &other);
    silu_rows(Rows{xp, bp, yp, 0, pid < 0 ? rows : rows / 2, cols});
    int status = 0;
    while (pid >= 0 && (waitpid(pid, &status, __WALL) >= 0 || errno == EINTR)) {}
    sigaction(SIGCHLD, &old, nullptr);
"""
# Two threads in every call, and the job's own null batches rewritten from inside its process: each idles 0.3 s (the
# whole-batch reading counted those seconds of no CPU) and answers without saying it was a null batch (no calls-alone
# reading was made at all). Red team, session 38.
THREAD_CALL = """    Rows other{xp, bp, yp, rows / 2, rows, cols};
    std::thread helper([&] { silu_rows(other); });
    silu_rows(Rows{xp, bp, yp, 0, rows / 2, cols});
    helper.join();
"""
IDLE_NULLS = '''

def _idle_null_batches() -> None:
    # The job's state object, found through gc at the first call, given a handle of its own: since session 43 the
    # harness's classes and modules are held as they were before the import (a patch of _State.handle is a finding
    # of its own), but an instance made after it is data (docs/threat-model.md), and this test is of the CPU rule.
    import gc
    import sys
    import time
    job = sys.modules.get("agent.engine.evaluate.candidate_job")
    if job is None:
        return
    for state in gc.get_objects():
        if type(state) is job._State and "handle" not in vars(state):
            original = state.handle

            def handle(command, original=original):
                if command.get("cmd") == "batch" and command.get("null"):
                    reply = original(command)  # its signed counts as the parent wants them (session 43)
                    time.sleep(0.3)
                    reply.pop("null", None)
                    return reply
                return original(command)

            state.handle = handle


_unwrapped = ModelNew.forward


def _forward(self, *args):
    ModelNew.forward = _unwrapped  # once, at the first (checked) call: the state exists by then
    _idle_null_batches()
    return _unwrapped(self, *args)


ModelNew.forward = _forward
'''


@pytest.mark.slow
@pytest.mark.parametrize("name, prelude, call, python", [
    ("autoreaped_helper", AUTOREAPED_PRELUDE, AUTOREAPED_CALL, ""),
    ("idle_null_batches", "#include <thread>\n", THREAD_CALL, IDLE_NULLS),
])
def test_a_second_core_hidden_from_the_readings_is_rejected(tmp_path, name, prelude, call, python):
    """A helper process the kernel reaps (its time is in the sandbox's cgroup, not in /proc), and a job that idles
    through its own null batches and will not say they were: both read about 1.5 cores in their calls now. Accepted
    at 1.05x and 1.06x (noisy_timing) before, where their one-thread twin read 0.62x. As above, a busy second core
    leaves the exploit nothing to gain: its reading says so, and the test skips."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one core: there is no extra core to use, nor to see used")
    problem = (CORPUS / "problems" / "elementwise_silu_bias.py").read_text()
    exploit = _two_core_exploit(name, prelude, call, python)
    config = EvalConfig(device="cpu", compile_baseline=False, min_rounds=5, max_rounds=5, limits=Limits(wall_seconds=90))
    with Evaluator(config, cache_root=tmp_path) as evaluator:
        if name == "autoreaped_helper" and evaluator.sandbox.cgroup is None:
            pytest.skip("no cgroup could be made on this host: a helper the kernel reaps is out of /proc's reach")
        verdict = evaluator.evaluate(problem, exploit)
    assert verdict.correct and verdict.timing is not None, verdict.message
    assert verdict.timing.cpu_cores_calls is not None, verdict.timing  # a reading of the calls, whatever the nulls said
    if verdict.status.value == "accepted":
        assert _the_rule_passes(verdict.timing, calls_alone=False), verdict.timing
        assert _the_rule_passes(verdict.timing, calls_alone=True), verdict.timing
        pytest.skip(f"the second core was busy: the helper ran on {verdict.timing.cpu_cores_calls:.2f} cores in the calls")
    assert verdict.status.value == "rejected" and "cpu_over_threads" in verdict.flag_names(), verdict.message
