"""PersuadeGym's fact-reveal probe: ``stance``, the user's starting stance.

Judged by the env's own :func:`~mimesis.envs.persuade.gym.parse_stance`. Questions describe the
scale without its words ("agree", "neutral" …), which the parser would read.
"""

from __future__ import annotations

from mimesis.envs.facts import Fact
from mimesis.envs.persuade.gym import SCALE, PersuadeGym, parse_stance


def persuade_fact(env: PersuadeGym, position: int) -> Fact:
    """The user's starting stance on the statement (judged by the env's ``parse_stance``)."""
    task = env.task
    s, n = task.statement, task.initial_stance
    questions = (f'Where do you stand on "{s}" right now, as a number from 1 to 7?',
                 (f'On a scale from 1 (completely against) to 7 (completely for), how do you '
                  f'feel about "{s}"?'),
                 (f'Before we talk: what number from 1 to 7 sums up your view on "{s}"? '
                  '(1 = fully against, 7 = fully for)'))
    return Fact(env.name, task.id, "stance", f"{n} ({SCALE[n]})", questions,
                lambda reply: parse_stance(reply) == n)
