"""TravelGym (train): travel preferences and options: the agent elicits the user's preferences and
recommends the best option per aspect.

This folder is the whole environment: ``gym.py`` (:class:`~mimesis.envs.travel.gym.TravelGym`,
its tasks and reward), ``tasks.py`` (trips, preferences, options), ``probes.py`` (fact-reveal
probes) and ``grounding.py`` (the simulator's grounding exchanges). Importing the package
registers the env (:mod:`mimesis.envs.registry`).
"""

from mimesis.envs.travel.gym import TravelGym, travel_reward

__all__ = ["TravelGym", "travel_reward"]
