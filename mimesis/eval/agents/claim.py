"""The claim table: the paired comparisons of the agent arms over envs, the mechanism behind them
(elicitation per agent × user, the training-reward trend per arm) and what the run can detect.

Protocol: docs/claim.md (the `claim` profile). Inputs are already computed elsewhere:
:func:`~mimesis.eval.agents.pairs.paired_differences` rows (with the ``unseen mean`` pseudo-user
of :func:`~mimesis.eval.agents.pairs.unseen_mean_rows`), :func:`~mimesis.eval.agents.elicitation.
elicitation_table` rows and :func:`~mimesis.eval.agents.reward_trend.reward_trend` results read from each
``train_agent`` arm's ``meta.json``. This module only renders them (Markdown for ``agents.md``,
and the MLflow text artifact ``claim.md``) and flattens the numbers for ``metrics.json``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from mimesis.eval.agents.elicitation import METRICS as ELICITATION_METRICS
from mimesis.eval.agents.elicitation import elicitation_markdown
from mimesis.eval.agents.pairs import UNSEEN_MEAN
from mimesis.eval.agents.reward_trend import trend_markdown
from mimesis.eval.agents.stats import ALL_ENVS
from mimesis.eval.agents.tables import ci_text, mde_text

# Section title by evaluate_agents.agents.purpose: only the claim profile's run is the experiment.
CLAIM_TITLES = {"claim": "The claim: agents under users they never met",
                "smoke": "Users never met, and the mechanism (smoke-sized: machinery only)"}


def _f(value: Any, digits: int = 3, signed: bool = True) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def _ci(d: Mapping[str, Any], metric: str) -> str:
    return ci_text(d.get(f"{metric}_ci_low"), d.get(f"{metric}_ci_high"), d, signed=True)


def claim_rows(diffs: Sequence[Mapping[str, Any]], training_user: str = "frozen"
               ) -> list[Mapping[str, Any]]:
    """The over-envs (``ALL``) comparison rows the claim table shows: every unseen user, then the
    ``unseen mean``; the training user's rows are left out (the claim is about unseen users)."""
    rows = [d for d in diffs if d["env"] == ALL_ENVS and d["user"] != training_user]
    return sorted(rows, key=lambda d: (d["a"], d["b"], d["user"] == UNSEEN_MEAN))


def claim_markdown(diffs: Sequence[Mapping[str, Any]],
                   elicitation: Sequence[Mapping[str, Any]],
                   trends: Mapping[str, Mapping[str, Any] | None],
                   users_in_mean: Sequence[str], training_user: str = "frozen",
                   title: str = CLAIM_TITLES["claim"]) -> str:
    """Markdown of the claim: comparisons, mechanism, detectability (module docstring).

    Args:
        diffs: :func:`~mimesis.eval.agents.pairs.paired_differences` rows, ``unseen mean``
            included.
        elicitation: :func:`~mimesis.eval.agents.elicitation.elicitation_table` rows (over envs).
        trends: Arm → its ``reward_trend`` (``None`` when the arm had too few steps).
        users_in_mean: The unseen users the ``unseen mean`` averages.
        training_user: The frozen simulator's user name (its rows are not shown here).
        title: The section's heading (:data:`CLAIM_TITLES`).

    Returns:
        Markdown with three sections; success is the primary measure (docs/claim.md).
    """
    head = ["a − b", "user", "scenarios (episode pairs)", "Δ success", "95% CI", "verdict",
            "MDE (success)", "Δ reward", "95% CI", "verdict"]
    lines = [f"## {title}", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for d in claim_rows(diffs, training_user):
        own = d.get("trained_against_user") or []
        user = d["user"] + (f" († {', '.join(own)})" if own else "")
        if d["user"] == UNSEEN_MEAN:
            user = f"**{UNSEEN_MEAN}** ({', '.join(users_in_mean)})"
        lines.append("| " + " | ".join([
            f"{d['a']} − {d['b']}", user, f"{d['n_scenarios']} ({d['n']})",
            _f(d["success_rate"]), _ci(d, "success_rate"), d["success_rate_verdict"],
            mde_text(d, "success_mde"), _f(d["mean_reward"]),
            _ci(d, "mean_reward"), d["mean_reward_verdict"]]) + " |")
    lines += ["", ("Paired by scenario and episode seed; 95% percentile bootstrap over scenarios. "
                   "Verdict: real when the CI excludes 0, else noise. MDE: the smallest Δ "
                   "success detectable at 80% power (two-sided, 5%) from the spread observed "
                   "here (docs/claim.md gives the one computed before the run)."), "",
              "### Mechanism: does the agent ask, and what does the user reveal?", "",
              elicitation_markdown(elicitation), "",
              ("ask_rate: share of episodes with a question before the first answer; "
               "elicited_fraction: hidden preferences some user reply stated (TravelGym); "
               "asked_only_fraction: the same for preferences told only when asked. "
               "Means over scenarios [95% bootstrap CI]."), ""]
    known = {arm: t for arm, t in trends.items() if t}
    lines += ["### Training reward: last quarter of GRPO steps − first quarter", ""]
    if known:
        lines += [trend_markdown(known), ""]
    missing = sorted(set(trends) - set(known))
    if missing:
        lines += [f"No trend for {', '.join(missing)} (fewer than 2 training steps).", ""]
    return "\n".join(lines)


def claim_metrics(elicitation: Sequence[Mapping[str, Any]],
                  trends: Mapping[str, Mapping[str, Any] | None]) -> dict[str, Any]:
    """``{"elicitation": {agent: {user: {metric: value}}}, "reward_trend": {arm: {diff,
    ci_low, ci_high}}}`` for ``metrics.json`` (and so MLflow); NaN and missing values left
    out."""
    out: dict[str, Any] = {"elicitation": {}, "reward_trend": {}}
    for r in elicitation:
        cell = out["elicitation"].setdefault(r["agent"], {}).setdefault(r["user"], {})
        for name in ELICITATION_METRICS:
            value = r.get(name)
            if value is not None and not math.isnan(value):
                cell[name] = float(value)
    for arm, t in trends.items():
        if t:
            out["reward_trend"][arm] = {k: t[k] for k in ("diff", "ci_low", "ci_high")
                                        if t.get(k) is not None}
    return out
