"""Behaviour-frequency divergence between simulated and real user turns.

Source: ours, on the 13 MIMESIS behaviours (docs/metrics.md, "Behaviour-frequency divergence").
Labels are multi-label and most turns carry none, so the distribution compared is over the 13
behaviour ids plus a ``none`` bin: each turn adds one count to every behaviour it carries, or one
count to ``none`` when it carries no behaviour. The ``none`` bin keeps the divergence defined when
one side shows no behaviour at all, and penalises a simulator that shows too many or too few.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.spatial.distance import jensenshannon

from mimesis.behaviors.catalog import BEHAVIOR_IDS

NONE_BIN = "none"


def js_divergence(p: Sequence[float], q: Sequence[float]) -> float:
    """Jensen–Shannon divergence of two discrete distributions, in bits (0..1).

    Args:
        p: Non-negative weights over the same bins as ``q`` (normalised here).
        q: Non-negative weights, same length as ``p``.

    Returns:
        JS(p, q) = ½ KL(p‖m) + ½ KL(q‖m) with m = ½(p + q), log base 2; 0 for identical
        distributions, 1 for disjoint supports.

    Raises:
        ValueError: shapes differ, a weight is negative, or a side sums to 0.

    Source: Lin (1991), "Divergence measures based on the Shannon entropy".

    >>> round(js_divergence([1, 0], [0, 1]), 6)
    1.0
    """
    pa, qa = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    if pa.shape != qa.shape or pa.ndim != 1:
        raise ValueError(f"js_divergence needs two 1-d arrays of one shape: {pa.shape}, {qa.shape}")
    if (pa < 0).any() or (qa < 0).any() or pa.sum() == 0 or qa.sum() == 0:
        raise ValueError("js_divergence needs non-negative weights with a positive sum")
    # scipy normalises both sides and returns the JS *distance*, the divergence's square root
    return float(jensenshannon(pa, qa, base=2) ** 2)


def behavior_counts(label_sets: Sequence[Sequence[str]],
                    ids: Sequence[str] = BEHAVIOR_IDS) -> np.ndarray:
    """Counts over ``ids`` + the ``none`` bin, shape ``(len(ids) + 1,)``.

    Labels outside ``ids`` (e.g. traits) are ignored; a turn whose labels are all outside ``ids``
    counts as ``none``.
    """
    index = {b: i for i, b in enumerate(ids)}
    counts = np.zeros(len(ids) + 1, dtype=np.float64)
    for labels in label_sets:
        hits = {index[b] for b in labels if b in index}
        if hits:
            counts[list(hits)] += 1
        else:
            counts[-1] += 1
    return counts


def behavior_frequencies(label_sets: Sequence[Sequence[str]],
                         ids: Sequence[str] = BEHAVIOR_IDS) -> dict[str, float]:
    """Share of turns carrying each behaviour (0..1; multi-label, so they need not sum to 1), plus
    ``none``: the share carrying no behaviour.

    Raises:
        ValueError: ``label_sets`` is empty.
    """
    if not label_sets:
        raise ValueError("behavior_frequencies needs at least one turn")
    counts = behavior_counts(label_sets, ids) / len(label_sets)
    return {name: float(c) for name, c in zip([*ids, NONE_BIN], counts, strict=True)}


def behavior_js(a_label_sets: Sequence[Sequence[str]], b_label_sets: Sequence[Sequence[str]],
                ids: Sequence[str] = BEHAVIOR_IDS) -> float:
    """JS divergence (bits) between the behaviour-label distributions of two samples of turns.

    Both samples must be labelled by the same labeler (e.g. ``detect_rules``) so the labeler's
    own bias cancels.

    Raises:
        ValueError: either sample is empty.

    Source: ours (docs/metrics.md, behaviour-frequency divergence).
    """
    if not a_label_sets or not b_label_sets:
        raise ValueError("behavior_js needs two non-empty samples")
    return js_divergence(behavior_counts(a_label_sets, ids), behavior_counts(b_label_sets, ids))
