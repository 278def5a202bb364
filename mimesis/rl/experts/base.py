"""What every scripted expert shares: the :class:`Expert` interface, the dispatching
:class:`ExpertPolicy` (a :class:`~mimesis.rollout.engine.TextPolicy`) and small text helpers.

An expert is a pure function of an :class:`~mimesis.rollout.engine.AgentView`: it re-reads the whole
public history at every turn (its own messages, tool results, the user's replies) and returns one
tagged message. It keeps no state between calls, so batching, resampling and replays cannot make
it see anything but the view.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar

from mimesis.envs.actions import parse_action
from mimesis.rollout.engine import AgentView, ViewTurn

# Free text of an expert turn is kept under this many characters: the agent's turn budget is
# 48 tokens in the CPU default (~4 characters a token for SmolLM2's tokenizer on English).
MAX_TEXT_CHARS = 160
_AFFIRMATIVE = re.compile(r"\b(yes|yeah|yep|sure|ok(ay)?|please do|go ahead|confirm(ed)?|correct|"
                          r"do it|proceed|that's right|absolutely|of course)\b", re.IGNORECASE)
_NEGATIVE = re.compile(r"\b(no|nope|don'?t|do not|cancel that|stop|wait)\b", re.IGNORECASE)


class Expert(ABC):
    """A scripted agent for one environment (``env`` = its registry name)."""

    env: ClassVar[str]

    @abstractmethod
    def act(self, view: AgentView) -> str:
        """The next tagged message (one tag, concise) for the episode ``view`` shows."""


class ExpertPolicy:
    """Text policy that hands each view to the expert of its environment.

    Args:
        experts: The experts to use; default one of each found by
            :func:`mimesis.rl.experts.experts`.

    Raises:
        KeyError: in :meth:`act`, a view of an environment without an expert.
    """

    def __init__(self, experts: Sequence[Expert] | None = None) -> None:
        if experts is None:
            from mimesis.rl.experts import experts as found

            experts = [cls() for cls in found().values()]
        self.experts = {e.env: e for e in experts}

    def act(self, views: Sequence[AgentView]) -> list[str]:
        """One message per view (see :class:`~mimesis.rollout.engine.TextPolicy`)."""
        missing = sorted({v.env for v in views} - set(self.experts))
        if missing:
            raise KeyError(f"no expert for {missing}; experts: {sorted(self.experts)}")
        return [self.experts[v.env].act(v) for v in views]


# ----------------------------------------------------------------------- view helpers
def kinds(view: AgentView) -> list[str]:
    """The action kind of each earlier agent message."""
    return [parse_action(t.agent).kind for t in view.turns]


def content(turn: ViewTurn) -> str:
    """The content of an earlier agent message (its tag removed)."""
    return parse_action(turn.agent).content


def user_replies(view: AgentView) -> list[str]:
    """The user's replies so far, in order."""
    return [t.obs for t in view.turns if t.source == "user" and t.obs]


def replies_to_actions(view: AgentView) -> list[tuple[str, str]]:
    """``(question, reply)`` for every ``[action]`` so far (reply ``""`` when none came back)."""
    return [(content(t), t.obs if t.source == "user" else "") for t in view.turns
            if parse_action(t.agent).kind == "action"]


def tool_results(view: AgentView) -> list[tuple[str, str]]:
    """``(query, result)`` for every ``[search]`` so far."""
    return [(content(t), t.obs) for t in view.turns
            if parse_action(t.agent).kind == "search" and t.source == "tool"]


def affirmative(reply: str) -> bool:
    """True when ``reply`` agrees (``yes``, ``sure``, ``go ahead`` …) and does not start by
    refusing.

    >>> affirmative("Yes, please."), affirmative("No, wait."), affirmative("hmm")
    (True, False, False)
    """
    head = reply.strip()[:40]
    if _NEGATIVE.match(head) or re.match(r"\W*(no|nope)\b", head, re.IGNORECASE):
        return False
    return _AFFIRMATIVE.search(reply) is not None


def clip_words(text: str, max_chars: int = MAX_TEXT_CHARS) -> str:
    """``text`` cut at a word boundary to at most ``max_chars`` characters.

    >>> clip_words("one two three", 9)
    'one two'
    """
    text = " ".join(text.split())
    if len(text) <= max_chars:
        return text
    cut = text[: max_chars + 1].rsplit(" ", 1)[0]
    return cut.rstrip(",;:") if cut else text[:max_chars]
