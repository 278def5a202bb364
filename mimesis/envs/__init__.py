"""Agent environments: the agent draws hidden facts out of a (simulated) user.

Environments follow the gymnasium API with text actions and observations and the tagged action
format of the UserRL gyms (SalesforceAIResearch/UserRL, Apache-2.0): ``[action]`` talks to the
user, ``[search]`` uses the env's tool, ``[answer]`` answers, ``[finish]`` gives up. The env never
calls the user simulator; the rollout engine does (contract in :mod:`mimesis.envs.base`).

Each environment is one folder, ``mimesis/envs/<name>/`` (``function``, ``travel``, ``turtle``,
``tau``, ``persuade`` for training; ``intention``, ``telepathy``, ``search`` held out): its gym,
data files, success threshold, and for a training env its fact-reveal probes and the simulator's
grounding exchanges. The modules here are what they share: the base class (:mod:`.base`), the
action parser (:mod:`.actions`), the registry (:mod:`.registry`), facts and exchanges
(:mod:`.facts`), the UserRL data locator (:mod:`.userrl`) and the keyword judge
(:mod:`.turtle_judge`, used by TurtleGym and IntentionGym).

Use :func:`make` / :func:`list_envs` (``mimesis envs list`` shows them); add an environment by
adding a folder (docs/environments.md, "Adding an environment").
"""

from mimesis.envs.actions import Action, parse_action
from mimesis.envs.base import EnvMessage, UserEnv
from mimesis.envs.registry import EnvSpec, env_names, list_envs, make, register

__all__ = [
    "Action",
    "EnvMessage",
    "EnvSpec",
    "UserEnv",
    "env_names",
    "list_envs",
    "make",
    "parse_action",
    "register",
]
