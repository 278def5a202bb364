"""The user simulator's system prompt: its scenario and behaviour directives rendered into a
template of :mod:`mimesis.prompts`."""

from __future__ import annotations

from mimesis.behaviors.catalog import BY_ID, TRAITS
from mimesis.prompts import load_prompt
from mimesis.schemas import Scenario


def directives(scenario: Scenario) -> str:
    """Behaviour and trait directives for ``scenario``, one per line (empty when none)."""
    lines = [BY_ID[b].directive for b in scenario.behaviors if b in BY_ID]
    lines += [TRAITS[t] for t in scenario.traits if t in TRAITS]
    return "\n".join(lines)


def render_system_prompt(scenario: Scenario, template: str = "user_simulator") -> str:
    """System prompt of the user simulator for ``scenario``."""
    text = load_prompt(template).format(goal=scenario.goal.strip(), directives=directives(scenario))
    return "\n".join(line for line in text.splitlines() if line.strip())
