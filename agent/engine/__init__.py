"""The engine: everything that turns a candidate into a verdict no candidate can forge (DESIGN §3-§5).

validation   the static checks on problems and candidates (AST only: the trusted process never imports user code)
build/       compiling candidates' extensions in jobs of their own, into the verified, content-addressed cache
sandbox/     the warm zygote and its walled, limited children: the only place user code runs
evaluate/    the evaluation: the reference's and the candidate's jobs, checks, timing and the judge
verdict      the verdict and its findings, the reward's source and the library's truth
profiling, roofline, diagnostics, hardware, backends   what a verdict is read with

The studio and the agent use the names below; they are imported on first use (agent/lazy.py), so naming a verdict
never loads torch. (A name that is also a submodule's, like `diagnostics`, is imported from its module.)
"""
from agent.lazy import public_face

__getattr__, __dir__ = public_face(__name__, {
    "agent.engine.evaluate": "EvalConfig Evaluator ProblemError ProblemTooBig",
    "agent.engine.sandbox": "Job JobResult Limits Sandbox SandboxError",
    "agent.engine.verdict": "BuildInfo Finding Flag Spread Stage Status Timing TrialResult Verdict device_seconds",
    "agent.engine.validation": "Issue ProblemNames validate_candidate validate_problem",
    "agent.engine.backends": "BACKENDS LABELS",
    "agent.engine.roofline": "Placement Roof hardware_name place speed_of_light_note",
    "agent.engine.hardware": "host_facts",
})
