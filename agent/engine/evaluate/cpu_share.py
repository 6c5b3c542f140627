"""On the CPU, how many cores the candidate's batches used, against the threads the evaluation allows.

Eager and torch.compile run with `EvalConfig.threads` threads, and so does the candidate's job by default; a candidate
that starts more (OpenMP's `num_threads(...)`, `std::thread`, a helper process) would be timed against a baseline held
to fewer cores and reported as that much faster. The zygote that supervises the job reads the job's CPU time (every
process, every thread, zombies and reaped children included) each time it freezes the job (sandbox/zygote.py
`job_cpu_seconds`); the parent adds up, over every batch of the candidate's, that figure's growth from the stop
before the batch to the stop after it, against the batch's own time on the parent's clock (session.py). Neither number
passes through the candidate's process, and time the candidate idles around its batches thins out nothing.
"""
from __future__ import annotations

# A job on its allowed threads reads at most about 1.0 core per thread (the legitimate CPU candidates of tests/corpus
# read 1.00-1.02 at production timing): our harness's work around each batch (the wake-up ping, the stop) is in the
# CPU reading but not in the batch's time, and exited threads and reaped children count in /proc's 10 ms ticks. A
# second thread that does half of the work reads about 1.5.
SLACK = 1.1
TICK_SECONDS = 0.05  # five ticks: the reading's error over a few batches


def over_threads(cpu_seconds: float, wall_seconds: float, threads: int) -> str | None:
    """Why the candidate's batches used more cores than `threads`, or None where they did not (or nothing was read)."""
    if wall_seconds <= 0 or cpu_seconds <= threads * wall_seconds * SLACK + TICK_SECONDS:
        return None
    return (f"the candidate's processes used {cpu_seconds:.2f} s of CPU time in {wall_seconds:.2f} s of its batches "
            f"({cpu_seconds / wall_seconds:.2f} cores) where the evaluation allows {threads} thread(s), as eager had: "
            f"the comparison would not be on equal terms. Use at most {threads} thread(s) (no num_threads(...) or "
            "omp_set_num_threads above it, no std::thread or helper processes doing the work)")
