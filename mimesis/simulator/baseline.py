"""The prompted-user baseline: the same base model, instructed to play the user.

This is the assistant-LLM simulator the MIMESIS paper (arXiv 2610.09484) argues against: an
instruct model told, in its system prompt (``mimesis/prompts/prompted_user.md``), to act as a
human with the scenario's goal. It sees the same role-flipped history as the trained simulator
(:func:`~mimesis.simulator.runtime.build_view`) and runs behind the same
:class:`~mimesis.simulator.runtime.UserSimulator`, so parsing, guards and evaluation treat both
alike; only the system prompt differs.
"""

from __future__ import annotations

from mimesis.schemas import Messages, Scenario, Turn
from mimesis.simulator.guards import GuardParams
from mimesis.simulator.prompts import render_system_prompt
from mimesis.simulator.runtime import GenerateFn, UserSimulator, UserState, build_view

PROMPTED_USER_TEMPLATE = "prompted_user"


def render_prompted_system_prompt(scenario: Scenario) -> str:
    """System prompt of the prompted baseline for ``scenario`` (goal + behaviour directives)."""
    return render_system_prompt(scenario, template=PROMPTED_USER_TEMPLATE)


def render_prompted_user_messages(scenario: Scenario, history: list[Turn],
                                  private: list[str] | None = None) -> Messages:
    """Chat messages for the prompted baseline's next turn.

    Args:
        scenario: The hidden goal and directives.
        history: The chat so far as in real data (``user`` = the simulated user, ``assistant`` =
            the agent); may be empty (opening turn).
        private: Reasoning of each user turn in ``history`` (default: empty reasoning).

    Returns:
        ``[system, assistant(<think>…</think>\\nuser turn), user(agent reply), …]``.

    Raises:
        ValueError: ``private`` does not have one entry per user turn.
    """
    n_user = sum(t.role == "user" for t in history)
    private = [""] * n_user if private is None else private
    if len(private) != n_user:
        raise ValueError(f"{len(private)} reasoning entries for {n_user} user turns")
    state = UserState(scenario=scenario, system_prompt=render_prompted_system_prompt(scenario),
                      history=history, private=private)
    return build_view(state)


def prompted_user_simulator(generate_fn: GenerateFn, max_turns: int = 16,
                            guards: GuardParams | None = None) -> UserSimulator:
    """A :class:`UserSimulator` that plays the prompted baseline with ``generate_fn``'s model."""
    return UserSimulator(generate_fn, max_turns=max_turns,
                         system_prompt_fn=render_prompted_system_prompt, guards=guards)
