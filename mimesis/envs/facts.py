"""What an environment's user knows, as the checks and the simulator's training see it: the
fact-reveal probes (:class:`Fact`, :func:`task_fact`) and the grounding exchanges
(:data:`Exchange`).

Every training environment hides facts in the user's scenario; an agent can only succeed when the
user states them when asked (docs/pitfalls.md #12). An env provides two hooks on its
:class:`~mimesis.envs.base.UserEnv` subclass, written in its own folder
(``mimesis/envs/<name>/probes.py`` and ``grounding.py``):

- :meth:`~mimesis.envs.base.UserEnv.probe_fact` — one fact of the current task, the questions
  that ask for it directly (≥ 3 phrasings per fact kind) and a judge ``reply -> bool`` that
  decides, with the env's own parser where it has one, whether a user reply states it (the
  fact-reveal check, :mod:`mimesis.eval.agents.fact_reveal`);
- :meth:`~mimesis.envs.base.UserEnv.grounding_exchanges` — scripted (agent message, user's
  private reasoning, user's reply) triples on the current task that teach the user simulator to
  state its scenario's facts (:mod:`mimesis.train.grounding`).

:func:`check_fact` refuses a fact one of whose questions its own judge accepts: a user that
echoes the question must never score.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mimesis.envs.base import UserEnv

Judge = Callable[[str], bool]
Exchange = tuple[str, str, str]  # (agent message, user's private reasoning, user's reply)


@dataclass(frozen=True)
class Fact:
    """One hidden fact of one task.

    Attributes:
        env: Environment name.
        task_id: The task's id.
        kind: What is asked (``value``, ``budget``, ``attribute``, ``yes_no``, ``user_id`` …).
        truth: The fact, as text for reports.
        questions: Phrasings that ask for it directly (the agent's message).
        judge: ``judge(reply)`` is True when the reply states the fact (see the env's probes).
    """

    env: str
    task_id: str
    kind: str
    truth: str
    questions: tuple[str, ...]
    judge: Judge = field(compare=False, repr=False)


def check_fact(fact: Fact) -> Fact:
    """Return ``fact``; raise when a question is judged to reveal it (echo would score).

    Raises:
        ValueError: a question of ``fact`` passes its own judge.
    """
    leaks = [q for q in fact.questions if fact.judge(q)]
    if leaks:
        raise ValueError(f"{fact.env} {fact.task_id}: probe states its own fact: {leaks[0]!r}")
    return fact


def task_fact(env: UserEnv, position: int) -> Fact:
    """The probed fact of ``env``'s current task (``position``: the task's place in the sample).

    Raises:
        KeyError: an env without fact probes. ValueError: a task without a usable fact, or a
        question that its own judge accepts (:func:`check_fact`).
    """
    from mimesis.envs.registry import env_class, env_names

    if not type(env).provides("probe_fact"):
        known = [n for n in env_names() if env_class(n).provides("probe_fact")]
        raise KeyError(f"no fact probes for {env.name}; known: {known}")
    return check_fact(env.probe_fact(position))
