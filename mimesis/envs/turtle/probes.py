"""TurtleGym's fact-reveal probe: ``yes_no``, a question whose answer the story fixes.

Data: ``mimesis/envs/turtle/data/turtle_probes.json``, one yes and one no question per shipped
story, so a user that always says "yes" scores 50%. The env has no parser (the user is told to
answer Yes/No/Irrelevant): :func:`yes_no` reads the reply's answer words; both or none → no
answer.
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources

from mimesis.envs.facts import Fact
from mimesis.envs.turtle.gym import TurtleGym

_YES = re.compile(r"\b(?:yes|yeah|yep|yup|correct)\b", re.IGNORECASE)
_NO = re.compile(r"\b(?:no|nope|nah|incorrect)\b(?!\s+(?:idea|clue))", re.IGNORECASE)
_IRRELEVANT = re.compile(r"\birrelevant\b|\bdoes(?:n't| not) matter\b", re.IGNORECASE)
TURTLE_PHRASINGS = ("{q}", "Quick question: {q}", "Let me ask you this. {q}")


def yes_no(reply: str) -> str | None:
    """The host's answer in ``reply``: ``yes``, ``no``, ``irrelevant``, or ``None`` (none or
    several of them).

    >>> yes_no("Yes."), yes_no("nope, not at all"), yes_no("Irrelevant"), yes_no("Maybe?")
    ('yes', 'no', 'irrelevant', None)
    >>> yes_no("Yes and no.")
    """
    found = [name for name, rx in (("yes", _YES), ("no", _NO), ("irrelevant", _IRRELEVANT))
             if rx.search(reply)]
    return found[0] if len(found) == 1 else None


@cache
def turtle_probes() -> dict[str, list[dict[str, str]]]:
    """Story id → ``[{question, answer}]`` from ``mimesis/envs/turtle/data/turtle_probes.json``."""
    path = resources.files("mimesis.envs.turtle") / "data" / "turtle_probes.json"
    return json.loads(path.read_text(encoding="utf-8"))["probes"]


def turtle_fact(env: TurtleGym, position: int) -> Fact:
    """A yes/no question the story fixes; even positions ask a yes, odd a no question (when the
    story has both).

    Raises:
        ValueError: a story without probes.
    """
    probes = turtle_probes().get(env.task.id)
    if not probes:
        raise ValueError(f"TurtleGym {env.task.id}: no yes/no probes for this story")
    wanted = "yes" if position % 2 == 0 else "no"
    probe = next((p for p in probes if p["answer"] == wanted), probes[0])
    answer = probe["answer"]
    questions = tuple(f.format(q=probe["question"]) for f in TURTLE_PHRASINGS)
    return Fact(env.name, env.task.id, "yes_no", f"{probe['question']} -> {answer}", questions,
                lambda reply: yes_no(reply) == answer)
