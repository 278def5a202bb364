"""Agent environments: the agent draws hidden facts out of a (simulated) user.

Environments follow the gymnasium API with text actions and observations and the tagged action
format of the UserRL gyms (SalesforceAIResearch/UserRL, Apache-2.0): ``[action]`` talks to the
user, ``[search]`` uses the env's tool, ``[answer]`` answers, ``[finish]`` gives up. The env never
calls the user simulator; the rollout engine does (contract in :mod:`mimesis.envs.base`).

- :class:`~mimesis.envs.function_gym.FunctionGym` (train) — hidden arithmetic rule.
- :class:`~mimesis.envs.travel_gym.TravelGym` (train) — travel preferences and options.
- :class:`~mimesis.envs.turtle_gym.TurtleGym` (train) — explain a lateral-thinking story.
- :class:`~mimesis.envs.persuade_gym.PersuadeGym` (train) — shift the user's stated stance.
- :class:`~mimesis.envs.tau_gym.TauGym` (train) — tau2 airline/retail customer service.
- :class:`~mimesis.envs.telepathy_gym.TelepathyGym` (held out) — guess the entity.
- :class:`~mimesis.envs.intention_gym.IntentionGym` (held out) — clarify a vague request.
- :class:`~mimesis.envs.search_gym.SearchGym` (held out) — multi-hop QA with BM25 search.

Use :func:`make` / :func:`list_envs`; add an environment by adding a module with a
``@register``-decorated :class:`UserEnv` subclass.
"""

from mimesis.envs.actions import Action, parse_action
from mimesis.envs.base import EnvMessage, UserEnv
from mimesis.envs.function_gym import FunctionGym, function_reward
from mimesis.envs.intention_gym import IntentionGym, intention_reward
from mimesis.envs.persuade_gym import PersuadeGym, persuade_reward
from mimesis.envs.registry import EnvSpec, list_envs, make, register
from mimesis.envs.search_gym import SearchGym, search_reward
from mimesis.envs.tau_gym import TauGym, tau_reward
from mimesis.envs.telepathy_gym import TelepathyGym, telepathy_reward
from mimesis.envs.travel_gym import TravelGym, travel_reward
from mimesis.envs.turtle_gym import TurtleGym, turtle_reward

__all__ = [
    "Action",
    "EnvMessage",
    "EnvSpec",
    "FunctionGym",
    "IntentionGym",
    "PersuadeGym",
    "SearchGym",
    "TauGym",
    "TelepathyGym",
    "TravelGym",
    "TurtleGym",
    "UserEnv",
    "function_reward",
    "intention_reward",
    "list_envs",
    "make",
    "parse_action",
    "persuade_reward",
    "register",
    "search_reward",
    "tau_reward",
    "telepathy_reward",
    "travel_reward",
    "turtle_reward",
]
