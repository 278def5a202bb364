"""The evaluate_user stage's human-readable outputs: a markdown table and two plots.

MLflow and ``dvc metrics`` already diff the numbers (``metrics.json``); this adds only what they
cannot show: the three rows side by side, and the distributions behind the distances.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: stages run under dvc/Prefect without a display
import matplotlib.pyplot as plt

from mimesis.behaviors.catalog import BEHAVIOR_IDS
from mimesis.eval.style import STYLE_RATES

ROWS = ("trained", "baseline", "real")
ROW_TITLES = {"trained": "trained simulator", "baseline": "prompted baseline",
              "real": "real vs real (ceiling)"}
PLOT_TITLES = {**ROW_TITLES, "real": "real users"}
# (key path, column title); ↓ lower is better, ↑ higher is better, ≈ closer to real is better.
MAIN_COLUMNS = (
    (("c2st", "distance"), "Turing dist. (C2ST) ↓"),
    (("c2st", "accuracy"), "C2ST acc. %"),
    (("behavior_js",), "behaviour JS ↓"),
    (("style", "length_w1"), "length W1 ↓"),
    (("first_turn_diversity",), "1st-turn diversity ≈"),
    (("intent_decomposition",), "intent decomp. ↓"),
    (("termination_f1",), "termination F1 ↑"),
    (("role_adherence",), "role adherence ↑"),
    (("n_turns",), "turns"),
)


def _get(d: dict, path: Sequence[str]) -> float | None:
    for key in path:
        if not isinstance(d, dict) or key not in d:
            return None
        d = d[key]
    return d if isinstance(d, int | float) else None


def _fmt(value: float | None, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if float(value).is_integer() and abs(value) >= 10:
        return f"{value:.0f}"
    return f"{value:.{digits}g}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(r) + " |" for r in rows]


def markdown_table(metrics: dict) -> str:
    """The realism table (three rows), style distances, and per-behaviour slices, as markdown."""
    lines = ["# Simulator realism (offline estimators, docs/metrics.md)", ""]
    lines += _table(["row", *(t for _, t in MAIN_COLUMNS)],
                    [[ROW_TITLES[r], *(_fmt(_get(metrics.get(r, {}), p)) for p, _ in MAIN_COLUMNS)]
                     for r in ROWS])
    lines += ["", "## Style distances to real users (|rate difference|; length: W1 of log chars)",
              ""]
    keys = ("length_w1", *STYLE_RATES)
    lines += _table(["row", *keys], [[ROW_TITLES[r], *(_fmt(_get(metrics.get(r, {}), ("style", k)))
                                                      for k in keys)] for r in ROWS])
    lines += ["", "## Per behaviour (positions whose real turn carries it)", ""]
    header = ["behaviour", "turns", "convs", *(f"recall {r}" for r in ROWS),
              *(f"JS {r}" for r in ROWS), *(f"C2ST dist. {r}" for r in ROWS)]
    body = []
    for b, entry in metrics.get("slices", {}).items():
        sup = entry["support"]
        body.append([b, _fmt(sup["turns"]), _fmt(sup["conversations"]),
                     *(_fmt(_get(entry.get(r, {}), ("behavior_recall",))) for r in ROWS),
                     *(_fmt(_get(entry.get(r, {}), ("behavior_js",))) for r in ROWS),
                     *(_fmt(_get(entry.get(r, {}), ("c2st", "distance"))) for r in ROWS)])
    lines += _table(header, body) if body else ["No real turn in the sample carries a behaviour."]
    lines += ["", *NOTES]
    return "\n".join(lines) + "\n"


NOTES = (
    "Notes:",
    (
        "- Two-sample metrics compare turns of *different* conversations: a simulator's turns on one "
        "half of the held-out conversations against real turns of the other half (both directions); "
        "the real row compares the two real halves, so it is the ceiling at the same sample size."
    ),
    (
        "- Turing distance is the offline C2ST estimator, not a judge: logistic regression on "
        "all-MiniLM-L6-v2 embeddings + style features, folds grouped by conversation; "
        "|accuracy − 50| in points."
    ),
    (
        "- Real row: termination F1 and role adherence are 1 by definition (real users are the "
        "reference); `role_rule_flag_rate` in metrics.json shows how often the rule flags real users."
    ),
    (
        "- Behaviour labels for JS/recall come from the same rule labeler on real and simulated "
        "turns; slices use the stored real labels. '–' = not enough support."
    ),
    (
        "- Simulators are scored on their raw, parsed outputs (the runtime's guards — resampling, "
        "deferred ends — are off); a turn carrying the end signal counts as an end decision. "
        "Simulated lengths are capped by `max_new_tokens` (reasoning included)."
    ),
)


def length_plot(lengths: dict[str, Sequence[int]], path: Path) -> Path:
    """Histogram of user-turn lengths (log10 characters) per writer, saved as PNG."""
    fig, ax = plt.subplots(figsize=(7, 4))
    values = [math.log10(1 + n) for v in lengths.values() for n in v] or [0.0]
    bins = [min(values) + i * (max(values) - min(values) + 1e-9) / 24 for i in range(25)]
    for name, v in lengths.items():
        if v:
            ax.hist([math.log10(1 + n) for n in v], bins=bins, histtype="step", density=True,
                    linewidth=1.8, label=f"{PLOT_TITLES.get(name, name)} (n={len(v)})")
    ax.set_xlabel("log10(1 + characters) of a user turn")
    ax.set_ylabel("density")
    ax.set_title("User-turn length: real vs simulated")
    ax.legend()
    return _save(fig, path)


def behavior_plot(freqs: dict[str, dict[str, float]], path: Path) -> Path:
    """Grouped bars: share of user turns showing each behaviour B1..B13 per writer, as PNG."""
    fig, ax = plt.subplots(figsize=(10, 4))
    width = 0.8 / max(1, len(freqs))
    for k, (name, f) in enumerate(freqs.items()):
        xs = [i + (k - (len(freqs) - 1) / 2) * width for i in range(len(BEHAVIOR_IDS))]
        ax.bar(xs, [f.get(b, 0.0) for b in BEHAVIOR_IDS], width=width,
               label=f"{PLOT_TITLES.get(name, name)} (none: {f.get('none', 0.0):.0%})")
    ax.set_xticks(range(len(BEHAVIOR_IDS)), BEHAVIOR_IDS)
    ax.set_ylim(bottom=0, top=max([0.05, *(v for f in freqs.values()
                                              for k, v in f.items() if k != "none")]) * 1.15)
    ax.set_ylabel("share of user turns")
    ax.set_title("Behaviour frequencies (same rule labeler on every writer)")
    ax.legend()
    return _save(fig, path)


def _save(fig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
