"""Paired differences between agents: the same scenarios under the same user, paired bootstrap CIs.

Protocol (docs/metrics.md, agent side: "comparisons between agents are paired"): every agent plays
the same held-out scenarios with every user, and each user restarts from the same seed at every run
(:mod:`mimesis.users.reseed`). Episodes of two agents are paired by (user, scenario spec, episode
index within the scenario). For a comparison ``a − b`` under one user:

- per env, the difference of means over the paired episodes, for mean reward and success rate
  (success: :func:`~mimesis.eval.agents.stats.success_threshold`);
- its 95% CI by a **paired** percentile bootstrap over scenarios: each resample draws scenario
  indices with replacement and takes them for *both* agents (all episodes of a drawn scenario),
  so what is shared by the two arms on a scenario (its difficulty) cancels;
- overall (``env = ALL``): the unweighted mean over envs of the env differences (as the paper
  averages envs), its CI from resampling scenarios within each env, then averaging the env means;
- a plain-words verdict: ``real`` when the CI excludes 0, else ``noise``. Fewer than
  :data:`MIN_SCENARIOS` scenarios (in any env, for ``ALL``) give no CI and the verdict ``noise``:
  a bootstrap over one scenario has zero width whatever the truth, and over two it has three
  possible resample means (zero width when the two agree), so its percentiles say nothing.

Efron & Tibshirani (1993), *An Introduction to the Bootstrap*, ch. 13 (percentile interval) and
§6.9 (paired data).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mimesis.eval.agents.stats import _EPS, ALL_ENVS, success_threshold
from mimesis.rollout.records import Episode

MIN_SCENARIOS = 5
METRICS = ("mean_reward", "success_rate")


def outcome_rows(agent: str, user: str, episodes: Sequence[Episode]) -> list[dict[str, Any]]:
    """One pairing row per episode: ``agent``, ``user``, ``env``, ``scenario`` (the spec's JSON),
    ``episode`` (its index among the episodes of that scenario, in play order), ``reward``,
    ``success``."""
    seen: dict[str, int] = {}
    rows = []
    for ep in episodes:
        key = ep.spec.to_prompt()
        k = seen[key] = seen.get(key, -1) + 1
        rows.append({"agent": agent, "user": user, "env": ep.env, "scenario": key, "episode": k,
                     "reward": float(ep.reward),
                     "success": float(ep.reward >= success_threshold(ep.env) - _EPS)})
    return rows


def paired_bootstrap(a: Mapping[str, Sequence[float]], b: Mapping[str, Sequence[float]],
                     n_bootstrap: int = 1000, ci: float = 0.95, seed: int = 0
                     ) -> dict[str, tuple[float, float, float]]:
    """Mean difference ``a − b`` and its paired percentile bootstrap CI, per env and overall.

    Args:
        a: Env → one value per scenario of agent ``a`` (e.g. its mean reward on the scenario).
        b: The same for agent ``b``, scenario ``i`` paired with ``a``'s scenario ``i``.
        n_bootstrap: Resamples.
        ci: Confidence level.
        seed: Seed of the resampling.

    Returns:
        ``{env: (difference, ci_low, ci_high), ..., "ALL": (...)}``; ``ALL`` is the unweighted
        mean over envs, resampled within each env. CI bounds are NaN with fewer than
        :data:`MIN_SCENARIOS` scenarios (for ``ALL``: in some env).

    Raises:
        ValueError: different envs, or different numbers of scenarios for ``a`` and ``b``.

    >>> out = paired_bootstrap({"X": [0.2, 0.9, 0.5, 0.3, 0.7]}, {"X": [0.1, 0.8, 0.4, 0.2, 0.6]})
    >>> [round(v, 6) for v in out["X"]], [round(v, 6) for v in out["ALL"]]
    ([0.1, 0.1, 0.1], [0.1, 0.1, 0.1])
    """
    if list(a) != list(b) or not a:
        raise ValueError(f"paired envs differ or are empty: {list(a)} vs {list(b)}")
    rng = np.random.default_rng(seed)
    tail = (1 - ci) / 2 * 100
    out: dict[str, tuple[float, float, float]] = {}
    boots, complete = [], True
    for env in a:
        xa, xb = np.asarray(a[env], dtype=float), np.asarray(b[env], dtype=float)
        if xa.shape != xb.shape or xa.ndim != 1 or xa.size == 0:
            raise ValueError(f"{env}: {xa.size} vs {xb.size} paired scenarios")
        idx = rng.integers(0, xa.size, (n_bootstrap, xa.size))
        boot = xa[idx].mean(axis=1) - xb[idx].mean(axis=1)  # the same indices for both arms
        boots.append(boot)
        complete &= xa.size >= MIN_SCENARIOS
        out[env] = _interval(float(xa.mean() - xb.mean()), boot, tail, xa.size >= MIN_SCENARIOS)
    mean = float(np.mean([d for d, _, _ in out.values()]))
    out[ALL_ENVS] = _interval(mean, np.mean(boots, axis=0), tail, complete)
    return out


def _interval(diff: float, boot: np.ndarray, tail: float, enough: bool
              ) -> tuple[float, float, float]:
    if not enough:
        return diff, math.nan, math.nan
    lo, hi = np.percentile(boot, [tail, 100 - tail])
    return diff, float(lo), float(hi)


def verdict(ci_low: float, ci_high: float) -> str:
    """``real`` when the CI excludes 0, else ``noise`` (also without a CI).

    >>> verdict(0.01, 0.2), verdict(-0.1, 0.3), verdict(0.0, 0.0), verdict(math.nan, math.nan)
    ('real', 'noise', 'noise', 'noise')
    """
    if math.isnan(ci_low) or math.isnan(ci_high):
        return "noise"
    return "real" if ci_low > 0 or ci_high < 0 else "noise"


def _by_scenario(rows: Sequence[Mapping[str, Any]], agent: str, user: str
                 ) -> dict[str, dict[str, list[Mapping[str, Any]]]]:
    """Env → scenario → outcome rows (episode order), for one (agent, user)."""
    out: dict[str, dict[str, list[Mapping[str, Any]]]] = {}
    for r in sorted((r for r in rows if r["agent"] == agent and r["user"] == user),
                    key=lambda r: r["episode"]):
        out.setdefault(r["env"], {}).setdefault(r["scenario"], []).append(r)
    return out


def _pairing(cells: dict[str, dict[str, list[Mapping[str, Any]]]]) -> dict[str, set]:
    return {env: {(s, r["episode"]) for s, eps in scen.items() for r in eps}
            for env, scen in cells.items()}


def paired_differences(rows: Sequence[Mapping[str, Any]], comparisons: Sequence[Sequence[str]],
                       n_bootstrap: int = 1000, ci: float = 0.95, seed: int = 0) -> list[dict]:
    """Paired differences of every comparison ``(a, b)`` under every user (module docstring).

    Args:
        rows: :func:`outcome_rows` of every (agent, user) run.
        comparisons: ``[(a, b), …]``: each row reports ``a − b``.
        n_bootstrap / ci / seed: Of :func:`paired_bootstrap` (the same seed for every
            comparison and user).

    Returns:
        One row per (comparison, user, env), envs in play order then ``ALL``: ``a``, ``b``,
        ``user``, ``env``, ``n`` (episode pairs), ``n_scenarios``, and for each of
        ``mean_reward`` and ``success_rate``: the difference, ``<metric>_ci_low``,
        ``<metric>_ci_high``, ``<metric>_verdict`` and each arm's own value
        (``<metric>_a``, ``<metric>_b``; unweighted over envs for ``ALL``); ``mde`` and
        ``mde_worst`` of the mean reward and ``success_mde`` of the success rate
        (:func:`detectable`, at 80% power).

    Raises:
        ValueError: an agent of a comparison has no rows, or the two agents' episodes do not
            pair up (other scenarios or episode counts).
    """
    users = list(dict.fromkeys(r["user"] for r in rows))
    agents = {r["agent"] for r in rows}
    out: list[dict] = []
    for a, b in comparisons:
        missing = sorted({a, b} - agents)
        if missing:
            raise ValueError(f"comparison {a} - {b}: no episodes of {missing}")
        for user in users:
            ca, cb = _by_scenario(rows, a, user), _by_scenario(rows, b, user)
            if _pairing(ca) != _pairing(cb):
                raise ValueError(f"comparison {a} - {b} under user {user!r}: the two agents did "
                                 "not play the same scenarios and episodes")
            envs = list(ca)
            # Per scenario: the mean over its episodes, for each arm and metric.
            per = {(who, m): {e: [float(np.mean([r[field] for r in eps]))
                                  for eps in cells[e].values()] for e in envs}
                   for who, cells in (("a", ca), ("b", cb))
                   for m, field in zip(METRICS, ("reward", "success"), strict=True)}
            stats = {m: paired_bootstrap(per["a", m], per["b", m], n_bootstrap, ci, seed)
                     for m in METRICS}
            for env in [*envs, ALL_ENVS]:
                inside = envs if env == ALL_ENVS else [env]
                deltas = {e: np.subtract(per["a", "mean_reward"][e], per["b", "mean_reward"][e])
                          for e in inside}
                row: dict[str, Any] = {
                    "a": a, "b": b, "user": user, "env": env,
                    "n": sum(len(eps) for e in inside for eps in ca[e].values()),
                    "n_scenarios": sum(len(ca[e]) for e in inside)}
                for m in METRICS:
                    diff, lo, hi = stats[m][env]
                    for who in ("a", "b"):
                        row[f"{m}_{who}"] = float(np.mean([np.mean(per[who, m][e])
                                                           for e in inside]))
                    row.update({m: diff, f"{m}_ci_low": lo, f"{m}_ci_high": hi,
                                f"{m}_verdict": verdict(lo, hi)})
                row.update(detectable(deltas, 1 - ci))
                successes = {e: np.subtract(per["a", "success_rate"][e], per["b", "success_rate"][e])
                             for e in inside}
                row["success_mde"] = detectable(successes, 1 - ci)["mde"]
                out.append(row)
    return out


def detectable(deltas: Mapping[str, Sequence[float]], alpha: float = 0.05,
               power: float = 0.8) -> dict[str, float]:
    """The smallest mean-reward difference a comparison detects (:mod:`mimesis.eval.power`).

    Args:
        deltas: Env → one paired difference ``a − b`` per scenario (reward units).
        alpha / power: Of the two-sided test.

    Returns:
        ``mde`` (from the observed spread of the paired differences; an env with one scenario
        counts at the worst case) and ``mde_worst`` (any spread a [0, 1] reward allows), both at
        ``power`` and level ``alpha``.
    """
    from mimesis.eval.power import mde, paired_se, worst_case_mde

    se, df = paired_se(deltas)
    return {"mde": mde(se, df, alpha, power),
            "mde_worst": worst_case_mde({e: len(d) for e, d in deltas.items()}, alpha, power)}


def diff_metrics(diffs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The numbers of :func:`paired_differences` rows for ``metrics.json`` (and so MLflow):
    ``{"<a>-<b>": {user: {env: {n, n_scenarios, mde, mde_worst, success_mde, mean_reward, mean_reward_ci_low,
    mean_reward_ci_high, success_rate, success_rate_ci_low, success_rate_ci_high}}}}``."""
    out: dict[str, Any] = {}
    keys = ("n", "n_scenarios", "mde", "mde_worst", "success_mde",
            *(f"{m}{s}" for m in METRICS for s in ("", "_ci_low", "_ci_high")))
    for d in diffs:
        out.setdefault(f"{d['a']}-{d['b']}", {}).setdefault(d["user"], {})[d["env"]] = {
            k: d[k] for k in keys}
    return out


UNSEEN_MEAN = "unseen mean"


def unseen_mean_rows(rows: Sequence[Mapping[str, Any]], users: Sequence[str]
                     ) -> list[dict[str, Any]]:
    """Outcome rows of a pseudo-user ``unseen mean``: per (agent, env, scenario, episode), the
    mean reward and success over ``users``.

    Every user plays the same scenarios with the same episode indices, so averaging over users
    keeps the pairing by scenario: :func:`paired_differences` of these rows is the paired
    difference of the users' mean, with its bootstrap CI over scenarios (the users' outcomes on
    one scenario move together in each resample, as they are not independent).

    Args:
        rows: :func:`outcome_rows` of every (agent, user) run.
        users: The users to average (at least 2; the training user and any user an arm trained
            against are left out by the caller).

    Returns:
        Rows with ``user`` = :data:`UNSEEN_MEAN`; only (agent, env, scenario, episode) keys that
        every one of ``users`` played.

    Raises:
        ValueError: fewer than 2 users, or a user with no rows.

    >>> r = [{"agent": "x", "user": u, "env": "E", "scenario": "s", "episode": 0,
    ...       "reward": v, "success": v} for u, v in (("p", 1.0), ("q", 0.0))]
    >>> unseen_mean_rows(r, ["p", "q"])[0]["success"]
    0.5
    """
    users = list(dict.fromkeys(users))
    if len(users) < 2:
        raise ValueError(f"an unseen-user mean needs at least 2 users, got {users}")
    missing = sorted(set(users) - {r["user"] for r in rows})
    if missing:
        raise ValueError(f"no outcome rows for users {missing}")
    cells: dict[tuple, dict[str, Mapping[str, Any]]] = {}
    for r in rows:
        if r["user"] in users:
            cells.setdefault((r["agent"], r["env"], r["scenario"], r["episode"]), {})[r["user"]] = r
    out = []
    for (agent, env, scenario, episode), by_user in cells.items():
        if len(by_user) == len(users):
            out.append({"agent": agent, "user": UNSEEN_MEAN, "env": env, "scenario": scenario,
                        "episode": episode,
                        "reward": float(np.mean([r["reward"] for r in by_user.values()])),
                        "success": float(np.mean([r["success"] for r in by_user.values()]))})
    return out
