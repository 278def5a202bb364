"""TauGym (train): tau2 airline/retail customer service with the simulated customer.

This folder is the whole environment: ``gym.py`` (:class:`~mimesis.envs.tau.gym.TauGym`, its
tasks and reward), ``adapter.py`` and ``tasks.py`` (tau2's environment and tasks), ``probes.py``
(fact-reveal probes) and ``grounding.py`` (the simulator's grounding exchanges). Importing the
package registers the env (:mod:`mimesis.envs.registry`).
"""

from mimesis.envs.tau.gym import TauGym, tau_reward

__all__ = ["TauGym", "tau_reward"]
