"""Did the training reward rise? The last quarter of RL steps against the first, with a CI.

Input is either the per-episode rewards of a run (``episodes.jsonl`` of ``train_agent``, one row
per trained episode with ``step``, ``reward``, ``group_id``, ``scenario_id``, ``env``:
:func:`episode_rewards`) or, without those, the trainer's ``history`` (one mean per step:
:func:`history_rewards`). A step's G episodes of one scenario form a group and share that
scenario's difficulty, so they are not independent draws: :func:`reward_trend` resamples whole
groups when group ids are given (a cluster bootstrap); resampling their episodes one by one
would make the interval too narrow and call noise a rise.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

VERDICTS = ("rose", "fell", "flat (noise)")


def quarter_steps(steps: Iterable[int]) -> tuple[list[int], list[int]]:
    """The first and the last ``max(1, ceil(n/4))`` of the sorted steps (never overlapping).

    Examples:
        >>> quarter_steps([1, 2, 3, 4, 5])
        ([1, 2], [4, 5])

    Raises:
        ValueError: fewer than 2 distinct steps.
    """
    ordered = sorted(set(steps))
    if len(ordered) < 2:
        raise ValueError(f"a reward trend needs at least 2 steps, got {len(ordered)}")
    q = max(1, math.ceil(len(ordered) / 4))
    return ordered[:q], ordered[-q:]


def _units(rewards: Mapping[int, Sequence[float]], groups: Mapping[int, Sequence[Hashable]] | None,
           steps: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Per resampling unit (an episode, or a group keyed by (step, group id)): reward sum, count."""
    sums: dict[Hashable, float] = defaultdict(float)
    counts: dict[Hashable, int] = defaultdict(int)
    for step in steps:
        values = [float(v) for v in rewards[step]]
        if not values or not all(math.isfinite(v) for v in values):
            raise ValueError(f"step {step}: no rewards, or a non-finite one")
        ids = list(groups[step]) if groups is not None else list(range(len(values)))
        if len(ids) != len(values):
            raise ValueError(f"step {step}: {len(values)} rewards but {len(ids)} group ids")
        for gid, value in zip(ids, values, strict=True):
            sums[(step, gid)] += value
            counts[(step, gid)] += 1
    keys = list(sums)
    return np.array([sums[k] for k in keys]), np.array([counts[k] for k in keys], dtype=float)


def _resampled_means(sums: np.ndarray, counts: np.ndarray, n: int,
                     rng: np.random.Generator) -> np.ndarray:
    idx = rng.integers(0, len(sums), size=(n, len(sums)))
    return sums[idx].sum(axis=1) / counts[idx].sum(axis=1)


def reward_trend(episode_rewards_by_step: Mapping[int, Sequence[float]], n_bootstrap: int = 1000,
                 seed: int = 0, groups_by_step: Mapping[int, Sequence[Hashable]] | None = None
                 ) -> dict[str, Any]:
    """Mean reward of the last quarter of steps minus the first, with a 95% bootstrap CI.

    A quarter is ``max(1, ceil(n_steps / 4))`` steps (5 steps: 1-2 vs 4-5; 2 steps: 1 vs 2).
    Means are over the quarter's episodes. The CI is the percentile interval of the
    difference when each quarter's units are resampled with replacement, independently (the
    two quarters are separate samples of a changing policy): groups when ``groups_by_step`` is
    given, else episodes. With fewer than 2 units in a quarter there is no CI (``None``) and
    the verdict is ``flat (noise)``.

    Args:
        episode_rewards_by_step: Optimizer step → the rewards of the episodes it trained.
        n_bootstrap: Bootstrap resamples.
        seed: Seed of the numpy generator.
        groups_by_step: Step → one group id per reward (e.g. ``(group_id, scenario_id)``);
            ids are only compared within a step.

    Returns:
        ``n_steps``, ``first_steps``, ``last_steps``, ``n_first``/``n_last`` (episodes),
        ``units`` (``groups``/``episodes``), ``units_first``/``units_last``, ``mean_first``,
        ``mean_last``, ``diff``, ``ci_low``, ``ci_high``, ``verdict`` (``rose`` if ci_low > 0,
        ``fell`` if ci_high < 0, else ``flat (noise)``), ``n_bootstrap``, ``seed``.

    Raises:
        ValueError: fewer than 2 steps, a quarter step with no or non-finite rewards, or
            group ids that do not match the rewards one for one.
    """
    first, last = quarter_steps(episode_rewards_by_step)
    rng = np.random.default_rng(seed)
    (s1, c1), (s2, c2) = (_units(episode_rewards_by_step, groups_by_step, part)
                          for part in (first, last))
    mean_first, mean_last = float(s1.sum() / c1.sum()), float(s2.sum() / c2.sum())
    ci_low = ci_high = None
    verdict = "flat (noise)"
    if min(len(s1), len(s2)) >= 2:
        diffs = _resampled_means(s2, c2, n_bootstrap, rng) - _resampled_means(s1, c1,
                                                                              n_bootstrap, rng)
        ci_low, ci_high = float(np.percentile(diffs, 2.5)), float(np.percentile(diffs, 97.5))
        verdict = "rose" if ci_low > 0 else "fell" if ci_high < 0 else verdict
    return {"n_steps": len(episode_rewards_by_step), "first_steps": first, "last_steps": last,
            "n_first": int(c1.sum()), "n_last": int(c2.sum()),
            "units": "groups" if groups_by_step is not None else "episodes",
            "units_first": len(s1), "units_last": len(s2), "mean_first": mean_first,
            "mean_last": mean_last, "diff": mean_last - mean_first, "ci_low": ci_low,
            "ci_high": ci_high, "verdict": verdict, "n_bootstrap": n_bootstrap, "seed": seed}


def episode_rewards(rows: Iterable[Mapping[str, Any]], env: str | None = None
                    ) -> tuple[dict[int, list[float]], dict[int, list[Hashable]]]:
    """Rewards and group ids per step from ``episodes.jsonl`` rows (of one ``env``, if given).

    A group is ``(group_id, scenario_id)``: ``group_id`` numbers scenarios within one rollout
    call, so the scenario id keeps two calls of the same step apart.
    """
    rewards: dict[int, list[float]] = defaultdict(list)
    groups: dict[int, list[Hashable]] = defaultdict(list)
    for row in rows:
        if env is None or row["env"] == env:
            rewards[int(row["step"])].append(float(row["reward"]))
            groups[int(row["step"])].append((row["group_id"], row["scenario_id"]))
    return dict(rewards), dict(groups)


def history_rewards(history: Sequence[Mapping[str, float]], key: str = "reward"
                    ) -> dict[int, list[float]]:
    """Step → ``[mean reward]`` from ``TurnCreditGRPOTrainer.history`` (``key``: ``reward`` or
    ``reward/<env>``); each step's mean is then one resampling unit."""
    out: dict[int, list[float]] = defaultdict(list)
    for row in history:
        if key in row:
            out[int(row["step"])].append(float(row[key]))
    return dict(out)


def trend_markdown(trends_by_arm: Mapping[str, Mapping[str, Any]]) -> str:
    """A Markdown table, one row per arm (e.g. simulator), of :func:`reward_trend` results."""
    lines = ["| arm | steps | first quarter | last quarter | Δ | 95% CI | verdict |",
             "|---|---:|---:|---:|---:|---|---|"]
    for arm, t in trends_by_arm.items():
        ci = ("n/a" if t["ci_low"] is None else f"[{t['ci_low']:+.3f}, {t['ci_high']:+.3f}]")
        lines.append(f"| {arm} | {t['n_steps']} | {t['mean_first']:.3f} (n={t['n_first']}) | "
                     f"{t['mean_last']:.3f} (n={t['n_last']}) | {t['diff']:+.3f} | {ci} | "
                     f"{t['verdict']} |")
    return "\n".join(lines)


def group_signal(rewards_by_step: Mapping[int, Sequence[float]],
                 groups_by_step: Mapping[int, Sequence[Hashable]]) -> dict[str, Any]:
    """How many GRPO groups had any reward variance: a group whose G rewards are equal has
    zero advantage for every episode, so it gives the policy gradient nothing (DAPO, Yu et
    al. 2025, "dynamic sampling").

    Returns:
        ``groups`` (all, keyed by step and group id), ``with_signal`` (rewards not all
        equal) and ``share`` (``with_signal / groups``; 0 with no groups).
    """
    members: dict[Hashable, list[float]] = defaultdict(list)
    for step, values in rewards_by_step.items():
        for gid, value in zip(groups_by_step[step], values, strict=True):
            members[(step, gid)].append(float(value))
    with_signal = sum(max(v) > min(v) for v in members.values())
    return {"groups": len(members), "with_signal": with_signal,
            "share": with_signal / len(members) if members else 0.0}


def why_not_rising(trend: Mapping[str, Any], signal: Mapping[str, Any] | None = None,
                   difficulty: Mapping[str, Any] | None = None) -> list[str]:
    """Measured reasons an arm's training reward did not rise (empty when it rose).

    Each reason is a figure of the run, never a guess: the CI's width against the change
    (too few units to resolve it), the share of groups with reward variance (GRPO's signal,
    :func:`group_signal`), the first quarter's reward (a start near 0 leaves little to
    reinforce) and the difficulty rule's outcome (``difficulty.json``'s ``selection``:
    docs/claim.md rule 1).

    Args:
        trend: A :func:`reward_trend` result.
        signal: A :func:`group_signal` result, when the episodes are known.
        difficulty: ``difficulty.json`` of the stage (``{"enabled": ...,
            "selection": {"in_band", "reason", ...}}``), when there is one.
    """
    if trend.get("verdict") == "rose":
        return []
    reasons = []
    if trend.get("ci_low") is None:
        reasons.append(f"too few units for a CI ({trend.get('units_first')} and "
                       f"{trend.get('units_last')} {trend.get('units')} in the quarters)")
    else:
        half = (trend["ci_high"] - trend["ci_low"]) / 2
        reasons.append(f"the CI is ±{half:.2f} wide with {trend['units_first']} and "
                       f"{trend['units_last']} {trend['units']} per quarter: a change smaller "
                       "than that cannot show")
    if signal is not None and signal["groups"]:
        reasons.append(f"{signal['with_signal']} of {signal['groups']} groups "
                       f"({signal['share']:.0%}) had any reward variance; the others gave "
                       "GRPO a zero advantage")
    if trend.get("mean_first", 1.0) < 0.2:
        reasons.append(f"the first quarter's mean reward was {trend['mean_first']:.2f}: the "
                       "policy rarely succeeded, so few episodes were reinforced")
    selection = (difficulty or {}).get("selection") or {}
    if (difficulty or {}).get("enabled") and selection.get("in_band") is False:
        reasons.append(f"the difficulty rule found no level in its band ({selection['reason']})")
    return reasons
