"""Multi-turn GRPO on TRL's ``GRPOTrainer``: turn-level credit through per-token advantages.

What TRL 1.16 does for us (``trl/trainer/grpo_trainer.py``): rollouts through ``rollout_func``,
the ``env_mask`` → ``tool_mask`` loss mask (injected user/tool/env tokens never enter the loss,
docs/pitfalls.md #7), the clipped surrogate with asymmetric clip (``epsilon`` = 0.2 low,
``epsilon_high`` = 0.28 high: DAPO's clip-higher), token-level normalisation over the whole
generation batch (``loss_type="dapo"``) and no KL term (``beta=0``). What it cannot express is
turn-level credit: its advantage is one number per completion. Its ``_compute_loss`` does accept
``(B, T)`` advantages from subclasses ("To support subclasses that provide advantages with shape (B,
T)"), so :class:`TurnCreditGRPOTrainer` only replaces the advantages, nothing else of the loss. (The
clip acts on π_θ/π_old: with one optimisation pass per rollout, ``iterations: 1`` on CPU, the ratio
is 1 where the gradient is taken and the clip never binds — as in TRL; ``iterations > 1`` makes it
bind.)

Credit assignment (decided here, tested in ``tests/rl/test_grpo.py``). An episode ``i`` of group
``g`` (the G episodes of one scenario) has agent turns ``t = 0 … T_i − 1`` and one sparse reward
``R_i`` at its end. The return of turn ``t`` is ``γ^(T_i−1−t) · R_i`` (the reward reaches earlier
turns discounted by their distance to the outcome). Normalisation is per group and per episode:

    Â_i     = (R_i − mean_g R) / (std_g R + ε)          (TRL's group advantage: Bessel std,
                                                         ε = 1e-4)
    A_i,t   = γ^(T_i−1−t) · Â_i                         (every token of turn t)

i.e. the discounted return against the equally discounted group baseline, scaled by the group's
reward spread. The last turn (the one that answered or ended) gets the full group advantage,
earlier turns geometrically less credit *and* less blame; γ = 1 gives TRL's GRPO exactly. Per-turn
normalisation (statistics over the episodes that reached turn t) was rejected: with G = 4 and
variable lengths its groups hold 1–4 episodes, and a lone episode at turn t gets advantage 0.
Tokens are attributed to turns by the rollout's ``turn_ids`` (never by position), so the number of
injected tokens between turns cannot shift anyone's credit.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import torch
from trl import GRPOTrainer

from mimesis.envs.actions import is_valid_action
from mimesis.io import write_json
from mimesis.models.engine.sampling import SamplingParams
from mimesis.rl.generators import agent_sampler
from mimesis.rl.trl_rollout import RolloutFunc, group_jobs, to_trl
from mimesis.rollout.engine import RolloutEngine
from mimesis.rollout.records import Episode, RolloutParams, ScenarioSpec
from mimesis.simulator.runtime import UserSimulator

ADV_EPS = 1e-4  # TRL's epsilon in (r − mean) / (std + eps)
HISTORY = "history.json"  # per-generation reward records, saved in every checkpoint


def group_advantages(rewards: Sequence[float], group_ids: Sequence[int],
                     eps: float = ADV_EPS) -> list[float]:
    """Group-normalised advantage of each episode: ``(R − mean_g) / (std_g + eps)``.

    ``std_g`` is the sample (Bessel-corrected) standard deviation, as TRL's ``nanstd``; a group of
    one episode has advantage 0 (no baseline to compare with).

    Args:
        rewards: ``[N]`` episode rewards.
        group_ids: ``[N]`` group of each episode (episodes of one scenario share it).
        eps: Added to the std (TRL: 1e-4).

    Returns:
        ``[N]`` advantages.

    Examples:
        >>> [round(a, 3) for a in group_advantages([1.0, 0.0, 0.5, 0.5], [0, 0, 1, 1])]
        [0.707, -0.707, 0.0, 0.0]
    """
    if len(rewards) != len(group_ids):
        raise ValueError(f"{len(rewards)} rewards but {len(group_ids)} group ids")
    members: dict[int, list[int]] = defaultdict(list)
    for i, g in enumerate(group_ids):
        members[g].append(i)
    out = [0.0] * len(rewards)
    for idx in members.values():
        values = [float(rewards[i]) for i in idx]
        if len(values) < 2:
            continue
        mean = sum(values) / len(values)
        std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
        for i, v in zip(idx, values, strict=True):
            out[i] = (v - mean) / (std + eps)
    return out


def turn_advantages(rewards: Sequence[float], group_ids: Sequence[int],
                    turn_ids: Sequence[Sequence[int]], gamma: float, width: int | None = None,
                    eps: float = ADV_EPS) -> torch.Tensor:
    """Per-token advantages ``A[i, k] = γ^(T_i−1−turn_ids[i][k]) · Â_i`` (module docstring).

    Args:
        rewards: ``[B]`` episode rewards.
        group_ids: ``[B]`` group of each episode.
        turn_ids: ``B`` lists, the agent turn of each completion token (``T_i`` = max + 1).
        gamma: Per-turn discount in (0, 1].
        width: Columns of the result (TRL's padded completion length); default the longest.
        eps: Added to the group std.

    Returns:
        ``[B, width]`` float tensor; padding columns are 0.

    Raises:
        ValueError: ``gamma`` outside (0, 1], mismatched lengths, or ``width`` too small.
    """
    if not 0 < gamma <= 1:
        raise ValueError(f"gamma must be in (0, 1], got {gamma}")
    if len(turn_ids) != len(rewards):
        raise ValueError(f"{len(rewards)} rewards but {len(turn_ids)} turn-id lists")
    width = max((len(t) for t in turn_ids), default=0) if width is None else width
    episode_adv = group_advantages(rewards, group_ids, eps)
    out = torch.zeros(len(rewards), width)
    for i, (adv, turns) in enumerate(zip(episode_adv, turn_ids, strict=True)):
        if len(turns) > width:
            raise ValueError(f"episode {i} has {len(turns)} tokens, more than width {width}")
        if not turns:
            continue
        t = torch.tensor(turns, dtype=torch.float64)
        last = t.max()
        out[i, :len(turns)] = (adv * gamma ** (last - t)).float()
    return out


def is_flat(rewards: Sequence[float], tol: float = 1e-9) -> bool:
    """True when a group's rewards are all equal (every advantage of the group is 0).

    >>> is_flat([0.0, 0.0]), is_flat([1.0, 0.0]), is_flat([0.5, 0.5 + 1e-12])
    (True, False, True)
    """
    return max(rewards) - min(rewards) <= tol


def refill_flat_groups(play: Callable[[list], list[Episode]], episodes: Sequence[Episode],
                       fresh: Callable[[str], ScenarioSpec] | None, max_rounds: int,
                       group_size: int) -> tuple[list[Episode], dict[str, int]]:
    """Dynamic sampling: replace groups with equal rewards by groups on fresh scenarios.

    Each round plays, in one batched call, a fresh scenario of the same env for every group
    that is still flat, and a replayed group replaces the flat one only if its rewards differ;
    after ``max_rounds`` rounds the groups that are still flat stay (advantage 0).

    Args:
        play: Plays ``(spec, group_id)`` jobs (e.g. :meth:`RolloutEngine.play`).
        episodes: The step's first-round episodes, ``group_size`` per group.
        fresh: ``env -> ScenarioSpec``: the next undrawn training scenario of that env; ``None``
            disables resampling.

    Returns:
        ``(episodes, stats)``: the kept episodes, grouped (group ``g`` in positions
        ``g·G … g·G + G − 1``) with ``index`` = position; ``stats``: ``first_round`` (groups),
        ``raw_signal`` (groups with variance before resampling), ``kept_signal`` (after),
        ``replayed`` (groups played again), ``rounds``, ``played`` (groups played in all).
    """
    groups: dict[int, list[Episode]] = {}
    for e in episodes:
        groups.setdefault(e.group_id, []).append(e)
    todo = [g for g, eps in groups.items() if is_flat([e.reward for e in eps])]
    stats = {"first_round": len(groups), "raw_signal": len(groups) - len(todo), "replayed": 0,
             "rounds": 0}
    while todo and fresh is not None and stats["rounds"] < max_rounds:
        specs = {g: fresh(groups[g][0].env) for g in todo}
        replayed: dict[int, list[Episode]] = {}
        for e in play([(specs[g], g) for g in todo for _ in range(group_size)]):
            replayed.setdefault(e.group_id, []).append(e)
        for g, eps in replayed.items():
            if not is_flat([e.reward for e in eps]):
                groups[g] = eps
        stats["replayed"] += len(todo)
        stats["rounds"] += 1
        todo = [g for g in todo if is_flat([e.reward for e in groups[g]])]
    stats["kept_signal"] = len(groups) - len(todo)
    stats["played"] = stats["first_round"] + stats["replayed"]
    ordered = [e for g in sorted(groups) for e in groups[g]]
    return [e.model_copy(update={"index": i}) for i, e in enumerate(ordered)], stats


def make_rollout_func(simulator: UserSimulator, params: RolloutParams, cache_entries: int = 64,
                      progress: bool = False, fresh: Callable[[str], ScenarioSpec] | None = None,
                      max_rounds: int = 0, generator: str = "cpu") -> RolloutFunc:
    """The TRL ``rollout_func``: plays each prompt's scenario with the trainer's policy and returns
    :func:`~mimesis.rl.trl_rollout.to_trl`'s dict plus each
    :class:`~mimesis.rollout.records.Episode` under the extra key ``episode``.

    Per call, the policy is ``trainer.model`` (unwrapped — ZeRO-3 parameters gathered — and
    switched to eval mode for the rollout and back), sampled at ``trainer.args.temperature``/
    ``top_p`` by :func:`~mimesis.rl.generators.agent_sampler`: for ``generator="cpu"`` a fresh
    :class:`~mimesis.models.engine.sampling.TokenSampler` (a fresh KV cache: weights change every step),
    for ``vllm-*`` TRL's vLLM engine, whose weights TRL synced before this call.
    ``params.group_size`` is ignored: G is the trainer's ``num_generations`` (or
    ``num_generations_eval``).

    The trainers here need more than token lists: per-env rewards for the curves, and, for CSD,
    the turns with the simulator's private reasoning. The episode travels as an extra field, so
    TRL puts it on each input row next to ``env_reward`` and ``turn_ids``.

    With ``fresh`` (and ``max_rounds`` > 0) flat groups are resampled in training
    (:func:`refill_flat_groups`); the call's group statistics are left on
    ``trainer.rollout_stats`` for :meth:`TurnCreditGRPOTrainer._record`.
    """

    def rollout_func(prompts: list[str], trainer) -> dict[str, list]:
        training = trainer.model.training
        group_size = trainer.num_generations if training else trainer.num_generations_eval
        sampling = SamplingParams(temperature=trainer.args.temperature, top_p=trainer.args.top_p,
                                  max_new_tokens=params.max_new_tokens,
                                  batch_size=params.max_concurrent, cache_entries=cache_entries)
        with policy_for_rollout(trainer, generator) as model:
            sampler = agent_sampler(trainer, model, sampling, generator)
            engine = RolloutEngine(sampler, trainer.processing_class, simulator, params, progress)
            episodes = engine.play(group_jobs(prompts, group_size), desc="rollout")
            episodes, stats = refill_flat_groups(
                lambda jobs: engine.play(jobs, desc="resample"), episodes,
                fresh if training else None, max_rounds, group_size)
        trainer.rollout_stats = stats
        return {**to_trl(episodes), "episode": episodes}

    return rollout_func


@contextmanager
def policy_for_rollout(trainer, generator: str) -> Iterator[Any]:
    """The unwrapped policy in eval mode for one rollout (train mode restored after). With the
    CPU sampler under DeepSpeed ZeRO-3 its parameters are gathered for the rollout (TRL's
    ``unwrap_model_for_generation``); vLLM generators sample from vLLM's copy, nothing gathered."""
    accelerator = trainer.accelerator
    if generator == "cpu" and getattr(getattr(accelerator, "state", None), "deepspeed_plugin",
                                      None) is not None:
        from trl.models.utils import unwrap_model_for_generation

        unwrapped = unwrap_model_for_generation(
            trainer.model_wrapped, accelerator,
            gather_deepspeed3_params=trainer.args.ds3_gather_for_generation)
    else:
        unwrapped = nullcontext(accelerator.unwrap_model(trainer.model))
    with unwrapped as model:
        training = model.training
        model.eval()
        try:
            yield model
        finally:
            model.train(training)


class TurnCreditGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` with per-turn discounted advantages and per-environment reward records.

    Needs a ``rollout_func`` whose output has the extras ``env_reward``, ``group_id`` and
    ``turn_ids`` (:func:`make_rollout_func`). Everything else is TRL's.

    Args:
        gamma: Per-turn discount γ (paper: 0.8).
        *args, **kwargs: ``GRPOTrainer``'s.

    Attributes:
        history: One dict per generation: ``step``, ``reward/<env>`` means, ``reward``,
            ``termination/<reason>`` shares. Saved with every checkpoint (``history.json``).
        episodes: ``(step, Episode)`` of every rollout, for the stage's ``episodes.jsonl``.
    """

    def __init__(self, *args: Any, gamma: float = 0.8, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not 0 < gamma <= 1:
            raise ValueError(f"gamma must be in (0, 1], got {gamma}")
        self.gamma = gamma
        self.history: list[dict[str, float]] = []
        self.episodes: list[tuple[int, Any]] = []

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        output = super()._generate_and_score_completions(inputs)  # merges the extras into inputs
        for key in ("env_reward", "group_id", "turn_ids"):
            if key not in inputs[0]:
                raise KeyError(f"rollout_func output lacks the extra field {key!r}")
        advantages = turn_advantages([x["env_reward"] for x in inputs],
                                     [x["group_id"] for x in inputs],
                                     [x["turn_ids"] for x in inputs], self.gamma,
                                     width=output["completion_ids"].size(1))
        output["advantages"] = advantages.to(output["completion_ids"].device)
        if self.model.training:
            self._record(inputs)
        return output

    def _record(self, inputs: list[dict[str, Any]]) -> None:
        """This generation batch's statistics, logged to the active MLflow run at the optimizer
        step they train: ``reward/<env>`` and ``reward`` means, ``termination/<reason>`` shares,
        ``format_compliance`` (share of agent turns in the tagged action format,
        :func:`~mimesis.envs.actions.is_valid_action`), ``format_compliance/<env>``,
        ``mean_turns``, ``truncated`` (share of episodes ended by a limit) and dynamic
        sampling's ``groups/*`` counts with ``groups/raw_signal_frac`` (groups with reward
        variance before resampling) and ``groups/kept_signal_frac``."""
        step = self.state.global_step + 1
        by_env: dict[str, list[float]] = defaultdict(list)
        valid: dict[str, list[bool]] = defaultdict(list)
        ends: dict[str, int] = defaultdict(int)
        turns, truncated = [], 0
        for x in inputs:
            env = x["scenario_id"].split(":", 1)[0]
            by_env[env].append(float(x["env_reward"]))
            ends[x["termination"]] += 1
            truncated += bool(x.get("truncated"))
            if "episode" in x:
                self.episodes.append((step, x["episode"]))
                valid[env] += [is_valid_action(t.agent_text) for t in x["episode"].turns]
                turns.append(len(x["episode"].turns))
        row: dict[str, float] = {f"reward/{env}": sum(v) / len(v) for env, v in by_env.items()}
        row["reward"] = sum(float(x["env_reward"]) for x in inputs) / len(inputs)
        row.update({f"termination/{k}": v / len(inputs) for k, v in ends.items()})
        row["truncated"] = truncated / len(inputs)
        if turns:
            row["mean_turns"] = sum(turns) / len(turns)
            every = [v for vs in valid.values() for v in vs]
            row["format_compliance"] = sum(every) / max(len(every), 1)
            row.update({f"format_compliance/{env}": sum(v) / max(len(v), 1)
                        for env, v in valid.items()})
        stats = getattr(self, "rollout_stats", None)
        if stats:
            row.update({f"groups/{k}": float(v) for k, v in stats.items()})
            row["groups/raw_signal_frac"] = stats["raw_signal"] / max(stats["first_round"], 1)
            row["groups/kept_signal_frac"] = stats["kept_signal"] / max(stats["first_round"], 1)
            self.rollout_stats = None
        stream = getattr(self, "scenario_stream", None)
        if stream is not None:
            row["scenarios_drawn"] = float(stream.drawn)
        self.history.append({"step": step, **row})
        log_to_mlflow(row, step)

    def _save_checkpoint(self, model, trial) -> None:
        """TRL's checkpoint plus ``history.json`` (reward curves survive a resume)."""
        super()._save_checkpoint(model, trial)
        if self.args.should_save:  # the main process only, under accelerate launch
            folder = Path(self.args.output_dir) / f"checkpoint-{self.state.global_step}"
            write_json(folder / HISTORY, self.history)


def log_to_mlflow(values: dict[str, float], step: int) -> None:
    """``mlflow.log_metrics`` into the active run (no-op without one; names keep their ``/``)."""
    import mlflow

    if mlflow.active_run() is not None:
        mlflow.log_metrics({k: float(v) for k, v in values.items() if math.isfinite(v)}, step=step)
