"""TurtleGym (train): lateral-thinking story: the agent asks yes/no questions and explains what
happened.

This folder is the whole environment: ``gym.py`` (:class:`~mimesis.envs.turtle.gym.TurtleGym`,
its tasks and reward), ``data/`` (the shipped tasks), ``probes.py`` (fact-reveal probes) and
``grounding.py`` (the simulator's grounding exchanges). Importing the package registers the env
(:mod:`mimesis.envs.registry`).
"""

from mimesis.envs.turtle.gym import TurtleGym, turtle_reward

__all__ = ["TurtleGym", "turtle_reward"]
