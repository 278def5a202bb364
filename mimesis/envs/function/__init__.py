"""FunctionGym (train): hidden arithmetic rule: the agent asks the user for values of f and answers
f at the test case.

This folder is the whole environment: ``gym.py``
(:class:`~mimesis.envs.function.gym.FunctionGym`, its tasks and reward), ``rules.py`` (the rule
language), ``probes.py`` (fact-reveal probes) and ``grounding.py`` (the simulator's grounding
exchanges). Importing the package registers the env (:mod:`mimesis.envs.registry`).
"""

from mimesis.envs.function.gym import FunctionGym, function_reward

__all__ = ["FunctionGym", "function_reward"]
