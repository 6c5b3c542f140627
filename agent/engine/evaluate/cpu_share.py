"""On the CPU, how many cores the candidate's batches used, against the threads the evaluation allows.

Eager and torch.compile run with `EvalConfig.threads` threads, and so does the candidate's job by default; a candidate
that starts more (OpenMP's `num_threads(...)`, `std::thread`, a helper process) would be timed against a baseline held
to fewer cores and reported as that much faster. The zygote that supervises the job reads the job's CPU time (its
sandbox's cgroup: every task that ever ran there, however it ended; sandbox/zygote.py `job_cpu_seconds`) each time it
freezes the job; the parent adds up, over every batch of the candidate's that made calls, that figure's growth from the
stop before the batch to the stop after it, against the batch's own time on the parent's clock (session.py). Neither
number passes through the candidate's process, and time the candidate idles around its batches, or in its null
batches, thins out nothing.

That reading weighs the harness with the calls: where the keyed inputs and projections take most of a batch, extra
cores that work only in the calls are thinned out by the single-threaded harness around them (a call made twice as
fast on two cores under a harness four times its length read 1.11 cores). So each round's candidate batch is also
read against the candidate's own null batch of the same keys, which runs that harness without the calls: the
difference is the calls alone (call_over_threads). The null's CPU time is credited up to the allowed threads over its
own time and no further, so a job that burns CPU in its null batches to enlarge what comes off gains nothing; one that
skips work there only takes less off, leaving the calls' figure where the whole-batch rule has it.
"""
from __future__ import annotations

# A job on its allowed threads reads at most about 1.0 core per thread (the legitimate CPU candidates of tests/corpus
# read 1.00-1.02 at production timing): our harness's work around each batch (the wake-up ping, the stop) is in the
# CPU reading but not in the batch's time, and exited threads and reaped children count in /proc's 10 ms ticks. A
# second thread that does half of the work reads about 1.5.
SLACK = 1.1
TICK_SECONDS = 0.05  # five ticks: the reading's error over a few batches
# The calls-alone reading's allowance. Both batches of a round pay the same stop, wake-up and harness, which cancel,
# and a job that starts no threads per call is read from each thread's schedstat (nanoseconds), not in ticks: the
# one-thread silu kernel read 0.99-1.02 cores this way at five rounds. Two ticks, where five let a kept worker woken
# per call for half the rows through (1.26 cores over 0.16 s of calls, 1.17x the one-thread kernel's speed).
CALLS_TICK_SECONDS = 0.02


def call_cores(rounds: list[tuple[tuple[float, float], tuple[float, float]]], threads: int) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of the calls alone over the rounds (session.Outcome.cpu_rounds): the candidate's
    batches less the harness, which is its own null batches' CPU time, credited up to `threads` cores over their time.

    The harness's wall time inside the candidate's batches is taken as that CPU over `threads`, the least it can have
    taken, not as the null batches' wall time: CPU time is what the same work costs under any load, while a null batch
    the box preempted more than its candidate batch would have left a sliver of wall time to divide by (an honest
    one-thread kernel read as several cores). So the calls' wall time is over-estimated if anything, and an honest
    job on its threads reads at most `threads` cores, loaded or not.

    A null batch's CPU time at or above its candidate batches' (the same harness plus the calls) is not the harness's:
    the job burnt CPU there to take more off. Nothing is credited then, and the figure is the whole batches'. Nor
    where the harness's least wall time (the credit over `threads`) would leave the calls none of the batches' time:
    burnt to just under the batches' CPU, the credit left the calls no wall time, a reading the rule passed, and two
    threads were accepted at 1.76x (the fourth red team's x3)."""
    batches_cpu, batches_wall = sum(c for (c, _), _null in rounds), sum(w for (_, w), _null in rounds)
    credit = min(sum(c for _calls, (c, _) in rounds), threads * sum(w for _calls, (_, w) in rounds))
    if credit >= batches_cpu or credit / threads >= batches_wall:
        credit = 0.0
    return batches_cpu - credit, batches_wall - credit / threads


def call_over_threads(rounds: list[tuple[tuple[float, float], tuple[float, float]]], threads: int) -> str | None:
    """Why the calls themselves used more cores than `threads` (the harness taken off), or None."""
    cpu, wall = call_cores(rounds, threads)
    if _within(cpu, wall, threads, CALLS_TICK_SECONDS):
        return None
    return (f"the candidate's calls alone (its batches less its own null batches, which run the same harness without "
            f"the calls) used {cpu:.2f} s of CPU time in {wall:.2f} s ({cpu / wall:.2f} cores) where the evaluation "
            f"allows {threads} thread(s), as eager had: the comparison would not be on equal terms. Use at most "
            f"{threads} thread(s) in the kernel (no num_threads(...) above it, no std::thread, thread pools or helper "
            "processes doing the work)")


def over_threads(cpu_seconds: float, wall_seconds: float, threads: int) -> str | None:
    """Why the candidate's batches used more cores than `threads`, or None where they did not (or nothing was read)."""
    if _within(cpu_seconds, wall_seconds, threads, TICK_SECONDS):
        return None
    return (f"the candidate's processes used {cpu_seconds:.2f} s of CPU time in {wall_seconds:.2f} s of its batches "
            f"({cpu_seconds / wall_seconds:.2f} cores) where the evaluation allows {threads} thread(s), as eager had: "
            f"the comparison would not be on equal terms. Use at most {threads} thread(s) (no num_threads(...) or "
            "omp_set_num_threads above it, no std::thread or helper processes doing the work)")


def _within(cpu_seconds: float, wall_seconds: float, threads: int, allowance: float) -> bool:
    """At most SLACK cores per thread over the wall time, plus `allowance` seconds of reading error (or nothing read)."""
    return wall_seconds <= 0 or cpu_seconds <= threads * wall_seconds * SLACK + allowance
