"""PersuadeGym (train): shift the user's stated stance on a statement.

This folder is the whole environment: ``gym.py``
(:class:`~mimesis.envs.persuade.gym.PersuadeGym`, its tasks and reward), ``data/`` (the shipped
tasks), ``probes.py`` (fact-reveal probes) and ``grounding.py`` (the simulator's grounding
exchanges). Importing the package registers the env (:mod:`mimesis.envs.registry`).
"""

from mimesis.envs.persuade.gym import PersuadeGym, persuade_reward

__all__ = ["PersuadeGym", "persuade_reward"]
