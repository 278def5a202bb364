"""Agent environments: the agent draws hidden facts out of a (simulated) user.

Environments follow the gymnasium API with text actions and observations and the tagged action
format of the UserRL gyms (SalesforceAIResearch/UserRL, Apache-2.0): ``[action]`` talks to the
user, ``[search]`` uses the env's tool, ``[answer]`` answers, ``[finish]`` gives up. The env never
calls the user simulator; the rollout engine does (contract in :mod:`mimesis.envs.base`).

- :class:`~mimesis.envs.function_gym.FunctionGym` (train) — hidden arithmetic rule.
- :class:`~mimesis.envs.travel_gym.TravelGym` (train) — travel preferences and options.
- :class:`~mimesis.envs.telepathy_gym.TelepathyGym` (held out) — guess the entity.

Use :func:`make` / :func:`list_envs`; add an environment by adding a module with a
``@register``-decorated :class:`UserEnv` subclass.
"""

from mimesis.envs.actions import Action, parse_action
from mimesis.envs.base import EnvMessage, UserEnv
from mimesis.envs.function_gym import FunctionGym, function_reward
from mimesis.envs.registry import EnvSpec, list_envs, make, register
from mimesis.envs.telepathy_gym import TelepathyGym, telepathy_reward
from mimesis.envs.travel_gym import TravelGym, travel_reward

__all__ = [
    "Action",
    "EnvMessage",
    "EnvSpec",
    "FunctionGym",
    "TelepathyGym",
    "TravelGym",
    "UserEnv",
    "function_reward",
    "list_envs",
    "make",
    "parse_action",
    "register",
    "telepathy_reward",
    "travel_reward",
]
