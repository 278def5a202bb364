"""Precision, recall and F1 of a labeller against hand labels, per label and micro-averaged, with
percentile bootstrap confidence intervals.

Source: the usual multi-label definitions (micro = counts summed over labels before dividing;
Manning, Raghavan & Schütze 2008, ch. 13.6) and the percentile bootstrap over turns (Efron &
Tibshirani 1993, ch. 13). A label never predicted has precision 0 (scikit-learn's
``zero_division=0``), so a labeller that always answers "none" scores 0 everywhere.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class Score:
    """Figures of one label or of a micro average.

    Attributes:
        precision, recall, f1: In [0, 1].
        support: Hand-labelled positives.
        predicted: Positives the labeller gave.
        ci: ``{"precision": (lo, hi), "recall": ..., "f1": ...}``, the bootstrap interval.
    """

    precision: float
    recall: float
    f1: float
    support: int
    predicted: int
    ci: dict[str, tuple[float, float]]

    def flat(self) -> dict[str, float]:
        """``precision, recall, f1, support, predicted`` and ``<metric>_lo/_hi``."""
        out = {k: float(v) for k, v in asdict(self).items() if k != "ci"}
        for name, (lo, hi) in self.ci.items():
            out[f"{name}_lo"], out[f"{name}_hi"] = lo, hi
        return out


def _prf(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``counts[..., (tp, fp, fn)]`` -> precision, recall, F1 (0 where undefined)."""
    tp, fp, fn = counts[..., 0], counts[..., 1], counts[..., 2]
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.where(tp + fp > 0, tp / (tp + fp), 0.0)
        r = np.where(tp + fn > 0, tp / (tp + fn), 0.0)
        f = np.where(p + r > 0, 2 * p * r / (p + r), 0.0)
    return p, r, f


def confusion(gold: Sequence[Collection[str]], pred: Sequence[Collection[str]],
              labels: Sequence[str]) -> np.ndarray:
    """Per turn and label, ``(tp, fp, fn)``: an integer array of shape ``(n, len(labels), 3)``.

    Raises:
        ValueError: ``gold`` and ``pred`` differ in length.
    """
    if len(gold) != len(pred):
        raise ValueError(f"{len(gold)} gold rows but {len(pred)} predictions")
    out = np.zeros((len(gold), len(labels), 3), dtype=np.int64)
    for n, (g, p) in enumerate(zip(gold, pred, strict=True)):
        for k, label in enumerate(labels):
            out[n, k] = (label in g and label in p, label in p and label not in g,
                         label in g and label not in p)
    return out


def score(gold: Sequence[Collection[str]], pred: Sequence[Collection[str]],
          labels: Sequence[str], n_bootstrap: int = 1000, seed: int = 0,
          alpha: float = 0.05) -> dict[str, Score]:
    """Per-label scores and their micro average (key ``micro``) over ``labels``.

    Args:
        gold, pred: Label sets per turn, aligned.
        labels: The labels scored; others in the sets are ignored.
        n_bootstrap: Resamples of the turns (with replacement) for the intervals.
        alpha: 1 - confidence level of the intervals.

    >>> s = score([{"B2"}, {"B2"}, set()], [{"B2"}, set(), {"B2"}], ["B2"], n_bootstrap=10)
    >>> round(s["micro"].precision, 2), round(s["micro"].recall, 2)
    (0.5, 0.5)
    """
    counts = confusion(gold, pred, labels)
    rng = np.random.default_rng(seed)
    n = len(gold)
    weights = rng.multinomial(n, np.full(n, 1 / n), size=n_bootstrap) if n else \
        np.zeros((n_bootstrap, 0), dtype=np.int64)
    boot = np.einsum("bn,nlk->blk", weights, counts)  # (B, L, 3)
    total = counts.sum(0)  # (L, 3)
    groups = {label: (total[k], boot[:, k]) for k, label in enumerate(labels)}
    groups["micro"] = (total.sum(0), boot.sum(1))
    return {name: _score(t, b, alpha) for name, (t, b) in groups.items()}


def _score(total: np.ndarray, boot: np.ndarray, alpha: float) -> Score:
    point = _prf(total)
    spread = _prf(boot)
    qs = (100 * alpha / 2, 100 * (1 - alpha / 2))
    ci = {name: tuple(float(x) for x in np.percentile(values, qs))
          for name, values in zip(("precision", "recall", "f1"), spread, strict=True)}
    return Score(precision=float(point[0]), recall=float(point[1]), f1=float(point[2]),
                 support=int(total[0] + total[2]), predicted=int(total[0] + total[1]), ci=ci)
