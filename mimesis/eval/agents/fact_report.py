"""The fact-reveal check's numbers and report: per (user, split, env) reveal and false-end rates
with bootstrap CIs over tasks, the means over envs, ``fact_reveal.md`` and the metrics.json part
(the check itself, its probes and users: :mod:`mimesis.eval.agents.fact_reveal`).

Rows are :func:`~mimesis.eval.agents.fact_reveal.play`'s: ``env``, ``split``, ``task_id``,
``kind``, ``truth``, ``question``, ``reply``, ``revealed``, ``ended``, ``end_reason`` …
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from mimesis.eval.agents.stats import bootstrap_ci

if TYPE_CHECKING:
    from mimesis.eval.agents.fact_reveal import FactRevealParams

SPLITS = ("heldout", "train")  # report order: held-out first


def _ended(row: Mapping[str, Any]) -> bool:
    """Whether the user ended the episode at this probe (rows without ``ended``, written before
    the runtime state was recorded: no reply was sent)."""
    return bool(row.get("ended", not row.get("reply")))


def summarize(rows: Sequence[Mapping[str, Any]], n_bootstrap: int = 1000, n_examples: int = 3,
              seed: int = 0) -> dict[str, Any]:
    """One user's rows of one env and split summarized.

    Returns:
        ``rate`` (share of probes revealed, 0..1), ``n`` (probes), ``n_tasks``, ``ci_low`` /
        ``ci_high`` (percentile bootstrap 95% CI of the mean of the per-task rates,
        :func:`~mimesis.eval.agents.stats.bootstrap_ci`), ``false_end`` (share of probes after
        which the user's state was ended: it left instead of answering) with
        ``false_end_ci_low`` / ``false_end_ci_high`` (the same bootstrap over tasks),
        ``end_reasons`` (false ends counted by the runtime's ``end_reason``), ``by_kind``
        (reveal rate per fact kind) and ``examples`` (replies, hits first). NaN rates for no
        rows.

    >>> s = summarize([{"task_id": "a", "kind": "k", "revealed": True, "reply": "x"},
    ...                {"task_id": "b", "kind": "k", "revealed": False, "reply": "",
    ...                 "ended": True, "end_reason": "end_signal"}])
    >>> s["rate"], s["n"], s["n_tasks"], s["false_end"], s["end_reasons"]
    (0.5, 2, 2, 0.5, {'end_signal': 1})
    """
    by_task: dict[str, list[float]] = defaultdict(list)
    ends_by_task: dict[str, list[float]] = defaultdict(list)
    by_kind: dict[str, list[float]] = defaultdict(list)
    reasons: dict[str, int] = defaultdict(int)
    for r in rows:
        by_task[r["task_id"]].append(float(r["revealed"]))
        ends_by_task[r["task_id"]].append(float(_ended(r)))
        by_kind[r["kind"]].append(float(r["revealed"]))
        if _ended(r):
            reasons[str(r.get("end_reason"))] += 1
    lo, hi = bootstrap_ci([float(np.mean(v)) for v in by_task.values()], n_bootstrap, seed=seed)
    end_lo, end_hi = bootstrap_ci([float(np.mean(v)) for v in ends_by_task.values()],
                                  n_bootstrap, seed=seed)
    hits = [r for r in rows if r["revealed"]][: (n_examples + 1) // 2]
    misses = [r for r in rows if not r["revealed"]][: n_examples - len(hits)]
    nan = float("nan")
    return {"rate": float(np.mean([r["revealed"] for r in rows])) if rows else nan,
            "n": len(rows), "n_tasks": len(by_task), "ci_low": lo, "ci_high": hi,
            "false_end": float(np.mean([_ended(r) for r in rows])) if rows else nan,
            "false_end_ci_low": end_lo, "false_end_ci_high": end_hi,
            "end_reasons": dict(sorted(reasons.items())),
            "by_kind": {k: float(np.mean(v)) for k, v in by_kind.items()},
            "examples": [{k: r.get(k, "") for k in ("question", "truth", "reply", "revealed")}
                         for r in hits + misses]}


def mean_over_envs(rows: Sequence[Mapping[str, Any]], key: str = "revealed",
                   n_bootstrap: int = 1000, seed: int = 0) -> dict[str, float]:
    """Mean over envs of one user's per-env rates of ``key`` (``revealed`` or ``ended``), with a
    percentile bootstrap 95% CI that resamples tasks within each env (envs are fixed: the
    training envs are the population, their tasks the sample). An env's rate is the mean of its
    per-task rates (every task of an env is asked in as many phrasings, so this is its share of
    probes too).

    Returns:
        ``{"mean", "ci_low", "ci_high", "n", "n_envs"}`` (``n``: probes); NaN for no rows.

    Source: stratified percentile bootstrap (Efron & Tibshirani 1993, ch. 13; strata = envs).

    >>> rows = [{"env": "a", "task_id": "1", "revealed": True},
    ...         {"env": "b", "task_id": "2", "revealed": False}]
    >>> mean_over_envs(rows, n_bootstrap=10)["mean"]
    0.5
    """
    per_env: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        value = _ended(r) if key == "ended" else r[key]
        per_env[r["env"]][r["task_id"]].append(float(value))
    tasks = {e: np.array([np.mean(v) for v in t.values()]) for e, t in per_env.items()}
    if not tasks:
        return {"mean": float("nan"), "ci_low": float("nan"), "ci_high": float("nan"),
                "n": 0, "n_envs": 0}
    mean = float(np.mean([t.mean() for t in tasks.values()]))
    rng = np.random.default_rng(seed)
    draws = np.mean([t[rng.integers(0, len(t), (n_bootstrap, len(t)))].mean(axis=1)
                     for t in tasks.values()], axis=0)
    lo, hi = np.percentile(draws, [2.5, 97.5])
    return {"mean": mean, "ci_low": float(lo), "ci_high": float(hi), "n": len(rows),
            "n_envs": len(tasks)}


def ordered_splits(splits: Sequence[str]) -> list[str]:
    """``splits`` in report order, held-out first.

    >>> ordered_splits(["train", "heldout"])
    ['heldout', 'train']
    """
    return [s for s in SPLITS if s in splits]


def user_results(rows: Sequence[Mapping[str, Any]], p: FactRevealParams) -> dict[str, Any]:
    """One user's rows summarized: ``{split: {env: summarize(...), "mean": {...}}}``, the mean
    over envs of the reveal rate, with the false-end rate's under ``mean["false_end"]``."""
    out: dict[str, Any] = {}
    for split in ordered_splits(p.splits):
        mine = [r for r in rows if r["split"] == split]
        out[split] = {env: summarize([r for r in mine if r["env"] == env], p.n_bootstrap,
                                     p.examples) for env in p.envs}
        out[split]["mean"] = {**mean_over_envs(mine, "revealed", p.n_bootstrap),
                              "false_end": mean_over_envs(mine, "ended", p.n_bootstrap)}
    return out


METRIC_KEYS = ("rate", "n", "n_tasks", "ci_low", "ci_high", "false_end", "false_end_ci_low",
               "false_end_ci_high", "end_reasons")


def metrics_of(results: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """The metrics.json part of :func:`user_results` of every user: per env
    :data:`METRIC_KEYS` (no examples, no per-kind rates), the means whole."""
    return {u: {split: {e: (dict(c) if e == "mean" else {k: c[k] for k in METRIC_KEYS})
                        for e, c in envs.items()} for split, envs in splits.items()}
            for u, splits in results.items()}


def markdown(results: Mapping[str, Mapping[str, Mapping[str, Any]]], p: FactRevealParams) -> str:
    """Per split (held-out first): the env × user reveal table (rate, 95% CI over tasks, n), the
    false-end table, each with the mean over envs; the false ends by end reason; example
    replies."""
    users = list(results)
    splits = ordered_splits(p.splits)
    titles = {"heldout": "Held-out tasks (the tasks agents are evaluated on)",
              "train": "Training-part tasks (never in the grounding dialogues)"}
    lines = ["# Fact reveal: does the user state its hidden fact when asked?", "",
             (f"Up to {p.n_tasks} tasks per env and split, one fact each, {p.phrasings} "
              "phrasings (3 where a held-out list is shorter); revealed = the env's parser "
              "extracts the right fact from the reply. False end = the user ended the episode "
              "right after the question instead of answering. Cells: rate [95% bootstrap CI "
              "over tasks] (n probes); mean: over the envs, tasks resampled within each env."),
             ""]

    def cell(rate: float, lo: float, hi: float, n: int) -> str:
        return f"{rate:.0%} [{lo:.0%}, {hi:.0%}] ({n})"

    for split in splits:
        for what, key in (("revealed", "rate"), ("false end", "false_end")):
            low, high = ("ci_low", "ci_high") if key == "rate" else (f"{key}_ci_low",
                                                                     f"{key}_ci_high")
            lines += [f"## {titles[split]}: {what}", "",
                      "| env | " + " | ".join(users) + " |", "|---|" + "---|" * len(users)]
            for env in p.envs:
                cells = [results[u][split][env] for u in users]
                lines.append(f"| {env} | " + " | ".join(
                    cell(c[key], c[low], c[high], c["n"]) for c in cells) + " |")
            means = [results[u][split]["mean"] for u in users]
            means = [m if key == "rate" else m["false_end"] for m in means]
            lines.append("| **mean over envs** | " + " | ".join(
                cell(m["mean"], m["ci_low"], m["ci_high"], m["n"]) for m in means) + " |")
            lines.append("")
        ends = [f"{u} / {env}: " + ", ".join(f"{reason} {k}" for reason, k in sorted(
                    results[u][split][env]["end_reasons"].items()))
                for u in users for env in p.envs if results[u][split][env]["end_reasons"]]
        lines += [f"False ends by end reason ({split}): " + ("; ".join(ends) or "none") + ".", ""]
    lines += [("TurtleGym asks one yes and one no question in turn: a user that always says "
               "yes scores about 50% there."), "", "## Examples", ""]
    for u in users:
        for split in splits:
            for env in p.envs:
                for ex in results[u][split][env]["examples"]:
                    reply = " ".join(ex["reply"].split())[:160] or "(no reply: the user ended)"
                    lines.append(f"- **{u} / {split} / {env}** {'✓' if ex['revealed'] else '✗'} "
                                 f"Q: {ex['question'][:100]} — truth: {ex['truth'][:60]} — "
                                 f"A: {reply}")
    return "\n".join(lines) + "\n"
