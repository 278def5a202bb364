"""Classifier two-sample test (C2ST): the offline estimator of the Turing distance.

Source: SimulatorArena setup as used by MIMESIS (Turing distance = |judge accuracy − 50|), with
the judge replaced by a logistic-regression discriminator (Lopez-Paz & Oquab 2017, "Revisiting
classifier two-sample tests"), as docs/metrics.md describes.

Pitfall (measured, docs/pitfalls.md #14): cross-validation folds must be grouped by conversation.
Turns of one conversation share a topic; with plain stratified folds the discriminator learns "which
conversation" instead of "real or simulated" and two halves of *real* users look 65% separable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold, cross_val_predict
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler


@dataclass(frozen=True)
class C2STResult:
    """Outcome of one C2ST.

    Attributes:
        accuracy: Cross-validated accuracy of the discriminator, in % (50 = chance).
        distance: Turing distance |accuracy − 50|, in points (0 = indistinguishable).
        n_per_class: Samples per class after balancing.
        n_splits: Folds used.
        grouped: Whether folds were grouped (no group in both train and test).
    """

    accuracy: float
    distance: float
    n_per_class: int
    n_splits: int
    grouped: bool


def _balance(n_a: int, n_b: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Indices that subsample the larger class to the smaller one's size, so chance is 50%."""
    n = min(n_a, n_b)
    return np.sort(rng.choice(n_a, n, replace=False)), np.sort(rng.choice(n_b, n, replace=False))


def c2st(features_a: np.ndarray, features_b: np.ndarray, groups_a: Sequence[str],
         groups_b: Sequence[str], n_splits: int = 5, seed: int = 0, grouped: bool = True,
         c: float = 1.0) -> C2STResult:
    """Cross-validated accuracy of a logistic-regression discriminator between two samples.

    Args:
        features_a: Sample A, shape ``(n_a, d)`` (e.g. sentence embeddings ⊕ style features).
        features_b: Sample B, shape ``(n_b, d)``.
        groups_a: Conversation id of every row of A (length ``n_a``).
        groups_b: Conversation id of every row of B (length ``n_b``).
        n_splits: Folds; lowered to the number of groups of the smaller class when needed.
        seed: Seed of the class balancing and of the fold assignment.
        grouped: Group folds by conversation (the correct protocol). ``False`` uses plain
            stratified folds; kept only to demonstrate the pitfall.
        c: Inverse L2 strength of the logistic regression (features are standardised first).

    Returns:
        ``C2STResult`` with accuracy in % and distance |accuracy − 50| in points.

    Raises:
        ValueError: shapes disagree, or a class has fewer than 2 rows or (grouped) 2 groups.

    Source: SimulatorArena/MIMESIS Turing distance; C2ST estimator per docs/metrics.md.
    """
    xa, xb = np.asarray(features_a, dtype=np.float64), np.asarray(features_b, dtype=np.float64)
    if xa.ndim != 2 or xb.ndim != 2 or xa.shape[1] != xb.shape[1]:
        raise ValueError(f"c2st needs two 2-d arrays with equal width, got {xa.shape}, {xb.shape}")
    if len(groups_a) != len(xa) or len(groups_b) != len(xb):
        raise ValueError("c2st needs one group id per row")
    rng = np.random.default_rng(seed)
    ia, ib = _balance(len(xa), len(xb), rng)
    x = np.vstack([xa[ia], xb[ib]])
    y = np.r_[np.zeros(len(ia), dtype=int), np.ones(len(ib), dtype=int)]
    # An id present on both sides stays one group: its rows never straddle train and test.
    groups = np.array([str(groups_a[i]) for i in ia] + [str(groups_b[i]) for i in ib])
    min_groups = min(len(set(groups[y == 0])), len(set(groups[y == 1])))
    limit = min_groups if grouped else len(ia)
    if limit < 2:
        raise ValueError(f"c2st needs at least 2 {'groups' if grouped else 'rows'} per class")
    k = min(n_splits, limit)
    if grouped:
        cv = StratifiedGroupKFold(n_splits=k, shuffle=True, random_state=seed)
    else:
        cv = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed)
    model = make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=2000))
    pred = cross_val_predict(model, x, y, cv=cv, groups=groups if grouped else None)
    accuracy = 100.0 * float(np.mean(pred == y))
    return C2STResult(accuracy=accuracy, distance=abs(accuracy - 50.0), n_per_class=len(ia),
                      n_splits=k, grouped=grouped)
