"""Agent evaluation report: the Markdown tables and the plots of the evaluation rows.

Split from :mod:`mimesis.eval.agents.evaluate` (held-out scenarios, aggregation, the evaluation run and
agent loading), whose :func:`~mimesis.eval.agents.evaluate.evaluate_agents` rows these render:
:func:`agent_table_markdown` (``agents.md``) and :func:`agent_plot` (``plots/agents.png``); and
the paired differences of :func:`~mimesis.eval.agents.pairs.paired_differences`:
:func:`comparison_table_markdown` (the second part of ``agents.md``) and :func:`diff_plot`
(``plots/agent_diffs.png``); all written by :mod:`mimesis.eval.agents.run`. ``ALL`` rows
(:func:`~mimesis.eval.agents.evaluate.overall_rows`) are computed when absent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mimesis.envs.registry import success_thresholds
from mimesis.eval.agents.pairs import MIN_SCENARIOS
from mimesis.eval.agents.stats import ALL_ENVS, TERMINATIONS, overall_rows


# ----------------------------------------------------------------------------- report
def _f(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.{digits}f}"


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and not math.isfinite(value))


def ci_text(lo: Any, hi: Any, row: Mapping[str, Any], digits: int = 3, signed: bool = False
            ) -> str:
    """A ``[lo, hi]`` cell, or why there is no interval, in words (never ``[–, –]``).

    A paired comparison gets no bootstrap CI when an env of it has fewer than
    :data:`~mimesis.eval.agents.pairs.MIN_SCENARIOS` scenarios; a per-env row, when it has no
    episode. ``row`` supplies ``n_scenarios`` (comparisons) or ``n`` (episodes).
    """
    if not (_missing(lo) or _missing(hi)):
        fmt = f"{{:{'+' if signed else ''}.{digits}f}}"
        return f"[{fmt.format(lo)}, {fmt.format(hi)}]"
    if "n_scenarios" in row:
        where = "an env" if row.get("env") == ALL_ENVS else "this env"
        return f"no CI: fewer than {MIN_SCENARIOS} scenarios in {where}"
    return "no CI: no episodes" if not row.get("n") else "no CI"


def mde_text(row: Mapping[str, Any], key: str = "mde", digits: int = 2) -> str:
    """A minimum-detectable-effect cell, or why the run gives none, in words (never ``0.00``).

    The MDE is sized from the spread of the paired differences (:mod:`mimesis.eval.power`): all
    of them equal gives a spread of 0, which does not mean any effect would be detected, only
    that this run cannot size one; then the worst case over every spread a [0, 1] outcome allows
    (``mde_worst``) is the bound that holds.
    """
    value, worst = row.get(key), row.get("mde_worst")
    bound = "" if _missing(worst) else f"; at most {worst:.{digits}f} whatever the spread"
    if _missing(value):
        return f"n/a: too few scenarios to size it{bound}"
    if value <= 0:
        return f"n/a: every paired difference was equal, no spread to size it{bound}"
    return f"{value:.{digits}f}"


def agent_table_markdown(rows: Sequence[Mapping[str, Any]], training: str | None = None,
                         trained_against: Mapping[str, Sequence[str]] | None = None) -> str:
    """Markdown: mean reward over envs (``ALL`` rows) as agent × user, then every row.

    Args:
        rows: :func:`evaluate_agents` rows (``ALL`` rows are computed when absent).
        training: Name of the training simulator; adds a column "mean over unseen users"
            (unweighted mean of the other users' ``ALL`` rewards).
        trained_against: Agent → the listed users it trained against
            (:func:`~mimesis.eval.agents.arms.seen_users`): those cells are marked † and left
            out of that agent's unseen mean, which is then over fewer users.
    """
    seen = {a: set(users) for a, users in (trained_against or {}).items()}
    rows = list(rows)
    if not any(r["env"] == ALL_ENVS for r in rows):
        rows += overall_rows(rows)
    agents = list(dict.fromkeys(r["agent"] for r in rows))
    sims = list(dict.fromkeys(r["simulator"] for r in rows))
    overall = {(r["agent"], r["simulator"]): r for r in rows if r["env"] == ALL_ENVS}
    unseen = [s for s in sims if s != training] if training in sims else []
    head = ["agent", *[f"{s} (training)" if s == training else s for s in sims]]
    head += ["mean over unseen users"] if unseen else []
    lines = ["## Mean reward over environments (unweighted), by agent and user", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for a in agents:
        cells = [(_f(overall[a, s]["mean_reward"]) + (" †" if s in seen.get(a, ()) else ""))
                 if (a, s) in overall else "–" for s in sims]
        if unseen:
            vals = [overall[a, s]["mean_reward"] for s in unseen
                    if (a, s) in overall and s not in seen.get(a, ())]
            cells.append(_f(float(np.mean(vals))) if vals else "–")
        lines.append("| " + " | ".join([a, *cells]) + " |")
    if any(seen.get(a) for a in agents):
        lines += ["", ("† the agent trained against this user (e.g. the prompted control "
                       "against the prompted model): not unseen for it, so left out of its "
                       "unseen mean.")]
    head = ["agent", "user", "env", "n", "success", "success 95% CI", "mean reward",
            "reward 95% CI", "agent turns", "format", "ends " + "/".join(TERMINATIONS)]
    lines += ["", "## Per environment", "",
              "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        ends = r.get("terminations", {})
        lines.append("| " + " | ".join([
            r["agent"], r["simulator"], r["env"], str(r["n"]), _f(r["success_rate"]),
            ci_text(r["success_ci_low"], r["success_ci_high"], r), _f(r["mean_reward"]),
            ci_text(r["reward_ci_low"], r["reward_ci_high"], r), _f(r["mean_turns"], 2),
            _f(r.get("format_compliance"), 2),
            "/".join(str(ends.get(t, 0)) for t in TERMINATIONS)]) + " |")
    thresholds = ", ".join(f"{e} ≥ {t:g}" for e, t in success_thresholds().items())
    lines += ["", (f"Success: reward {thresholds}. CIs: bootstrap per env, normal approximation "
                   "for ALL. Format: share of agent turns that were a tagged action.")]
    return "\n".join(lines) + "\n"


def _diff_cell(d: Mapping[str, Any], metric: str) -> list[str]:
    return [_f(d[metric]), ci_text(d[f"{metric}_ci_low"], d[f"{metric}_ci_high"], d),
            d[f"{metric}_verdict"]]


def detectability_note(diffs: Sequence[Mapping[str, Any]], purpose: str = "smoke") -> str:
    """One paragraph: what the comparisons of this run can detect (n, MDE at 80% power).

    Args:
        diffs: :func:`~mimesis.eval.agents.pairs.paired_differences` rows (their ``ALL`` rows).
        purpose: ``smoke`` says the comparisons are a smoke test of the machinery; ``claim``
            states the same figures as the experiment's.

    Returns:
        Markdown, one paragraph; empty when there is no comparison.
    """
    overall = [d for d in diffs if d["env"] == ALL_ENVS]
    if not overall:
        return ""
    ns = sorted({d["n_scenarios"] for d in overall})
    eps = sorted({d["n"] for d in overall})
    worst = max(d["mde_worst"] for d in overall)
    n_txt = "/".join(map(str, ns))
    sizes = (f"each comparison pairs n = {n_txt} scenarios ({'/'.join(map(str, eps))} episode "
             f"pairs) under each user; the smallest difference it detects at 80% power "
             f"(two-sided, 5%) is, in mean reward, {_mde_range(overall, 'mde')}, and "
             f"{worst:.2f} whatever the spread")
    if worst >= 1:
        sizes += (" (beyond the whole [0, 1] reward range: at this n no difference is sure to "
                  "be detected)")
    if any(math.isfinite(d.get("success_mde", math.nan)) for d in overall):
        sizes += f"; in success rate, {_mde_range(overall, 'success_mde')}"
    if purpose == "smoke":
        return (f"**Smoke test of the machinery, not a test of the agent claim:** {sizes}. "
                "Differences smaller than that read as noise; the `claim` profile is sized for "
                "the claim (docs/claim.md).")
    return f"**Detectable effects:** {sizes}."


def _mde_range(rows: Sequence[Mapping[str, Any]], key: str) -> str:
    """``0.12–0.31 from the spread observed here``, or why the spread gives none."""
    observed = [d[key] for d in rows if math.isfinite(d.get(key, math.nan))]
    if not observed:
        return "not estimable (too few scenarios)"
    if max(observed) == 0:
        return "not estimable from this run (every paired difference was the same: no spread)"
    return f"{min(observed):.2f}–{max(observed):.2f} from the spread observed here"


def comparison_table_markdown(diffs: Sequence[Mapping[str, Any]]) -> str:
    """Markdown: the paired differences (:func:`~mimesis.eval.agents.pairs.paired_differences`
    rows), over envs first (``ALL``), then per env."""
    head = ["a − b", "user", "env", "n", "Δ mean reward", "95% CI", "verdict", "MDE",
            "Δ success", "95% CI", "verdict"]

    def user(d: Mapping[str, Any]) -> str:
        own = d.get("trained_against_user") or []
        return d["user"] + (f" († {', '.join(own)})" if own else "")

    def table(rows: list[Mapping[str, Any]]) -> list[str]:
        return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head), *(
            "| " + " | ".join([f"{d['a']} − {d['b']}", user(d), d["env"], str(d["n"]),
                               *_diff_cell(d, "mean_reward"), mde_text(d),
                               *_diff_cell(d, "success_rate")])
            + " |" for d in rows)]

    lines = ["## Paired differences between agents (same scenarios, same user seeds)", "",
             *table([d for d in diffs if d["env"] == ALL_ENVS]), "", "### Per environment", "",
             *table([d for d in diffs if d["env"] != ALL_ENVS])]
    lines += ["", ("Paired bootstrap over scenarios (the same resampled scenarios for both "
                   "agents; ALL: resampled within each env, env means averaged). Verdict: real "
                   "when the 95% CI excludes 0, else noise (also with fewer than 2 scenarios: "
                   "no CI). MDE: the smallest Δ mean reward detectable at 80% power from the "
                   "observed spread of the paired differences (docs/metrics.md).")]
    if any(d.get("trained_against_user") for d in diffs):
        lines += ["", ("user († agent): that agent trained against this user, so the pair is "
                       "not compared under an unseen user there.")]
    return "\n".join(lines) + "\n"


def diff_plot(diffs: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """Paired differences over envs (``ALL``) with their 95% CIs: one panel per user, one row
    per comparison, mean reward and success rate; written as PNG to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [d for d in diffs if d["env"] == ALL_ENVS]
    users = list(dict.fromkeys(d["user"] for d in rows)) or ["(none)"]
    pairs = list(dict.fromkeys((d["a"], d["b"]) for d in rows))
    cell = {(d["a"], d["b"], d["user"]): d for d in rows}
    ncols = min(3, len(users))
    nrows = math.ceil(len(users) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols + 0.8, 0.5 * len(pairs) * nrows
                                                     + 1.6 * nrows), squeeze=False, sharex=True)
    y = np.arange(len(pairs))
    for k, user in enumerate(users):
        ax = axes[k // ncols][k % ncols]
        for j, (metric, label) in enumerate((("mean_reward", "mean reward"),
                                             ("success_rate", "success rate"))):
            got = [cell.get((a, b, user)) for a, b in pairs]
            mid = np.array([g[metric] if g else np.nan for g in got], dtype=float)
            lo = np.array([g[f"{metric}_ci_low"] if g else np.nan for g in got], dtype=float)
            hi = np.array([g[f"{metric}_ci_high"] if g else np.nan for g in got], dtype=float)
            err = np.nan_to_num(np.vstack([mid - lo, hi - mid]).clip(min=0))
            ax.errorbar(mid, y + (j - 0.5) * 0.25, xerr=err, fmt="o", capsize=3, color=f"C{j}",
                        label=label)
        ax.axvline(0, color="0.4", lw=0.8)
        ax.set_yticks(y, [f"{a} − {b}" for a, b in pairs], fontsize=8)
        ax.set_ylim(len(pairs) - 0.5, -0.5)  # first comparison on top
        ax.set_xlabel("difference a − b", fontsize=8)
        ax.set_title(f"user: {user}", fontsize=10)
        ax.grid(axis="x", alpha=0.3)
    axes[0][0].legend(fontsize=7, loc="best")
    return _save_panels(fig, axes, len(users),
                        "Paired differences over environments (95% paired bootstrap CI)", path)


def agent_plot(rows: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """Grouped bars of mean reward (95% CI whiskers) per env, one bar per agent, one panel per
    user simulator; written as PNG to ``path``."""
    import matplotlib

    matplotlib.use("Agg")  # headless: stages run under dvc/Prefect without a display
    import matplotlib.pyplot as plt

    rows = list(rows)
    if not any(r["env"] == ALL_ENVS for r in rows):
        rows += overall_rows(rows)
    agents = list(dict.fromkeys(r["agent"] for r in rows))
    sims = list(dict.fromkeys(r["simulator"] for r in rows))
    envs = list(dict.fromkeys(r["env"] for r in rows if r["env"] != ALL_ENVS)) + [ALL_ENVS]
    cell = {(r["agent"], r["simulator"], r["env"]): r for r in rows}
    ncols = min(3, len(sims))
    nrows = math.ceil(len(sims) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols + 0.6, 3.4 * nrows),
                             squeeze=False, sharey=True)
    width = 0.8 / len(agents)
    x = np.arange(len(envs))
    top = max([1.0, *(r.get("reward_ci_high") or 0.0 for r in rows)])
    for k, sim in enumerate(sims):
        ax = axes[k // ncols][k % ncols]
        for j, agent in enumerate(agents):
            got = [cell.get((agent, sim, e)) for e in envs]
            means = [g["mean_reward"] if g else np.nan for g in got]
            err = np.array([[max(0.0, g["mean_reward"] - g["reward_ci_low"]),
                             max(0.0, g["reward_ci_high"] - g["mean_reward"])] if g else [0, 0]
                            for g in got]).T
            ax.bar(x + (j - (len(agents) - 1) / 2) * width, means, width, yerr=err, capsize=2,
                   label=agent, color=f"C{j}")
        ax.set_title(f"user: {sim}", fontsize=10)
        ax.set_xticks(x, envs, rotation=20, fontsize=8)
        ax.set_ylim(0, top * 1.05)
        ax.grid(axis="y", alpha=0.3)
        if k % ncols == 0:
            ax.set_ylabel("mean reward")
    axes[0][0].legend(fontsize=8, title="agent", title_fontsize=8)
    return _save_panels(fig, axes, len(sims), "Agents on held-out scenarios (95% CI)", path)


def _save_panels(fig, axes, used: int, title: str, path: Path) -> Path:
    """Blank the panels after the first ``used``, title the figure, write it as PNG, close it."""
    import matplotlib.pyplot as plt

    ncols = len(axes[0])
    for k in range(used, len(axes) * ncols):
        axes[k // ncols][k % ncols].axis("off")
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
