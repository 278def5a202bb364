"""A pre-registered difficulty rule: which environment setting the agent's RL trains at.

Before any RL, the SFT agent plays *training* scenarios under the frozen user simulator at each
level of a ladder of env settings (e.g. TravelGym ``{n_preferences: 1, n_options: 4}``,
``{n_preferences: 2, n_options: 5}``, …, easiest first). :func:`select_level` then applies a
rule fixed in advance: train where the start policy succeeds sometimes but not always (GRPO
learns nothing from groups that all succeed or all fail). The function takes only those
measurements, so a choice made by held-out or evaluation results cannot be expressed;
:func:`validate_ladder` refuses held-out environments and settings the env rejects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from mimesis.envs.base import UserEnv
from mimesis.stats import mean_ci

_TIE = 1e-9  # distances closer than this are a tie (0.35 and 0.55 are equally far from 0.45)


@dataclass(frozen=True)
class DifficultyRule:
    """The band the chosen level's success rate must lie in, fixed before measuring.

    Attributes:
        low: Lowest acceptable success rate, in [0, 1].
        high: Highest acceptable success rate, in [low, 1].
        target: Preferred success rate inside the band (ties go to the harder level).
        min_episodes: Episodes a level needs (all scenarios together) to be judged at all.
    """

    low: float = 0.2
    high: float = 0.7
    target: float = 0.45
    min_episodes: int = 32

    def __post_init__(self) -> None:
        if not 0.0 <= self.low <= self.target <= self.high <= 1.0:
            raise ValueError(f"need 0 <= low <= target <= high <= 1, got low={self.low}, "
                             f"target={self.target}, high={self.high}")
        if self.min_episodes < 1:
            raise ValueError(f"min_episodes must be >= 1, got {self.min_episodes}")


@dataclass(frozen=True)
class DifficultyLevel:
    """One rung of the ladder: a registered env name and its constructor kwargs."""

    env: str
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)

    def label(self) -> str:
        """E.g. ``TravelGym(n_options=4, n_preferences=1)``."""
        args = ", ".join(f"{k}={v}" for k, v in sorted(self.env_kwargs.items()))
        return f"{self.env}({args})"


@dataclass(frozen=True)
class LevelMeasurement:
    """The SFT agent's results at one level, on training scenarios only.

    Attributes:
        level: The level measured.
        scenario_success: One entry per scenario: its episodes' success values in [0, 1] (a
            list, averaged here) or their mean already taken (a float, counted as 1 episode).
    """

    level: DifficultyLevel
    scenario_success: Sequence[float | Sequence[float]]


@dataclass(frozen=True)
class LevelResult:
    """A level's success rate (mean over scenarios) with its 95% bootstrap CI over scenarios."""

    level: DifficultyLevel
    success: float
    ci_low: float
    ci_high: float
    n_scenarios: int
    n_episodes: int


@dataclass(frozen=True)
class Selection:
    """What :func:`select_level` chose and why; every level's numbers are kept."""

    rule: DifficultyRule
    levels: tuple[LevelResult, ...]
    chosen: int
    in_band: bool
    reason: str

    @property
    def level(self) -> DifficultyLevel:
        """The chosen level."""
        return self.levels[self.chosen].level

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready record for ``meta.json`` and MLflow (``mlflow.log_dict``)."""
        rows = [{"env": r.level.env, "env_kwargs": dict(r.level.env_kwargs),
                 "label": r.level.label(), "success": r.success, "ci_low": r.ci_low,
                 "ci_high": r.ci_high, "n_scenarios": r.n_scenarios, "n_episodes": r.n_episodes}
                for r in self.levels]
        return {"rule": asdict(self.rule), "chosen": self.chosen, "chosen_label":
                self.level.label(), "in_band": self.in_band, "reason": self.reason, "levels": rows}


def _measure(m: LevelMeasurement, i: int, rule: DifficultyRule, n_bootstrap: int,
             rng: np.random.Generator) -> LevelResult:
    per = [np.atleast_1d(np.asarray(s, dtype=float)) for s in m.scenario_success]
    if not per or any(p.size == 0 for p in per):
        raise ValueError(f"difficulty level {i} ({m.level.label()}): no scenarios, or a "
                         "scenario without episodes")
    every = np.concatenate(per)
    if not np.all((every >= 0.0) & (every <= 1.0)):
        raise ValueError(f"difficulty level {i} ({m.level.label()}): success values must be "
                         "in [0, 1]")
    if every.size < rule.min_episodes:
        raise ValueError(f"difficulty level {i} ({m.level.label()}): {every.size} episodes, "
                         f"the rule needs at least {rule.min_episodes}")
    values = np.array([p.mean() for p in per])
    low, high = mean_ci(values, n_bootstrap, 0.95, rng)  # scenarios resampled
    return LevelResult(m.level, float(values.mean()), low, high, len(values), int(every.size))


def select_level(measurements: Sequence[LevelMeasurement], rule: DifficultyRule,
                 n_bootstrap: int = 2000, seed: int = 0) -> Selection:
    """Apply ``rule`` to the ladder's measurements.

    The level whose success rate (mean over scenarios) lies in ``[rule.low, rule.high]``; of
    several, the one closest to ``rule.target``; of none, the one closest to the band, with
    ``in_band=False``. Ties (within 1e-9) go to the harder, later level.

    Args:
        measurements: One per ladder level, in ladder order (easiest first), training
            scenarios only.
        rule: The pre-registered rule.
        n_bootstrap: Bootstrap resamples of the scenarios per level (95% percentile CI).
        seed: Seed of the numpy generator (the CIs are reproducible; the choice uses none).

    Returns:
        The :class:`Selection`.

    Raises:
        ValueError: no measurements, a level with no scenarios, values outside [0, 1], or
            fewer than ``rule.min_episodes`` episodes at a level (the message names it).
    """
    if not measurements:
        raise ValueError("select_level needs at least one measured level")
    rng = np.random.default_rng(seed)
    results = tuple(_measure(m, i, rule, n_bootstrap, rng) for i, m in enumerate(measurements))
    rates = [r.success for r in results]
    band = f"[{rule.low:.2f}, {rule.high:.2f}]"
    inside = [i for i, s in enumerate(rates) if rule.low - _TIE <= s <= rule.high + _TIE]
    if inside:
        chosen = min(inside, key=lambda i: (round(abs(rates[i] - rule.target) / _TIE), -i))
        reason = (f"level {chosen} ({results[chosen].level.label()}) succeeds "
                  f"{rates[chosen]:.2f}, inside {band}; closest to the target "
                  f"{rule.target:.2f} of {len(inside)} level(s) in the band")
        return Selection(rule, results, chosen, True, reason)
    gap = [rule.low - s if s < rule.low else s - rule.high for s in rates]
    chosen = min(range(len(rates)), key=lambda i: (round(gap[i] / _TIE), -i))
    side = "below" if rates[chosen] < rule.low else "above"
    reason = (f"no level succeeds inside {band}; level {chosen} "
              f"({results[chosen].level.label()}) at {rates[chosen]:.2f} is the nearest "
              f"({side} the band by {gap[chosen]:.2f})")
    return Selection(rule, results, chosen, False, reason)


def selection_markdown(selection: Selection) -> str:
    """A Markdown table of every level (success, CI, n) with the chosen one marked, and why."""
    lines = ["| level | setting | success | 95% CI | scenarios | episodes | chosen |",
             "|---:|---|---:|---|---:|---:|:---:|"]
    for i, r in enumerate(selection.levels):
        mark = "**←**" if i == selection.chosen else ""
        lines.append(f"| {i} | `{r.level.label()}` | {r.success:.3f} | [{r.ci_low:.3f}, "
                     f"{r.ci_high:.3f}] | {r.n_scenarios} | {r.n_episodes} | {mark} |")
    status = "in band" if selection.in_band else "**not in band**"
    summary = f"Chosen: level {selection.chosen} ({status}). {selection.reason}."
    return "\n".join([*lines, "", summary])


def validate_ladder(levels: Sequence[DifficultyLevel],
                    env_cls: type[UserEnv] | Mapping[str, type[UserEnv]]) -> None:
    """Build every level's env once so that a bad setting fails before any measuring.

    Args:
        levels: The ladder, easiest first.
        env_cls: The env class every level must use, or a map env name → class (e.g. the
            registry's classes) for a ladder across envs.

    Raises:
        ValueError: an empty ladder, a repeated level, an env that is not the given class or
            not a ``train`` env, or kwargs the constructor rejects; the message names the level.
    """
    if not levels:
        raise ValueError("the difficulty ladder is empty")
    seen: set[str] = set()
    for i, level in enumerate(levels):
        name = f"difficulty level {i} ({level.label()})"
        if level.label() in seen:
            raise ValueError(f"{name}: repeats an earlier level")
        seen.add(level.label())
        known = dict(env_cls) if isinstance(env_cls, Mapping) else {env_cls.name: env_cls}
        cls = known.get(level.env)
        if cls is None:
            raise ValueError(f"{name}: env {level.env!r} is not one of {sorted(known)}")
        if cls.split != "train":
            raise ValueError(f"{name}: {cls.name} is a {cls.split} env; the ladder is measured "
                             "on training scenarios only")
        try:
            cls(**dict(level.env_kwargs))
        except (TypeError, ValueError) as err:
            raise ValueError(f"{name}: {cls.name} rejects these kwargs: {err}") from err
