"""TelepathyGym (held out): guess the entity the user thinks of.

This folder is the whole environment: ``gym.py``
(:class:`~mimesis.envs.telepathy.gym.TelepathyGym`, its tasks and reward), ``data/`` (the
shipped tasks). Importing the package registers the env (:mod:`mimesis.envs.registry`).
"""

from mimesis.envs.telepathy.gym import TelepathyGym, telepathy_reward

__all__ = ["TelepathyGym", "telepathy_reward"]
