"""The few figures ``dvc metrics show`` prints: one small ``headline.json`` per evaluation stage.

``dvc metrics show`` draws one table whose columns are the union of every registered metrics
file's keys; the full ``metrics.json`` of the two evaluation stages holds hundreds, so the
table ran to 60,000 columns. Those files stay (cached with ``cache: false`` as plain outs, read
by the reports, logged to MLflow); what dvc registers as metrics is the headline below, short
keys rounded to three decimals, so the table fits 120 columns and ``dvc metrics diff`` shows the
figures a reader compares first. Keys (missing figures are left out, dvc prints ``-``):

- evaluate_user: ``turing`` (the trained simulator's Turing distance over all positions, points
  above chance), ``vs_prompt`` (trained − prompted Turing distance, paired over conversations),
  ``scored`` (fraction of positions with a scored turn), ``term_f1`` (termination F1),
  ``resampled`` (fraction of positions whose first draw the guards redrew); see docs/metrics.md.
- evaluate_agents: ``reveal`` (the frozen simulator's fact-reveal rate on held-out tasks, mean
  over envs) and ``false_end`` (its false-end rate there); see docs/results.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

from mimesis.io import write_json

NAME = "headline.json"


def _get(tree: Mapping, *keys: str) -> float | None:
    for key in keys:
        if not isinstance(tree, Mapping) or key not in tree:
            return None
        tree = tree[key]
    if isinstance(tree, bool) or not isinstance(tree, int | float) or not math.isfinite(tree):
        return None
    return round(float(tree), 3)


def _present(figures: dict[str, float | None]) -> dict[str, float]:
    return {k: v for k, v in figures.items() if v is not None}


def user_headline(metrics: Mapping) -> dict[str, float]:
    """The evaluate_user headline from its ``metrics.json`` dict (keys: module docstring)."""
    trained = metrics.get("trained", {})
    return _present({
        "turing": _get(trained, "c2st_all", "distance"),
        "vs_prompt": _get(metrics, "comparisons_all", "trained-vs-baseline", "difference"),
        "scored": _get(trained, "scored_rate"),
        "term_f1": _get(trained, "termination_f1"),
        "resampled": _get(trained, "guards", "resampled_rate"),
    })


def agents_headline(metrics: Mapping) -> dict[str, float]:
    """The evaluate_agents headline from its ``metrics.json`` dict (keys: module docstring)."""
    heldout = metrics.get("fact_reveal", {}).get("frozen", {}).get("heldout", {})
    return _present({
        "reveal": _get(heldout, "mean", "mean"),
        "false_end": _get(heldout, "mean", "false_end", "mean"),
    })


def write_headline(out_dir: Path, figures: Mapping[str, float]) -> Path:
    """Write ``<out_dir>/headline.json`` (an empty object when no figure exists, e.g. a stage
    disabled by its profile: dvc then prints ``-``). Returns the path."""
    path = Path(out_dir) / NAME
    write_json(path, dict(figures))
    return path
