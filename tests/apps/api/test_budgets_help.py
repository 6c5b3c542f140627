"""The agent form and the API describe budgets in agent.loop.Budgets' own words (agent/described.py)."""
from __future__ import annotations

from agent.described import help_of
from agent.loop import Budgets
from apps.api.serializers import BudgetsSerializer
from apps.problems.forms import AgentRunForm


def test_the_agent_form_and_the_api_show_the_budgets_own_help() -> None:
    assert AgentRunForm.base_fields["turns"].help_text == help_of(Budgets, "max_turns")
    assert BudgetsSerializer().fields["tokens"].help_text.startswith(help_of(Budgets, "max_tokens"))
