"""PersuadeGym's grounding exchanges (:mod:`mimesis.train.grounding`): the stance when asked,
and push-back on an argument that answers none of the user's reasons."""

from __future__ import annotations

import random
from collections.abc import Iterator

from mimesis.envs.facts import Exchange
from mimesis.envs.persuade.gym import SCALE, PersuadeGym

_P_ASK = ("Where are you on this, 1 to 7?", "Rate your view 1-7.",
          "Give me a number for your stance, 1-7.", "So, how much do you agree now, out of 7?")
_P_PUSH = ("Everyone smart agrees with this. You should too.", "Come on, just admit I'm right.",
           "Trust me, you're wrong about this.")


def persuade_exchanges(env: PersuadeGym, rng: random.Random) -> Iterator[Exchange]:
    """The current stance when asked (``My stance: n/7``), and push-back on a pushy argument
    that answers none of the user's reasons (the stance does not move)."""
    task = env.task
    n = task.initial_stance
    stance = rng.choice((f"My stance: {n}/7.", f"{n}/7.", f"I'd say {n}/7."))
    yield rng.choice(_P_ASK), f"I'm asked for my stance: I'm at {n} ({SCALE[n]}).", stance
    reason = rng.choice(task.reasons)
    pushback = f"That doesn't convince me: {reason[0].lower() + reason[1:]}. My stance: {n}/7."
    yield (rng.choice(_P_PUSH), "I'm pushed, but none of my reasons is answered; I stay where I am.",
           pushback)
    yield rng.choice(_P_ASK), f"I'm asked again: still {n}, nothing has answered my reasons.", stance
