"""Agent evaluation statistics: success per env, bootstrap CIs, and the ``ALL`` row over envs.

Success: an episode succeeds when its reward is at least its env's threshold, the env class's
``success_threshold`` (:func:`~mimesis.envs.registry.success_threshold`, why each value:
docs/environments.md). An env without a threshold is an error, never a silent default.

Uncertainty: per (agent, simulator, env) a seeded percentile bootstrap 95% CI of the mean (episodes
resampled); the ``ALL`` row (unweighted mean over envs, as the paper reports) uses the normal
approximation ``± z·sqrt(Σ s_e²/n_e)/E``. ``reward_std`` is the sample standard deviation.
Differences between agents (paired by scenario): :mod:`mimesis.eval.agents.pairs`.

Format compliance: the share of an agent's turns that reached the env as a tagged action
(``[action]``/``[search]``/``[answer]``/``[finish]``, :func:`~mimesis.envs.actions.parse_action`
``tagged``); untagged text (read as ``[action]``) and turns cut by the token budget do not count.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mimesis.envs.registry import SUCCESS_EPS as _EPS
from mimesis.envs.registry import success_threshold
from mimesis.rollout.records import Episode
from mimesis.stats import mean_ci

__all__ = ["ALL_ENVS", "TERMINATIONS", "bootstrap_ci", "episode_rows", "format_compliance",
           "overall_rows", "success_threshold", "summarize"]

TERMINATIONS = ("answer", "finish", "user_end", "max_turns", "max_tokens")
ALL_ENVS = "ALL"


# ----------------------------------------------------------------------------- aggregation
def format_compliance(episodes: Sequence[Episode]) -> float:
    """Share of the agent turns of ``episodes`` that reached the env as a tagged action (module
    docstring); NaN without turns.

    >>> from mimesis.rollout.records import TurnRecord
    >>> ep = Episode.model_construct(turns=[TurnRecord(agent_text="[answer] 4", kind="answer"),
    ...                                     TurnRecord(agent_text="what is f?", kind="action"),
    ...                                     TurnRecord(agent_text="[answer] 4")])  # cut: no kind
    >>> round(format_compliance([ep]), 3)
    0.333
    """
    from mimesis.envs.actions import parse_action

    turns = [t for e in episodes for t in e.turns]
    if not turns:
        return math.nan
    return sum(t.kind is not None and parse_action(t.agent_text).tagged for t in turns) / len(turns)


def bootstrap_ci(values: Sequence[float], n_bootstrap: int = 1000, ci: float = 0.95,
                 seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean of ``values`` (seeded; ``(v, v)`` for one value;
    :func:`mimesis.stats.mean_ci`).

    >>> bootstrap_ci([1.0, 1.0, 1.0])
    (1.0, 1.0)
    >>> lo, hi = bootstrap_ci([0.0, 1.0] * 20); 0.3 < lo < 0.5 < hi < 0.7
    True
    """
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return math.nan, math.nan
    if x.size == 1:
        return float(x[0]), float(x[0])
    return mean_ci(x, n_bootstrap, ci, seed)


def summarize(rewards: Sequence[float], threshold: float, n_bootstrap: int = 1000,
              ci: float = 0.95, seed: int = 0) -> dict[str, float]:
    """Reward and success statistics of one cell (episode rewards, in [0, 1] for our envs).

    >>> s = summarize([1.0, 0.0, 0.5, 0.5], threshold=0.5)
    >>> s["n"], s["mean_reward"], s["success_rate"], round(s["reward_std"], 4)
    (4, 0.5, 0.75, 0.4082)
    """
    x = np.asarray(rewards, dtype=float)
    success = (x >= threshold - _EPS).astype(float)
    r_lo, r_hi = bootstrap_ci(x, n_bootstrap, ci, seed)
    s_lo, s_hi = bootstrap_ci(success, n_bootstrap, ci, seed)
    return {"n": int(x.size), "mean_reward": float(x.mean()) if x.size else math.nan,
            "reward_std": float(x.std(ddof=1)) if x.size > 1 else 0.0,
            "reward_ci_low": r_lo, "reward_ci_high": r_hi,
            "success_rate": float(success.mean()) if x.size else math.nan,
            "success_ci_low": s_lo, "success_ci_high": s_hi, "success_threshold": threshold}


def episode_rows(agent: str, simulator: str, episodes: Sequence[Episode],
                 n_bootstrap: int = 1000, ci: float = 0.95, seed: int = 0) -> list[dict]:
    """One row per env (first-seen order) of one (agent, simulator) run.

    Row keys: ``agent``, ``simulator``, ``env``, the keys of :func:`summarize`, ``mean_turns``
    (agent messages per episode), ``format_compliance`` (:func:`format_compliance`),
    ``mean_user_turns`` (user messages the agent received; an
    ending user sends none), ``terminations``
    (count per reason of :data:`TERMINATIONS`, zeros included), ``user_end_reasons`` (counts of
    the simulator's end reasons).
    """
    by_env: dict[str, list[Episode]] = {}
    for ep in episodes:
        by_env.setdefault(ep.env, []).append(ep)
    rows = []
    for env, eps in by_env.items():
        ends = Counter(e.termination for e in eps)
        rows.append({
            "agent": agent, "simulator": simulator, "env": env,
            **summarize([e.reward for e in eps], success_threshold(env), n_bootstrap, ci, seed),
            "mean_turns": float(np.mean([len(e.turns) for e in eps])),
            "format_compliance": format_compliance(eps),
            "mean_user_turns": float(np.mean([sum(t.obs_source == "user" and bool(t.obs)
                                                  for t in e.turns) for e in eps])),
            "terminations": {t: ends.get(t, 0) for t in TERMINATIONS},
            "user_end_reasons": dict(sorted(Counter(e.user_end_reason or "none"
                                                    for e in eps).items())),
        })
    return rows


def overall_rows(rows: Sequence[Mapping[str, Any]], ci: float = 0.95) -> list[dict]:
    """One ``env="ALL"`` row per (agent, simulator): unweighted means over its env rows, normal
    CI (module docstring), summed counts.

    >>> rows = [{"agent": "a", "simulator": "s", "env": e, "n": 2, "mean_reward": r,
    ...          "reward_std": 0.0, "success_rate": r, "mean_turns": 2.0, "mean_user_turns": 1.0,
    ...          "terminations": {"answer": 2}} for e, r in (("X", 1.0), ("Y", 0.0))]
    >>> row = overall_rows(rows)[0]
    >>> row["env"], row["mean_reward"], row["n"], row["terminations"]
    ('ALL', 0.5, 4, {'answer': 4})
    """
    z = float(_normal_quantile(0.5 + ci / 2))
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for row in rows:
        if row["env"] != ALL_ENVS:
            groups.setdefault((row["agent"], row["simulator"]), []).append(row)
    out = []
    for (agent, simulator), cells in groups.items():
        k = len(cells)
        keys = ("mean_reward", "success_rate", "mean_turns", "mean_user_turns",
                "format_compliance")
        mean = {key: float(np.mean([c[key] for c in cells]))
                for key in keys if all(key in c for c in cells)}
        half_r = z * math.sqrt(sum(c["reward_std"] ** 2 / c["n"] for c in cells)) / k
        half_s = z * math.sqrt(sum(c["success_rate"] * (1 - c["success_rate"]) / c["n"]
                                   for c in cells)) / k
        terms: Counter[str] = Counter()
        for c in cells:
            terms.update(c.get("terminations", {}))
        out.append({"agent": agent, "simulator": simulator, "env": ALL_ENVS,
                    "n": sum(c["n"] for c in cells), **mean,
                    "reward_ci_low": mean["mean_reward"] - half_r,
                    "reward_ci_high": mean["mean_reward"] + half_r,
                    "success_ci_low": max(0.0, mean["success_rate"] - half_s),
                    "success_ci_high": min(1.0, mean["success_rate"] + half_s),
                    "terminations": dict(terms)})
    return out


def _normal_quantile(p: float) -> float:
    from scipy.stats import norm

    return norm.ppf(p)
