"""IntentionGym (held out): clarify a vague request.

This folder is the whole environment: ``gym.py``
(:class:`~mimesis.envs.intention.gym.IntentionGym`, its tasks and reward), ``data/`` (the
shipped tasks). Importing the package registers the env (:mod:`mimesis.envs.registry`).
"""

from mimesis.envs.intention.gym import IntentionGym, intention_reward

__all__ = ["IntentionGym", "intention_reward"]
