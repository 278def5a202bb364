"""PersuadeGym expert: listen, answer the user's reason with an argument, ask for a rating.

Arguments come from a small bank per direction (:data:`ARGUMENTS`: evidence, fairness, a
middle way, the cost of the status quo …), each answering the user's last point by naming it
(the longest content word of their reply). Every argument ends by asking for a 1–7 rating,
because only a stated rating counts; the rating is read with the env's own
:func:`~mimesis.envs.persuade.gym.parse_stance`. The expert stops with ``[finish]`` once the user
is at the far end of the scale or one message is left.
"""

from __future__ import annotations

import re

from mimesis.envs.persuade.gym import parse_stance
from mimesis.envs.turtle_judge import content_words
from mimesis.rl.experts.base import Expert, clip_words, replies_to_actions
from mimesis.rollout.engine import AgentView

_STATEMENT = re.compile(r'Statement: "([^"]*)"')
ASK = "Where are you now, from 1 to 7?"
LISTEN = "[action] Before I argue: what is your main reason for your view?"
ARGUMENTS: dict[str, tuple[str, ...]] = {
    "agree": (
        ("Places that tried this mostly report good results, and the worries faded once people "
         "adjusted."),
        "It can come with exceptions for cases like yours, so you keep what matters to you.",
        "Doing nothing has costs too; this spreads the benefits to more people.",
        "You can start small and review it after a year; if it fails, it is easy to undo.",
    ),
    "disagree": (
        ("It sounds good, but the evidence is mixed and the costs land on people who have no "
         "say."),
        "One rule for everyone ignores cases where it does real harm.",
        "There are cheaper ways to get the same benefit without the downsides.",
        "Once in place it is hard to undo, even if it turns out badly.",
    ),
}


def direction(prompt: str) -> str:
    """``agree`` or ``disagree``: where the prompt asks to move the user."""
    return "disagree" if "to disagree more" in prompt else "agree"


def their_point(reply: str) -> str:
    """The longest content word of the user's reply (``""`` for none)."""
    words = [w for w in content_words(reply) if len(w) >= 5]
    return max(words, key=len) if words else ""


class PersuadeExpert(Expert):
    """Reads: the statement and direction in the prompt, the user's replies and the ratings they
    state. Strategy: ask for their main reason when the budget allows (≥ 4 messages), then one
    argument per message, each answering their last point and asking for a rating; ``[finish]``
    on the last message or once the user is at the end of the scale."""

    env = "PersuadeGym"

    def act(self, view: AgentView) -> str:
        goal = direction(view.prompt)
        qa = replies_to_actions(view)
        stances = [s for _, r in qa if r and (s := parse_stance(r)) is not None]
        done = bool(stances) and stances[-1] == (7 if goal == "agree" else 1)
        if view.turns_left <= 1 or done:
            return "[finish]"
        if not qa and view.max_turns >= 4:
            return LISTEN
        used = sum(q.endswith(ASK) for q, _ in qa)
        argument = ARGUMENTS[goal][used % len(ARGUMENTS[goal])]
        point = their_point(qa[-1][1]) if qa and qa[-1][1] else ""
        opener = f"I hear you on {point}. " if point else ""
        return f"[action] {clip_words(opener + argument, 130)} {ASK}"
