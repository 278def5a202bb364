"""Measure the difficulty ladder before any RL and choose the level the arms train at.

docs/claim.md "Pre-registered rule 1": the start policy (the ``sft_agent`` adapter, sampled as
GRPO samples it) plays *training* scenarios under the frozen user simulator at every level of a
ladder of env settings; :func:`~mimesis.rl.difficulty.select_level` then applies the rule to
those measurements only. This module holds the params of that step (:class:`DifficultyParams`,
the ``train_agent.difficulty`` section), the scenarios of a level (:func:`level_specs`), the
measuring (:func:`measure_levels`) and the whole step (:func:`choose_level`).

Scenarios: level ``k``'s ``i``-th scenario is the ``i``-th of a
:class:`~mimesis.rollout.scenarios.ScenarioStream` of that level's env and settings from
``scenario_seed`` (procedural envs: seed ``scenario_seed + i``; fixed task lists: an index of the
list's training part drawn with that seed). Every level uses the same seeds. The default
``scenario_seed`` (250 000) is past ``sft_agent``'s stream (200 000 on, a few dozen scenarios)
and below :data:`~mimesis.envs.registry.GROUNDING_SEED` (300 000: the simulator's grounding
dialogues were trained on those procedural tasks, so measuring there would flatter it), far
from ``train_agent``'s 0… and ``distill_agent``'s 100 000… and from the held-out 10 000 000….
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mimesis.rl.difficulty import (
    DifficultyLevel,
    DifficultyRule,
    LevelMeasurement,
    Selection,
    select_level,
    validate_ladder,
)
from mimesis.rollout.records import ScenarioSpec

if TYPE_CHECKING:
    from mimesis.rl.agent_training import AgentRLParams
    from mimesis.simulator.runtime import UserSimulator
    from mimesis.users.frozen import FrozenUser

_LEVEL_KEYS = {"env", "env_kwargs"}


@dataclass(frozen=True)
class DifficultyParams:
    """The ``train_agent.difficulty`` section: the ladder and the rule (docs/claim.md rule 1).

    ``ladder`` empty turns the step off (the arms train at ``env_kwargs`` as given).
    """

    ladder: list[dict[str, Any]] = field(default_factory=list)  # [{env, env_kwargs}], easiest first
    scenarios: int = 12  # training scenarios per level
    episodes: int = 2  # episodes per scenario
    scenario_seed: int = 250_000  # first seed (module docstring: which seeds, and why not others)
    low: float = 0.2  # the band the chosen level's success must lie in ...
    high: float = 0.7  # ... [low, high]
    target: float = 0.45  # closest to this of several levels in the band (ties: the harder)
    min_episodes: int = 24  # episodes a level needs to be judged (scenarios x episodes)

    def __post_init__(self) -> None:
        if self.scenarios < 1 or self.episodes < 1:
            raise ValueError("difficulty: scenarios and episodes must be >= 1")
        self.rule()  # the rule's own checks (0 <= low <= target <= high <= 1, min_episodes)
        from mimesis.envs.registry import GROUNDING_SEED

        if self.scenario_seed < 0 or self.scenario_seed + self.scenarios > GROUNDING_SEED:
            last = self.scenario_seed + self.scenarios - 1
            raise ValueError(f"difficulty: seeds {self.scenario_seed}..{last} must lie in "
                             f"[0, {GROUNDING_SEED}) (from {GROUNDING_SEED} on are the "
                             "simulator's grounding tasks)")
        for i, entry in enumerate(self.ladder):
            if (not isinstance(entry, Mapping) or "env" not in entry or set(entry) - _LEVEL_KEYS
                    or not isinstance(entry.get("env_kwargs", {}), Mapping)):
                raise ValueError(f"difficulty.ladder[{i}]: need {{env: <name>, env_kwargs: "
                                 f"{{<key>: <value>, ...}}}}, got {entry!r}")
        if self.ladder and self.scenarios * self.episodes < self.min_episodes:
            raise ValueError(f"difficulty: {self.scenarios} scenarios x {self.episodes} "
                             f"episodes per level is fewer than min_episodes "
                             f"({self.min_episodes}): the rule would refuse every level")

    def rule(self) -> DifficultyRule:
        """The pre-registered rule of these params."""
        return DifficultyRule(low=self.low, high=self.high, target=self.target,
                              min_episodes=self.min_episodes)

    def levels(self, env_kwargs: Mapping[str, Mapping[str, Any]] | None = None
               ) -> list[DifficultyLevel]:
        """The ladder's levels, each level's kwargs merged over ``env_kwargs[env]`` (the stage's
        settings of that env; the level's keys win): the settings the env is built with."""
        base = env_kwargs or {}
        return [DifficultyLevel(e["env"], {**base.get(e["env"], {}), **e.get("env_kwargs", {})})
                for e in self.ladder]


def check_ladder(p: DifficultyParams, envs: Sequence[str],
                 env_kwargs: Mapping[str, Mapping[str, Any]]) -> None:
    """Refuse a ladder the stage could not measure or train at, before anything loads.

    Args:
        p: The difficulty params (a non-empty ladder).
        envs: The stage's training envs.
        env_kwargs: The stage's env settings (each level is merged over them).

    Raises:
        ValueError: a held-out or unknown env, an env the stage does not train on, levels of
            one env that set different keys (the chosen level's keys must override every
            level's alike), settings the env rejects or repeats (``validate_ladder``), or an
            env without a success threshold; the message names the level.
    """
    from mimesis.envs import make
    from mimesis.envs.registry import check_envs, success_threshold

    names = [e["env"] for e in p.ladder]
    check_envs(names, "train")
    missing = sorted(set(names) - set(envs))
    if missing:
        raise ValueError(f"difficulty.ladder envs {missing} are not among train_agent envs "
                         f"{list(envs)}: the arms could not train at the chosen level")
    keys: dict[str, set[str]] = {}
    for i, e in enumerate(p.ladder):
        these = set(e.get("env_kwargs", {}))
        if keys.setdefault(e["env"], these) != these:
            raise ValueError(f"difficulty.ladder[{i}] ({e['env']}) sets {sorted(these)}, an "
                             f"earlier level of that env {sorted(keys[e['env']])}: every level "
                             "of an env must set the same keys")
    validate_ladder(p.levels(env_kwargs), {env: type(make(env)) for env in set(names)})
    for env in set(names):
        success_threshold(env)


def check_grpo_disjoint(p: DifficultyParams, rl: AgentRLParams) -> None:
    """Refuse difficulty seeds that the GRPO scenario stream of ``rl`` can reach.

    The stream's positions run from ``rl.scenario_seed`` over the dataset (``steps ×
    scenarios_per_step`` per process) and dynamic sampling's replacements (at most
    ``max_rounds × scenarios_per_step`` a step, each skipping at most ``len(envs) − 1``
    positions of other envs); this bound covers them.

    Raises:
        ValueError: the two seed ranges overlap.
    """
    from mimesis.rl.ranks import world_size

    per_step = rl.scenarios_per_step * (world_size() + (
        rl.dynamic_sampling.max_rounds * len(rl.envs) if rl.dynamic_sampling.enabled else 0))
    reach = rl.overfit_scenarios or rl.steps * per_step
    lo, hi = p.scenario_seed, p.scenario_seed + p.scenarios
    if lo < rl.scenario_seed + reach and rl.scenario_seed < hi:
        raise ValueError(f"difficulty seeds {lo}..{hi - 1} overlap the GRPO scenario stream "
                         f"(seeds {rl.scenario_seed}..{rl.scenario_seed + reach - 1} at most): "
                         "measure on other training scenarios than the arms train on")


def level_specs(level: DifficultyLevel, p: DifficultyParams) -> list[ScenarioSpec]:
    """The ``p.scenarios`` training scenarios of ``level`` (module docstring).

    Returns:
        ``[p.scenarios]`` specs with ``env_kwargs = level.env_kwargs``.
    """
    from mimesis.rl.agent_training import AgentRLParams
    from mimesis.rollout.scenarios import scenario_specs

    stream = AgentRLParams(envs=[level.env], env_kwargs={level.env: dict(level.env_kwargs)},
                           steps=1, scenarios_per_step=p.scenarios, micro_batch=1,
                           scenario_seed=p.scenario_seed)
    return scenario_specs(stream)


def measure_levels(model, tokenizer, simulator: UserSimulator, levels: Sequence[DifficultyLevel],
                   p: DifficultyParams, rl: AgentRLParams, progress: bool = True
                   ) -> list[LevelMeasurement]:
    """Play ``p.scenarios × p.episodes`` episodes of every level with ``model`` as the agent.

    The agent is sampled as GRPO samples it (``rl.temperature``, ``top_p``,
    ``max_new_tokens``; ``max_turns`` and ``max_completion_tokens`` per episode; as many
    episodes in flight as a GRPO step plays). Every level starts from the same seeds: a fresh
    agent sampler seeded ``rl.seed`` and the user restarted from ``rl.seed``
    (:func:`~mimesis.users.reseed.reseed_user`, in place), so the order of the levels changes
    nothing. An episode succeeds when its reward reaches the env's
    :func:`~mimesis.envs.registry.success_threshold` (as the evaluation counts it).

    Args:
        model: The agent (a causal LM in eval mode, on its device).
        tokenizer: Its tokenizer.
        simulator: The user (the frozen simulator's runtime).
        levels: The ladder, easiest first, settings merged (:meth:`DifficultyParams.levels`).
        p: Scenarios, episodes and seeds.
        rl: The stage's RL params (sampling, budgets, ``seed``).
        progress: tqdm bars (one over levels, one per level over episodes).

    Returns:
        One :class:`LevelMeasurement` per level, in order; ``scenario_success`` has
        ``[p.scenarios][p.episodes]`` values in {0, 1}.

    Raises:
        TypeError: a user whose randomness cannot be restarted.
        ValueError: an env without a success threshold.
    """
    import dataclasses

    from tqdm.auto import tqdm

    from mimesis.envs.registry import SUCCESS_EPS, success_threshold
    from mimesis.models.engine.sampling import SamplingParams, TokenSampler
    from mimesis.rl.agent_training import rollout_params
    from mimesis.rollout.engine import RolloutEngine
    from mimesis.users.reseed import reseed_user

    rollout = dataclasses.replace(rollout_params(rl), group_size=p.episodes)
    sampling = SamplingParams(temperature=rl.temperature, top_p=rl.top_p,
                              max_new_tokens=rl.max_new_tokens, batch_size=rollout.max_concurrent)
    out = []
    for level in tqdm(levels, desc="difficulty ladder", unit="level", disable=not progress):
        reseed_user(simulator, rl.seed)
        engine = RolloutEngine(TokenSampler(model, tokenizer, sampling, seed=rl.seed), tokenizer,
                               simulator, rollout, progress=progress)
        episodes = engine.run(level_specs(level, p), desc=level.label())
        success: list[list[float]] = [[] for _ in range(p.scenarios)]
        for ep in episodes:
            success[ep.group_id].append(float(ep.reward >= success_threshold(ep.env) - SUCCESS_EPS))
        out.append(LevelMeasurement(level, success))
    return out


def check_sft_disjoint(sft_agent_dir: Path | None, p: DifficultyParams) -> None:
    """Refuse difficulty seeds that the start adapter's expert episodes were played on.

    Reads ``<sft_agent_dir>/meta.json`` params (``envs``, ``scenarios_per_env``,
    ``scenario_seed``: one pass of ``len(envs) × scenarios_per_env`` scenarios); a folder
    without them (another stage's output) is not checked.

    Raises:
        ValueError: the seed ranges overlap.
    """
    import json

    if sft_agent_dir is None:
        return
    params = json.loads((Path(sft_agent_dir) / "meta.json").read_text()).get("params", {})
    if not {"envs", "scenarios_per_env", "scenario_seed"} <= set(params):
        return
    lo = int(params["scenario_seed"])
    hi = lo + len(params["envs"]) * int(params["scenarios_per_env"])
    if p.scenario_seed < hi and lo < p.scenario_seed + p.scenarios:
        raise ValueError(f"difficulty seeds {p.scenario_seed}..{p.scenario_seed + p.scenarios - 1}"
                         f" overlap the scenarios the SFT agent was trained on ({lo}..{hi - 1}, "
                         f"{sft_agent_dir}/meta.json): choose another difficulty.scenario_seed")


def choose_level(sft_agent_dir: Path | None, user: FrozenUser, rl: AgentRLParams,
                 p: DifficultyParams, progress: bool = True) -> Selection:
    """Rule 1 of docs/claim.md: load the start policy, measure the ladder, apply the rule.

    The start policy is the one every arm starts from
    (:func:`~mimesis.rl.agent_training.load_start_policy`: the SFT adapter, merged for
    sampling); it is freed before returning. The user's randomness is restarted from
    ``rl.seed`` afterwards, so the arms meet it as freshly loaded.

    Args:
        sft_agent_dir: The ``sft_agent`` output (``None``: ``rl.base_model``, no adapter).
        user: The loaded frozen simulator (its runtime plays the user).
        rl: The stage's params (``TrainAgentParams``: sampling, budgets, ``seed``, ``dtype``,
            ``env_kwargs``; ``base_model`` without a start adapter).
        p: The ladder and the rule (a non-empty ladder).
        progress: tqdm bars.

    Returns:
        The :class:`~mimesis.rl.difficulty.Selection`; its levels carry the merged settings,
        so ``selection.level.env_kwargs`` is what the arms train with.

    Raises:
        ValueError: an empty ladder, difficulty seeds the SFT agent trained on, or a level the
            rule cannot judge (:func:`~mimesis.rl.difficulty.select_level`).
        mimesis.models.merge.StaleTrainingError: see ``load_start_policy``.
    """
    import gc

    import torch

    from mimesis.rl.agent_training import load_start_policy
    from mimesis.users.reseed import reseed_user

    if not p.ladder:
        raise ValueError("choose_level needs a non-empty difficulty ladder")
    check_sft_disjoint(sft_agent_dir, p)
    levels = p.levels(rl.env_kwargs)
    model, tokenizer, _ = load_start_policy(sft_agent_dir, user, rl)
    if hasattr(model, "merge_and_unload"):
        model = model.merge_and_unload()  # the same function, faster to sample
    if torch.cuda.is_available():
        model.to("cuda")
    model.requires_grad_(False)
    model.eval()
    try:
        measured = measure_levels(model, tokenizer, user.simulator, levels, p, rl, progress)
    finally:
        del model
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        reseed_user(user.simulator, rl.seed)
    return select_level(measured, p.rule(), seed=rl.seed)
