"""Agent evaluation report: the Markdown table and the bar plot of the evaluation rows.

Split from :mod:`mimesis.eval.agents` (held-out scenarios, aggregation, the evaluation run and
agent loading), whose :func:`~mimesis.eval.agents.evaluate_agents` rows these render:
:func:`agent_table_markdown` (``agents.md``) and :func:`agent_plot` (``plots/agents.png``), both
written by :mod:`mimesis.eval.agent_run`. ``ALL`` rows
(:func:`~mimesis.eval.agents.overall_rows`) are computed when absent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mimesis.eval.agent_stats import (
    ALL_ENVS,
    DEFAULT_SUCCESS_THRESHOLD,
    SUCCESS_THRESHOLDS,
    TERMINATIONS,
    overall_rows,
)


# ----------------------------------------------------------------------------- report
def _f(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.{digits}f}"


def agent_table_markdown(rows: Sequence[Mapping[str, Any]], training: str | None = None) -> str:
    """Markdown: mean reward over envs (``ALL`` rows) as agent × user, then every row.

    Args:
        rows: :func:`evaluate_agents` rows (``ALL`` rows are computed when absent).
        training: Name of the training simulator; adds a column "mean over unseen users"
            (unweighted mean of the other users' ``ALL`` rewards).
    """
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
        cells = [_f(overall[a, s]["mean_reward"]) if (a, s) in overall else "–" for s in sims]
        if unseen:
            vals = [overall[a, s]["mean_reward"] for s in unseen if (a, s) in overall]
            cells.append(_f(float(np.mean(vals))) if vals else "–")
        lines.append("| " + " | ".join([a, *cells]) + " |")
    head = ["agent", "user", "env", "n", "success", "success 95% CI", "mean reward",
            "reward 95% CI", "agent turns", "ends " + "/".join(TERMINATIONS)]
    lines += ["", "## Per environment", "",
              "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        ends = r.get("terminations", {})
        lines.append("| " + " | ".join([
            r["agent"], r["simulator"], r["env"], str(r["n"]), _f(r["success_rate"]),
            f"[{_f(r['success_ci_low'])}, {_f(r['success_ci_high'])}]", _f(r["mean_reward"]),
            f"[{_f(r['reward_ci_low'])}, {_f(r['reward_ci_high'])}]", _f(r["mean_turns"], 2),
            "/".join(str(ends.get(t, 0)) for t in TERMINATIONS)]) + " |")
    thresholds = ", ".join(f"{e} ≥ {t:g}" for e, t in SUCCESS_THRESHOLDS.items())
    lines += ["", f"Success: reward {thresholds} (other envs ≥ {DEFAULT_SUCCESS_THRESHOLD:g}); "
              + "CIs: bootstrap per env, normal approximation for ALL."]
    return "\n".join(lines) + "\n"


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
    for k in range(len(sims), nrows * ncols):
        axes[k // ncols][k % ncols].axis("off")
    axes[0][0].legend(fontsize=8, title="agent", title_fontsize=8)
    fig.suptitle("Agents on held-out scenarios (95% CI)", fontsize=11)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
