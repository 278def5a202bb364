"""Agent evaluation statistics: success per env, bootstrap CIs, and the ``ALL`` row over envs.

Success (:data:`SUCCESS_THRESHOLDS`): an episode succeeds when its reward is at least its env's
threshold, which marks the full task done: FunctionGym 1.0 (the answer is right; the reward is 0
or 1), TravelGym 1.0 (the best option for every aspect; acceptable options score 0.5), TelepathyGym
0.5 (the guess is right; a right guess scores 1 − 0.5·turns/max_turns ≥ 0.5). Unknown envs:
:data:`DEFAULT_SUCCESS_THRESHOLD` = 1.0 (full reward).

Uncertainty: per (agent, simulator, env) a seeded percentile bootstrap 95% CI of the mean (episodes
resampled); the ``ALL`` row (unweighted mean over envs, as the paper reports) uses the normal
approximation ``± z·sqrt(Σ s_e²/n_e)/E``. ``reward_std`` is the sample standard deviation.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mimesis.rl.records import Episode

SUCCESS_THRESHOLDS = {"FunctionGym": 1.0, "TravelGym": 1.0, "TelepathyGym": 0.5}
DEFAULT_SUCCESS_THRESHOLD = 1.0
TERMINATIONS = ("answer", "finish", "user_end", "max_turns", "max_tokens")
ALL_ENVS = "ALL"
_EPS = 1e-9  # rewards are sums of floats: 0.1 + 0.2 must count as 0.3


# ----------------------------------------------------------------------------- aggregation
def success_threshold(env: str) -> float:
    """Reward at or above which an episode of ``env`` counts as a success (module docstring)."""
    return SUCCESS_THRESHOLDS.get(env, DEFAULT_SUCCESS_THRESHOLD)


def bootstrap_ci(values: Sequence[float], n_bootstrap: int = 1000, ci: float = 0.95,
                 seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean of ``values`` (seeded; ``(v, v)`` for one value).

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
    means = x[np.random.default_rng(seed).integers(0, x.size, (n_bootstrap, x.size))].mean(axis=1)
    tail = (1 - ci) / 2 * 100
    lo, hi = np.percentile(means, [tail, 100 - tail])
    return float(lo), float(hi)


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
    (agent messages per episode), ``mean_user_turns`` (user messages the agent received; an
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
        mean = {key: float(np.mean([c[key] for c in cells]))
                for key in ("mean_reward", "success_rate", "mean_turns", "mean_user_turns")}
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
