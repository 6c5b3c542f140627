"""The agent: a policy's turns through the tools, with budgets, rewards and a resumable state (DESIGN §6-§7).

runner       the loop: start, think, act, step, run until submitted or out of budget
tools        what the model can call (write_candidate, benchmark, profile, read_skill, search_knowledge, submit)
state        the run's resumable JSON state and the reward of one evaluation (light: no engine import)
trajectory   a finished run as a training record
policies/    the brains behind one seam: OpenAI-compatible servers, local transformers, scripted
prompts/, skills/   what the model is told and can read

Names below are imported on first use (agent/lazy.py): the studio reads states without importing the engine.
"""
from agent.lazy import public_face

__getattr__, __dir__ = public_face(__name__, {
    "agent.loop.runner": "DEVICES run start step",
    "agent.loop.state": "AgentState Budgets TurnRecord reward",
    "agent.loop.tools": "TOOL_NAMES Toolbox ToolOutcome tool_schemas verdict_summary",
    "agent.loop.trajectory": "final_reward to_record",
    "agent.loop.prompts": "DEFAULT_INSTRUCTION system_prompt",
    "agent.loop.policies": "Policy PolicyError PolicyTurn ToolCall",
    "agent.loop.policies.factory": "PolicySpec make_policy",
})
