"""Elicitation measures of agent episodes: does the agent ask before it answers, and how many of
the user's hidden facts does it get the user to state.

The MIMESIS paper's agent environments hide the user's intent from the agent, which must elicit
the unstated intent by asking clarifying questions before it answers. Per episode
(:func:`episode_elicitation`):

- ``questions``: agent messages that reached the user (an ``[action]`` with text, not cut by the
  turn limit: ``TurnRecord.to_user`` set) before the first ``[answer]`` (all of them when the
  agent never answers); ``asked_first`` is ``questions >= 1``.
- ``facts_elicited`` / ``facts_hidden``: TravelGym only. Every preference of the trip is hidden
  (the agent prompt shows only the opening request, which names none); those the env marks
  ``Preference.hidden`` are told only when the agent asks about that attribute
  (``asked_only_*``). A preference is elicited when some user reply states it, by the narrow rule
  of the fact-reveal probes (:func:`mimesis.envs.travel.probes.travel_fact`: the attribute's values
  the reply names, or its first money amount, must accept exactly the options the true preference
  accepts). A bare "yes" to a closed question states nothing under this rule. Other envs: ``None``
  (no rule that reads every hidden fact of their tasks from free text).

:func:`elicitation_table` aggregates per (agent, user) with 95% percentile bootstrap CIs over
scenarios (Efron & Tibshirani 1993, ch. 13); :func:`elicitation_markdown` renders it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from mimesis.envs.facts import Judge
from mimesis.envs.travel.probes import travel_fact
from mimesis.eval.agents.pairs import MIN_SCENARIOS
from mimesis.rollout.records import Episode, RolloutParams, ScenarioSpec, TurnRecord
from mimesis.stats import mean_ci

ALL_ENVS = "ALL"
# Table metric -> (episode field or ratio of two fields). Means over scenarios.
METRICS: dict[str, tuple[str, str | None]] = {
    "ask_rate": ("asked_first", None),
    "answer_rate": ("answered", None),
    "questions": ("questions", None),
    "turns": ("turns", None),
    "facts_elicited": ("facts_elicited", None),
    "elicited_fraction": ("facts_elicited", "facts_hidden"),
    "asked_only_fraction": ("asked_only_elicited", "asked_only_hidden"),
}
EpisodeLike = Episode | Mapping[str, Any]


def _parts(episode: EpisodeLike) -> tuple[str, ScenarioSpec, str, list[TurnRecord]]:
    """``(env, spec, task_id, turns)`` of an Episode or of its ``agent_episodes.jsonl`` dict."""
    if isinstance(episode, Episode):
        return episode.env, episode.spec, episode.task_id, list(episode.turns)
    turns = [t if isinstance(t, TurnRecord) else TurnRecord.model_validate(t)
             for t in episode["turns"]]
    spec = episode["spec"]
    spec = spec if isinstance(spec, ScenarioSpec) else ScenarioSpec.model_validate(spec)
    return episode["env"], spec, episode.get("task_id", ""), turns


@lru_cache(maxsize=4096)
def _travel_judges(spec_json: str) -> tuple[str, tuple[tuple[Judge, bool], ...]]:
    """``(task id, ((judge, asked_only), …))``, one per preference of the spec's trip."""
    from mimesis.envs import make

    spec = ScenarioSpec.from_prompt(spec_json)
    # As the rollout builds it; the task does not depend on max_turns.
    env = make(spec.env, max_turns=RolloutParams.max_turns, **spec.env_kwargs)
    env.reset(seed=spec.seed, options=dict(spec.options) or None)
    prefs = [p for a in env.task.aspects for p in a.preferences]
    return env.task.id, tuple((travel_fact(env, i).judge, p.hidden) for i, p in enumerate(prefs))


def travel_elicited(spec: ScenarioSpec, replies: Sequence[str], task_id: str = ""
                    ) -> dict[str, int]:
    """Preferences of a TravelGym trip that some of ``replies`` states (module docstring).

    Args:
        spec: The episode's scenario (rebuilt with the env registry and reset, as the rollout).
        replies: The user's replies of the episode.
        task_id: The episode's task id; when given, must match the rebuilt task.

    Returns:
        ``facts_elicited``, ``facts_hidden`` (all preferences), ``asked_only_elicited``,
        ``asked_only_hidden`` (those told only when asked about directly); counts.

    Raises:
        ValueError: the rebuilt task is not the episode's (task generation changed since).
    """
    rebuilt, judges = _travel_judges(spec.to_prompt())
    if task_id and rebuilt != task_id:
        raise ValueError(f"{spec.to_prompt()} rebuilds task {rebuilt}, the episode played "
                         f"{task_id}")
    stated = [any(judge(r) for r in replies) for judge, _ in judges]
    return {"facts_elicited": sum(stated), "facts_hidden": len(judges),
            "asked_only_elicited": sum(s for s, (_, h) in zip(stated, judges, strict=True) if h),
            "asked_only_hidden": sum(h for _, h in judges)}


def episode_elicitation(episode: EpisodeLike) -> dict[str, Any]:
    """Elicitation measures of one episode (module docstring).

    Args:
        episode: An :class:`Episode`, or its dict as ``agent_episodes.jsonl`` stores it (token
            arrays left out).

    Returns:
        ``asked_first`` (bool), ``questions`` (messages to the user before the first answer),
        ``turns`` (agent turns used), ``answered`` (bool: some ``[answer]`` turn),
        ``facts_elicited``, ``facts_hidden``, ``asked_only_elicited``, ``asked_only_hidden``
        (counts; ``None`` outside TravelGym).

    Raises:
        ValueError: a TravelGym spec that rebuilds another task than the episode's.
    """
    env, spec, task_id, turns = _parts(episode)
    first = next((i for i, t in enumerate(turns) if t.kind == "answer"), len(turns))
    questions = sum(t.to_user is not None for t in turns[:first])
    out: dict[str, Any] = {"asked_first": questions >= 1, "questions": questions,
                           "turns": len(turns), "answered": first < len(turns)}
    facts = dict.fromkeys(("facts_elicited", "facts_hidden", "asked_only_elicited",
                           "asked_only_hidden"))
    if env == "TravelGym":
        facts = travel_elicited(spec, [t.obs for t in turns if t.obs_source == "user"], task_id)
    return out | facts


def cells_from_records(records: Sequence[Mapping[str, Any]]
                       ) -> dict[tuple[str, str], list[Mapping[str, Any]]]:
    """Group ``agent_episodes.jsonl`` dicts by ``(agent, user)``, in file order."""
    cells: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for r in records:
        cells.setdefault((r["agent"], r["user"]), []).append(r)
    return cells


def _scenario_values(measures: Sequence[tuple[str, dict[str, Any]]], num: str, den: str | None
                     ) -> np.ndarray:
    """One value per scenario: the mean over its episodes where the metric is defined."""
    per: dict[str, list[float]] = {}
    for scenario, m in measures:
        if m[num] is None or (den is not None and not m[den]):
            continue
        per.setdefault(scenario, []).append(float(m[num]) / (float(m[den]) if den else 1.0))
    return np.array([np.mean(v) for v in per.values()], dtype=float)


def scenario_bootstrap(values: Sequence[float], n_bootstrap: int = 1000, ci: float = 0.95,
                       seed: int = 0) -> tuple[float, float, float]:
    """Mean of per-scenario values and its percentile bootstrap CI (scenarios resampled).

    Returns:
        ``(mean, ci_low, ci_high)``; all NaN without values, the bounds NaN with fewer than
        :data:`~mimesis.eval.agents.pairs.MIN_SCENARIOS` scenarios.

    >>> scenario_bootstrap([0.5, 0.5, 0.5, 0.5, 0.5])
    (0.5, 0.5, 0.5)
    >>> scenario_bootstrap([0.0, 1.0])  # too few scenarios for an interval
    (0.5, nan, nan)
    """
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return math.nan, math.nan, math.nan
    if x.size < MIN_SCENARIOS:
        return float(x.mean()), math.nan, math.nan
    lo, hi = mean_ci(x, n_bootstrap, ci, seed)
    return float(x.mean()), lo, hi


def elicitation_table(episodes_by_cell: Mapping[tuple[str, str], Sequence[EpisodeLike]],
                      by_env: bool = False, n_bootstrap: int = 1000, ci: float = 0.95,
                      seed: int = 0) -> list[dict[str, Any]]:
    """Elicitation measures per (agent, user), with bootstrap CIs over scenarios.

    Each metric is the unweighted mean over scenarios (``spec`` JSON) of the mean over the
    scenario's episodes, so the episodes of one scenario are resampled together. Fractions count
    only episodes with something hidden (TravelGym); a metric no episode defines is NaN.

    Args:
        episodes_by_cell: ``(agent, user)`` → its episodes (see :func:`cells_from_records`).
        by_env: One row per (agent, user, env) instead of one per (agent, user) over all envs.
        n_bootstrap / ci / seed: Of :func:`scenario_bootstrap` (the same seed for every metric).

    Returns:
        Rows in cell order: ``agent``, ``user``, ``env`` (``ALL`` unless ``by_env``), ``n``
        (episodes), ``n_scenarios``, and per metric of :data:`METRICS` (``ask_rate``,
        ``answer_rate`` in [0, 1]; ``questions``, ``turns`` in agent messages;
        ``facts_elicited`` in facts; ``elicited_fraction``, ``asked_only_fraction`` in [0, 1])
        its mean, ``<metric>_ci_low`` and ``<metric>_ci_high``.
    """
    rows = []
    for (agent, user), episodes in episodes_by_cell.items():
        groups: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        for ep in episodes:
            env, spec, _, _ = _parts(ep)
            groups.setdefault(env if by_env else ALL_ENVS, []).append(
                (spec.to_prompt(), episode_elicitation(ep)))
        for env, measures in groups.items():
            row: dict[str, Any] = {"agent": agent, "user": user, "env": env, "n": len(measures),
                                   "n_scenarios": len({s for s, _ in measures})}
            for name, (num, den) in METRICS.items():
                mean, lo, hi = scenario_bootstrap(_scenario_values(measures, num, den),
                                                  n_bootstrap, ci, seed)
                row |= {name: mean, f"{name}_ci_low": lo, f"{name}_ci_high": hi}
            rows.append(row)
    return rows


def _cell(row: Mapping[str, Any], name: str) -> str:
    mean, lo, hi = row[name], row[f"{name}_ci_low"], row[f"{name}_ci_high"]
    if math.isnan(mean):
        return "–"
    return f"{mean:.2f}" if math.isnan(lo) else f"{mean:.2f} [{lo:.2f}, {hi:.2f}]"


def elicitation_markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    """A markdown table of :func:`elicitation_table` rows: mean [95% CI] per metric; ``–`` where
    undefined, no brackets where there are too few scenarios for a CI.

    >>> row = {"agent": "base", "user": "frozen", "env": "ALL", "n": 1, "n_scenarios": 1}
    >>> row |= {f"{m}{s}": math.nan for m in METRICS for s in ("", "_ci_low", "_ci_high")}
    >>> elicitation_markdown([row | {"ask_rate": 1.0}]).splitlines()[2].split(" | ")[5]
    '1.00'
    """
    head = ["agent", "user", "env", "n", "scenarios", *METRICS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["agent"], r["user"], r["env"], str(r["n"]), str(r["n_scenarios"]),
                 *(_cell(r, m) for m in METRICS)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
