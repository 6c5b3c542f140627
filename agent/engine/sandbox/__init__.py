"""Sandboxed execution of untrusted code: a warm zygote forking isolated, limited children."""
from agent.engine.sandbox.client import Job, JobResult, Sandbox, SandboxError
from agent.engine.sandbox.limits import Limits

__all__ = ["Job", "JobResult", "Limits", "Sandbox", "SandboxError"]
