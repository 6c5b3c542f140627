"""Policies: the agent's brain behind one seam (DESIGN §7). See base.py."""
from agent.loop.policies.base import Policy, PolicyError, PolicyTurn, ToolCall

__all__ = ["Policy", "PolicyError", "PolicyTurn", "ToolCall"]
