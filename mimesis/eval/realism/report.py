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
from mimesis.eval.realism.style import STYLE_RATES

ROWS = ("trained", "baseline", "real")
ROW_TITLES = {"trained": "trained simulator", "baseline": "prompted baseline",
              "real": "real vs real (ceiling)"}
PLOT_TITLES = {**ROW_TITLES, "real": "real users"}
# (key path, column title); ↓ lower is better, ↑ higher is better, ≈ closer to real is better.
MAIN_COLUMNS = (
    (("c2st", "accuracy"), "C2ST acc. %"),
    (("c2st", "p_value"), "perm. p"),
    (("turn_loss_rate",), "lost turns ↓"),
)
# Rates printed with their 95% CI over conversations (flat keys <key>, <key>_ci_low/_ci_high).
RATE_COLUMNS = (
    ("raw_leak_rate", "raw leak [95% CI] ↓"),
    ("raw_empty_rate", "raw empty [95% CI] ↓"),
)
LATER_COLUMNS = (
    (("realism_index",), "realism index ↑"),
    (("reasoning_rate",), "reasoning rate"),
    (("guards", "resampled_rate"), "resampled"),
    (("behavior_js",), "behaviour JS ↓"),
    (("style", "length_w1"), "length W1 ↓"),
    (("termination_f1",), "termination F1 ↑"),
    (("role_adherence",), "role adherence ↑"),
)
GOAL_COLUMNS = (
    (("goal", "top1"), "goal top-1 ↑"),
    (("goal", "mrr"), "goal MRR ↑"),
    (("goal_first", "top1"), "1st-turn goal top-1 ↑"),
    (("goal", "chance_top1"), "chance top-1"),
    (("opening", "role_flipped"), "role-flipped ↓"),
    (("opening", "goal_dump"), "goal dump ↓"),
    (("opening", "junk"), "junk ↓"),
    (("opening", "empty"), "empty ↓"),
    (("first_turn_diversity",), "1st-turn diversity ≈"),
    (("intent_decomposition",), "intent decomp. ↓"),
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


def title(row: str) -> str:
    """Display name of a row (known rows get a description)."""
    return ROW_TITLES.get(row, row)


def _distance(m: dict) -> str:
    c = m.get("c2st", {})
    if "distance" not in c:
        return "–"
    ci = (f" [{c['ci_low']:.1f}, {c['ci_high']:.1f}]" if "ci_low" in c else "")
    return f"{c['distance']:.1f}{ci}"


def _distance_all(m: dict) -> str:
    c = m.get("c2st_all", {})
    if "distance" not in c:
        return "–"
    ci = (f" [{c['ci_low']:.1f}, {c['ci_high']:.1f}]" if "ci_low" in c else "")
    return f"{c['distance']:.1f}{ci}"


def _sizes(m: dict) -> str:
    return f"{_fmt(m.get('n_turns'))} / {_fmt(m.get('n_conversations'))}"


def rate_ci(m: dict, key: str) -> str:
    """A rate with its CI when there is one: "0.12 [0.05, 0.2]"; "–" when absent."""
    if _get(m, (key,)) is None:
        return "–"
    ci = (f" [{_fmt(m[key + '_ci_low'], 2)}, {_fmt(m[key + '_ci_high'], 2)}]"
          if key + "_ci_low" in m else "")
    return f"{_fmt(m[key], 2)}{ci}"


def scored(m: dict) -> str:
    """Scored positions of a row: "0.66 [0.55, 0.77] (29/44)" (share of positions that produced
    a spoken turn, its 95% CI over conversations, turns / positions)."""
    if "n_positions" not in m:
        return "–"
    ci = (f" [{m['scored_rate_ci_low']:.2f}, {m['scored_rate_ci_high']:.2f}]"
          if "scored_rate_ci_low" in m else "")
    return f"{m['scored_rate']:.2f}{ci} ({m['n_turns']:.0f}/{m['n_positions']:.0f})"


def overlaps(a: dict, b: dict) -> bool | None:
    """Whether the 95% CIs of two rows' Turing distances overlap (``None``: a CI is missing)."""
    ca, cb = a.get("c2st", {}), b.get("c2st", {})
    if "ci_low" not in ca or "ci_low" not in cb:
        return None
    return ca["ci_low"] <= cb["ci_high"] and cb["ci_low"] <= ca["ci_high"]


def verdicts(metrics: dict, rows: Sequence[str]) -> list[str]:
    """One line per pair of rows: is the difference of their Turing distances noise (the 95%
    CIs overlap) or not; and per simulator whether its C2ST tells it from real users at all
    (permutation p < 0.05)."""
    lines = []
    for group, what in (("comparisons", "spoken turns"), ("comparisons_all", "all positions")):
        for key, cmp in metrics.get(group, {}).items():
            a, b = key.split("-vs-")
            real = cmp["ci_high"] < 0 or cmp["ci_low"] > 0
            word = "a real difference" if real else "noise"
            lines.append(f"- {title(a)} − {title(b)} (paired, same positions, {what}): Turing "
                         f"distance {cmp['difference']:+.1f} [{cmp['ci_low']:+.1f}, "
                         f"{cmp['ci_high']:+.1f}] over {cmp['conversations']:.0f} "
                         f"conversations, bootstrap p({title(a)} closer to real) = "
                         f"{cmp['p_a_better']:.3g}: {word}.")
    for i, a in enumerate(rows):
        for b in rows[i + 1:]:
            if f"{a}-vs-{b}" in metrics.get("comparisons", {}):
                continue
            ov = overlaps(metrics.get(a, {}), metrics.get(b, {}))
            if ov is None:
                continue
            da, db = metrics[a]["c2st"]["distance"], metrics[b]["c2st"]["distance"]
            word = ("noise (95% CIs overlap)" if ov else
                    "a real difference (95% CIs do not overlap)")
            lines.append(f"- {title(a)} vs {title(b)}: Turing distance {da:.1f} vs {db:.1f} "
                         f"is {word}.")
    ceiling = metrics.get("real", {}).get("c2st", {})
    if ceiling.get("ci_low", 0.0) > 0:
        lines.append(f"- {title('real')}: its 95% CI [{ceiling['ci_low']:.1f}, "
                     f"{ceiling['ci_high']:.1f}] does not reach 0, though both halves are the "
                     "same users: at this sample size random halves can look apart by chance "
                     f"(p = {ceiling.get('p_value', float('nan')):.3g} on one split). Read the "
                     "simulator rows against this ceiling, not against 0; more conversations "
                     "or `c2st_real_splits` narrow it.")
    for r in rows:
        p = _get(metrics.get(r, {}), ("c2st", "p_value"))
        if p is not None and r != "real":
            told = "tells it from" if p < 0.05 else "cannot tell it from"
            lines.append(f"- {title(r)}: the discriminator {told} real users (permutation "
                         f"p = {p:.3g}).")
    return lines


def markdown_table(metrics: dict, rows: Sequence[str] = ROWS) -> str:
    """The realism table (one line per row), goal adherence and openings, style distances,
    noise verdicts and per-behaviour slices, as markdown."""
    rows = [r for r in rows if r in metrics]
    lines = ["# Simulator realism (offline estimators, docs/metrics.md)", ""]
    lines += _table(["row", "turns / convs", "scored positions [95% CI] (turns/positions)",
                     "Turing dist. [95% CI] ↓", "Turing dist., all positions [95% CI] ↓",
                     *(t for _, t in MAIN_COLUMNS), *(t for _, t in RATE_COLUMNS),
                     *(t for _, t in LATER_COLUMNS)],
                    [[title(r), _sizes(metrics[r]), scored(metrics[r]), _distance(metrics[r]),
                      _distance_all(metrics[r]),
                      *(_fmt(_get(metrics[r], p)) for p, _ in MAIN_COLUMNS),
                      *(rate_ci(metrics[r], k) for k, _ in RATE_COLUMNS),
                      *(_fmt(_get(metrics[r], p)) for p, _ in LATER_COLUMNS)] for r in rows])
    lines += ["", ("Realism index = (1 − Turing distance / 50) · (1 − lost turns). Lost turns: "
              "share of the positions where the real user spoke at which the row ended or "
              "wrote nothing (a rate, not a training loss). Scored "
              "positions: share of positions that produced a spoken turn, the only turns the "
              "Turing distance sees. Turing distance, all positions: every lost position (the "
              "real user spoke, the simulator ended or wrote nothing) enters the C2ST as an "
              "empty turn. Raw leak / raw empty: each position's first draw, before any guard "
              "acted, would have put private text in the utterance / says nothing and does not "
              "end (docs/metrics.md). CIs: 95% bootstrap over conversations."), "",
              *(verdicts(metrics, rows) or ["- no CI: too few turns for a C2ST."])]
    lines += ["", "## Goal adherence and openings (judge-free)", ""]
    lines += _table(["row", *(t for _, t in GOAL_COLUMNS)],
                    [[title(r), *(_fmt(_get(metrics[r], p)) for p, _ in GOAL_COLUMNS)]
                     for r in rows])
    lines += termination_section(metrics, rows)
    lines += ["", "## Style distances to real users (|rate difference|; length: W1 of log chars)",
              ""]
    keys = ("length_w1", *STYLE_RATES)
    lines += _table(["row", *keys], [[title(r), *(_fmt(_get(metrics[r], ("style", k)))
                                                 for k in keys)] for r in rows])
    lines += ["", "## Per behaviour (positions whose real turn carries it)", ""]
    header = ["behaviour", "turns", "convs", *(f"recall {r}" for r in rows),
              *(f"JS {r}" for r in rows), *(f"C2ST dist. {r}" for r in rows)]
    body = []
    for b, entry in metrics.get("slices", {}).items():
        sup = entry["support"]
        body.append([b, _fmt(sup["turns"]), _fmt(sup["conversations"]),
                     *(_fmt(_get(entry.get(r, {}), ("behavior_recall",))) for r in rows),
                     *(_fmt(_get(entry.get(r, {}), ("behavior_js",))) for r in rows),
                     *(_fmt(_get(entry.get(r, {}), ("c2st", "distance"))) for r in rows)])
    lines += _table(header, body) if body else ["No real turn in the sample carries a behaviour."]
    lines += ["", *NOTES]
    return "\n".join(lines) + "\n"


def termination_section(metrics: dict, rows: Sequence[str]) -> list[str]:
    """Markdown lines of where each simulated row ended against where the real users did: the
    ends it sent and, for the first draw of each position, the ends it meant before the end
    rule drew them again (``raw_termination``); ``[]`` when no row has next-turn positions."""
    def cells(term: dict | None) -> list[str]:
        if not term:
            return ["–"] * 4
        return [f"{_fmt(term['predicted'])}/{_fmt(term['n'])}", _fmt(term["recall"]),
                _fmt(term["false_end_rate"]), _fmt(term["f1"])]

    body = [[title(r), _fmt(_get(metrics[r], ("termination", "positives"))),
             *cells(metrics[r].get("termination")), *cells(metrics[r].get("raw_termination"))]
            for r in rows if metrics[r].get("termination")]
    if not body:
        return []
    lines = ["", "## Where the simulator ends (next-turn positions)", ""]
    lines += _table(["row", "real ends", "ends sent / positions", "true-end rate ↑",
                     "false-end rate ↓", "termination F1 ↑", "first draw: ends / positions",
                     "first draw: true-end rate", "first draw: false-end rate",
                     "first draw: F1"], body)
    return [*lines, "", (
        "True-end rate: share of the positions where the real user ended at which the row "
        "ended too (recall); false-end rate: share of those where the real user went on (each "
        "is a lost turn). First draw: the position's first sample, before the runtime drew an "
        "end again (`end_draws`): a first-draw true-end rate no higher than its false-end rate "
        "means the ends do not aim at where real users stop (docs/metrics.md).")]


NOTES = (
    "Notes:",
    (
        "- Two-sample metrics compare turns of *different* conversations: a simulator's turns on one "
        "half of the held-out conversations against real turns of the other half (both directions, "
        "pooled); the real row's C2ST pools random half splits of the real conversations, so it is "
        "the ceiling with the same estimator at the same sample size."
    ),
    (
        "- Turing distance is the offline C2ST estimator, not a judge: logistic regression on "
        "all-MiniLM-L6-v2 embeddings + style features, folds grouped by conversation; "
        "|accuracy − 50| in points. p: permutation test with labels shuffled by conversation. "
        "CI: percentile bootstrap over conversations, mapped to the distance (0 when the accuracy "
        "CI holds 50). Real and simulated turns are cut to the same character cap."
    ),
    (
        "- Turn loss: share of positions where the real user spoke at which the simulator ended or "
        "wrote nothing; those turns are invisible to the C2ST, hence the realism index."
    ),
    (
        "- Goal top-1 / MRR: the scenario goal ranked among goals of other held-out conversations by "
        "embedding similarity to the writer's turns; the real row is the ceiling (goals were "
        "written from those turns). Openings: shares of first turns that are role-flipped or dump "
        "the goal (the runtime guards' rules), junk (tags, repeated tokens) or empty."
    ),
    (
        "- Real row: termination F1 and role adherence are 1 by definition (real users are the "
        "reference); `role_rule_flag_rate` in metrics.json shows how often the rule flags real users."
    ),
    (
        "- Behaviour labels for JS/recall come from the same rule labeler on real and simulated "
        "turns; slices use the stored real labels (slices: no p-value or CI). '–' = not enough "
        "support."
    ),
    (
        "- Simulators are scored as deployed: through the run-time simulator (parser and guards) "
        "and, for local models, the RL sampler. Resampled: share of positions a guard sent back "
        "for one new sample; an empty turn after its resample is a lost turn; a turn with an "
        "utterance and the end signal is a spoken turn (the runtime sends it and defers the end). "
        "Reasoning rate: share of generated turns with non-empty private reasoning."
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
