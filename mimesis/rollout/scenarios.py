"""Training scenarios of the agent RL stages: the scenario stream and its first positions.

The stream is shared by ``sft_agent``, ``train_agent``, ``distill_agent`` and the evaluation's
check that no evaluation scenario was trained on. What picks the scenarios is a
:class:`ScenarioSource` (the RL params satisfy it; the evaluation builds a :class:`ScenarioPlan`
from a stage's recorded params).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from mimesis.rollout.records import ScenarioSpec


class ScenarioSource(Protocol):
    """What picks a run's scenarios (attributes of the RL stages' params)."""

    envs: Sequence[str]
    env_kwargs: Mapping[str, Mapping[str, Any]]
    steps: int
    scenarios_per_step: int
    scenario_seed: int


@dataclass(frozen=True)
class ScenarioPlan:
    """A :class:`ScenarioSource` on its own: the scenario keys of a stage's recorded params.

    Raises:
        ValueError: an env is unknown or held out from training (as the RL params refuse it).
    """

    envs: Sequence[str]
    steps: int
    scenarios_per_step: int
    scenario_seed: int
    env_kwargs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    overfit_scenarios: int = 0

    def __post_init__(self) -> None:
        from mimesis.envs.registry import check_envs

        check_envs(self.envs, "train", self.env_kwargs)


def scenario_specs(p: ScenarioSource, count: int | None = None) -> list[ScenarioSpec]:
    """The first ``count`` (default ``steps × scenarios_per_step``) scenarios of
    :class:`ScenarioStream` ``(p)``: envs in turn, seeds from ``scenario_seed`` on.

    Unknown or held-out envs never get here: the RL params and :class:`ScenarioPlan` refuse them
    when built.
    """
    stream = ScenarioStream(p)
    n = p.steps * p.scenarios_per_step if count is None else count
    return [stream.spec(i) for i in range(n)]


class ScenarioStream:
    """Training scenarios by position: scenario ``i`` is env ``envs[i % len(envs)]`` with seed
    ``scenario_seed + i``.

    Procedural envs get the seed alone; envs with a fixed task list also get
    ``options={"index": k}``, ``k`` drawn with that seed from the training part of the list
    (:func:`~mimesis.envs.registry.task_indices`), so evaluation tasks are never trained on.
    ``env_kwargs[env]`` goes to the env's constructor (e.g. a shorter TauGym policy).

    With ``overfit_scenarios = N > 0`` position ``i`` is position ``i mod N``: every step
    replays the same N scenarios. That is a check, not training: GRPO should raise the reward of
    scenarios it sees again (the optimiser, advantages and credit work) even when nothing
    carries over to held-out scenarios.

    The first ``steps × scenarios_per_step`` positions are the dataset of the run; dynamic
    sampling draws its replacements with :meth:`fresh` from the positions after them, so a run
    that resamples still plays only training scenarios, and ``drawn`` (recorded in the stage's
    ``meta.json`` as ``scenarios_drawn``) says how far the stream went.
    """

    def __init__(self, p: ScenarioSource) -> None:
        from mimesis.envs import make

        self.p = p
        tasks = {env: make(env, **p.env_kwargs.get(env, {})).tasks for env in p.envs}
        self.counts = {env: None if t is None else len(t) for env, t in tasks.items()}
        self.drawn = p.steps * p.scenarios_per_step

    def spec(self, i: int) -> ScenarioSpec:
        """Scenario ``i`` of the stream."""
        import numpy as np

        from mimesis.envs.registry import task_indices

        p = self.p
        # The overfitting check (overfit_scenarios of the RL params) replays the first N positions.
        i = i % p.overfit_scenarios if getattr(p, "overfit_scenarios", 0) else i
        env, seed = p.envs[i % len(p.envs)], p.scenario_seed + i
        options = {}
        if self.counts[env] is not None:
            allowed = task_indices(self.counts[env], "train")
            options = {"index": allowed[int(np.random.default_rng(seed).integers(len(allowed)))]}
        return ScenarioSpec(env=env, seed=seed, options=options,
                            env_kwargs=p.env_kwargs.get(env, {}))

    def fresh(self, env: str) -> ScenarioSpec:
        """The next undrawn scenario of ``env`` (dynamic sampling's replacement).

        Raises:
            ValueError: ``env`` is not one of the run's envs.
        """
        if env not in self.p.envs:
            raise ValueError(f"{env} is not a training env of this run ({self.p.envs})")
        while self.p.envs[self.drawn % len(self.p.envs)] != env:
            self.drawn += 1
        self.drawn += 1
        return self.spec(self.drawn - 1)
