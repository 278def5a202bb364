"""SearchGym (held out): multi-hop QA with BM25 search.

This folder is the whole environment: ``gym.py`` (:class:`~mimesis.envs.search.gym.SearchGym`,
its tasks and reward), ``data/`` (the shipped tasks). Importing the package registers the env
(:mod:`mimesis.envs.registry`).
"""

from mimesis.envs.search.gym import SearchGym, search_reward

__all__ = ["SearchGym", "search_reward"]
