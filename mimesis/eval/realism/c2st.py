"""Classifier two-sample test (C2ST): the offline estimator of the Turing distance.

Source: SimulatorArena setup as used by MIMESIS (Turing distance = |judge accuracy − 50|), with
the judge replaced by a logistic-regression discriminator (Lopez-Paz & Oquab 2017, "Revisiting
classifier two-sample tests"), as docs/metrics.md describes.

Pitfall (measured, docs/pitfalls.md #14): cross-validation folds must be grouped by conversation.
Turns of one conversation share a topic; with plain stratified folds the discriminator learns "which
conversation" instead of "real or simulated" and two halves of *real* users look 65% separable.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from scipy.stats import bootstrap
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import balanced_accuracy_score
from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold, cross_val_predict
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from mimesis.eval.realism.style import style_matrix

if TYPE_CHECKING:  # torch is loaded only by whoever builds the embedder
    from mimesis.models.embeddings import MiniLMEmbedder

# Key of a pooled result's per-conversation (hits, rows) counts (:func:`compare_pooled`).
PER_CONVERSATION = "_per_conversation"


@dataclass(frozen=True)
class C2STResult:
    """Outcome of one C2ST.

    Attributes:
        accuracy: Cross-validated accuracy of the discriminator, in % (50 = chance).
        distance: Turing distance |accuracy − 50|, in points (0 = indistinguishable).
        n_per_class: Samples per class after balancing.
        n_splits: Folds used.
        grouped: Whether folds were grouped (no group in both train and test).
        groups: Conversation id of every balanced row, in design order (length ``2·n_per_class``).
        correct: Whether the out-of-fold prediction of each row was right, same order.
        null: Balanced accuracies (%) under ``n_permutations`` conversation-level label
            permutations, shape ``(n_permutations,)`` (empty without a permutation test).
        p_value: Permutation p-value of ``accuracy`` (one-sided: "more separable than chance"),
            ``None`` without a permutation test.
    """

    accuracy: float
    distance: float
    n_per_class: int
    n_splits: int
    grouped: bool
    groups: tuple[str, ...] = ()
    correct: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    null: np.ndarray = field(default_factory=lambda: np.zeros(0))
    p_value: float | None = None


def _balance(n_a: int, n_b: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Indices that subsample the larger class to the smaller one's size, so chance is 50%."""
    n = min(n_a, n_b)
    return np.sort(rng.choice(n_a, n, replace=False)), np.sort(rng.choice(n_b, n, replace=False))


def permute_groups(y: np.ndarray, groups: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Labels permuted at the group (conversation) level: the groups' labels are shuffled among
    the groups and every row takes its group's new label, so the turns of one conversation keep
    one label, as in the real design. A group whose rows carry both labels (an id present on
    both sides) takes its majority label.

    Args:
        y: 0/1 labels, shape ``(n,)``.
        groups: Group id per row, shape ``(n,)``.
        rng: Source of the permutation.

    Returns:
        Permuted labels, shape ``(n,)``.
    """
    _, inverse = np.unique(groups, return_inverse=True)
    label = np.rint(np.bincount(inverse, weights=y) / np.bincount(inverse)).astype(int)
    return rng.permutation(label)[inverse]


def _balanced_accuracy(y: np.ndarray, pred: np.ndarray) -> float:
    return 100.0 * float(balanced_accuracy_score(y, pred)) if len(set(y)) == 2 else 50.0


def c2st(features_a: np.ndarray, features_b: np.ndarray, groups_a: Sequence[str],
         groups_b: Sequence[str], n_splits: int = 5, seed: int = 0, grouped: bool = True,
         c: float = 1.0, n_permutations: int = 0) -> C2STResult:
    """Cross-validated accuracy of a logistic-regression discriminator between two samples,
    optionally with a permutation test.

    Args:
        features_a: Sample A, shape ``(n_a, d)`` (e.g. sentence embeddings ⊕ style features).
        features_b: Sample B, shape ``(n_b, d)``.
        groups_a: Conversation id of every row of A (length ``n_a``).
        groups_b: Conversation id of every row of B (length ``n_b``).
        n_splits: Folds; lowered to the number of groups of the smaller class when needed.
        seed: Seed of the class balancing, the fold assignment and the permutations.
        grouped: Group folds by conversation (the correct protocol). ``False`` uses plain
            stratified folds; kept only to demonstrate the pitfall.
        c: Inverse L2 strength of the logistic regression (features are standardised first).
        n_permutations: Label permutations of the test (0 = none). Labels are permuted at the
            conversation level (:func:`permute_groups`) and the whole cross-validation is rerun
            on each; the statistic is the balanced accuracy (a permutation can unbalance the
            classes; on the balanced design it equals the accuracy).

    Returns:
        ``C2STResult`` with accuracy in % and distance |accuracy − 50| in points; with
        permutations, ``p_value = (1 + #{null ≥ accuracy}) / (1 + n_permutations)``.

    Raises:
        ValueError: shapes disagree, or a class has fewer than 2 rows or (grouped) 2 groups.

    Source: SimulatorArena/MIMESIS Turing distance; C2ST estimator per docs/metrics.md;
    permutation p-value after Ojala & Garriga (2010), "Permutation tests for studying
    classifier performance", JMLR 11 (the +1 correction as in
    ``sklearn.model_selection.permutation_test_score``).
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

    def predict(labels: np.ndarray) -> np.ndarray:
        if grouped:
            cv = StratifiedGroupKFold(n_splits=k, shuffle=True, random_state=seed)
        else:
            cv = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed)
        # liblinear: the same L2 solution as lbfgs here, ~5x faster at d > n (permutations)
        model = make_pipeline(StandardScaler(),
                              LogisticRegression(C=c, solver="liblinear", max_iter=2000))
        return cross_val_predict(model, x, labels, cv=cv, groups=groups if grouped else None)

    pred = predict(y)
    accuracy = 100.0 * float(np.mean(pred == y))
    null = np.zeros(n_permutations)
    for j in range(n_permutations):
        permuted = permute_groups(y, groups, rng) if grouped else rng.permutation(y)
        if len(set(permuted)) < 2 or min(np.bincount(permuted)) < k:
            null[j] = 50.0  # a degenerate draw: no discriminator can be fitted
            continue
        null[j] = _balanced_accuracy(permuted, predict(permuted))
    p_value = (1 + int(np.sum(null >= accuracy - 1e-9))) / (1 + n_permutations) \
        if n_permutations else None
    return C2STResult(accuracy=accuracy, distance=abs(accuracy - 50.0), n_per_class=len(ia),
                      n_splits=k, grouped=grouped, groups=tuple(groups), correct=pred == y,
                      null=null, p_value=p_value)


def pool_c2st(results: Sequence[C2STResult], n_bootstrap: int = 1000, seed: int = 0,
              confidence: float = 0.95) -> dict[str, float]:
    """One estimate from several C2STs of a row (e.g. both directions of a simulator row, or the
    random half splits of the real-vs-real row), with its permutation p-value and a bootstrap CI
    over conversations.

    Args:
        results: C2STs with the same ``n_permutations`` (0 = no p-value).
        n_bootstrap: Bootstrap resamples of the CI (0 = no CI).
        seed: Seed of the bootstrap.
        confidence: Level of the CI.

    Returns:
        ``accuracy`` (%; rows pooled over all results), ``distance`` = |accuracy − 50|,
        ``n`` (rows), ``conversations``; with permutations ``p_value`` (the pooled statistic
        against the row-weighted mean of the results' null draws, drawn independently); with
        a bootstrap ``accuracy_ci_low/high`` and ``ci_low/high`` of the distance. The distance
        CI is the image of the accuracy CI under |· − 50| (it starts at 0 when the accuracy CI
        holds 50: indistinguishable from chance at that level).

    Raises:
        ValueError: no result, or results with different permutation counts.

    Source: percentile bootstrap over clusters (conversations; a conversation's rows in every
    result resampled together), Efron & Tibshirani (1993), ch. 13 and §6.9, via
    ``scipy.stats.bootstrap``; the p-value as in :func:`c2st`.
    """
    if not results or len({len(r.null) for r in results}) != 1:
        raise ValueError("pool_c2st needs results with one permutation count")
    n = np.array([len(r.correct) for r in results], dtype=np.float64)
    correct = float(sum(r.correct.sum() for r in results))
    accuracy = 100.0 * correct / n.sum()
    out = {"accuracy": accuracy, "distance": abs(accuracy - 50.0), "n": float(n.sum())}
    per_conv: dict[str, list[float]] = {}
    for r in results:
        for g, ok in zip(r.groups, r.correct, strict=True):
            per_conv.setdefault(g, [0.0, 0.0])
            per_conv[g][0] += float(ok)
            per_conv[g][1] += 1.0
    out["conversations"] = float(len(per_conv))
    out[PER_CONVERSATION] = per_conv  # for paired row comparisons; dropped before writing
    if len(results[0].null):
        null = np.average(np.stack([r.null for r in results]), axis=0, weights=n)
        out["p_value"] = float((1 + np.sum(null >= accuracy - 1e-9)) / (1 + len(null)))
    if n_bootstrap and len(per_conv) >= 2:
        hits, totals = (np.array(v) for v in zip(*per_conv.values(), strict=True))
        res = bootstrap((hits, totals), _pooled_accuracy, paired=True, vectorized=True,
                        n_resamples=n_bootstrap, confidence_level=confidence,
                        method="percentile", random_state=seed)
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
        out["accuracy_ci_low"], out["accuracy_ci_high"] = lo, hi
        far = max(abs(lo - 50.0), abs(hi - 50.0))
        out["ci_low"] = 0.0 if lo <= 50.0 <= hi else min(abs(lo - 50.0), abs(hi - 50.0))
        out["ci_high"] = far
    return out


def _pooled_accuracy(hits: np.ndarray, totals: np.ndarray, axis: int = -1) -> np.ndarray:
    return 100.0 * hits.sum(axis=axis) / totals.sum(axis=axis)


def compare_pooled(a: dict, b: dict, n_bootstrap: int = 1000, seed: int = 0,
                   confidence: float = 0.95) -> dict[str, float]:
    """Paired comparison of two rows' Turing distances (:func:`pool_c2st` results of two
    simulators scored at the same evaluation positions).

    Statistic: ``distance(a) − distance(b)`` in points (< 0: ``a`` is harder to tell from real
    users). Conversations are resampled jointly for both rows (a conversation absent from one
    row counts 0 rows there), so the CI is that of the paired difference, not two overlapping
    CIs.

    Returns:
        ``difference``, ``ci_low``, ``ci_high``, ``conversations`` and ``p_a_better``: the
        one-sided bootstrap p-value of "``a`` is closer to real" = (1 + #{resamples with
        difference ≥ 0}) / (1 + resamples); ``{}`` when either row has no per-conversation
        counts or fewer than 2 conversations are shared.

    Source: paired percentile bootstrap over clusters (Efron & Tibshirani 1993, ch. 13 and
    §16.4 for the bootstrap p-value), via ``scipy.stats.bootstrap``.
    """
    pa, pb = a.get(PER_CONVERSATION), b.get(PER_CONVERSATION)
    if not pa or not pb:
        return {}
    convs = sorted(set(pa) | set(pb))
    if len(set(pa) & set(pb)) < 2 or not n_bootstrap:
        return {}
    ha, ta = (np.array([pa.get(c, (0.0, 0.0))[i] for c in convs]) for i in (0, 1))
    hb, tb = (np.array([pb.get(c, (0.0, 0.0))[i] for c in convs]) for i in (0, 1))
    diff = float(_distance_difference(ha, ta, hb, tb))
    res = bootstrap((ha, ta, hb, tb), _distance_difference, paired=True, vectorized=True,
                    n_resamples=n_bootstrap, confidence_level=confidence, method="percentile",
                    random_state=seed)
    draws = np.asarray(res.bootstrap_distribution)
    return {"difference": diff, "ci_low": float(res.confidence_interval.low),
            "ci_high": float(res.confidence_interval.high), "conversations": float(len(convs)),
            "p_a_better": float((1 + np.sum(draws >= 0)) / (1 + draws.size))}


def _distance_difference(ha, ta, hb, tb, axis: int = -1):
    with np.errstate(invalid="ignore", divide="ignore"):
        da = np.abs(100.0 * ha.sum(axis=axis) / ta.sum(axis=axis) - 50.0)
        db = np.abs(100.0 * hb.sum(axis=axis) / tb.sum(axis=axis) - 50.0)
    return np.nan_to_num(da - db)


def c2st_featurizer(embedder: MiniLMEmbedder,
                    embed: Callable[[list[str]], np.ndarray] | None = None
                    ) -> Callable[[list[str]], np.ndarray]:
    """``texts -> (n, 384 + 7)`` features for the C2ST discriminator: sentence embedding ⊕ style
    features (``mimesis.eval.realism.style.STYLE_FEATURES``), as docs/metrics.md specifies. Embeddings are
    cached per text (``embed``: a :func:`cached_embed` to share its cache; default a new one).
    Both parts see the text as given: callers cut real and simulated turns to one character cap
    first (:func:`mimesis.eval.realism.generate.real_records`), and the embedder's 256-token cut is
    the same for both."""
    from mimesis.models.embeddings import cached_embed

    embed = embed or cached_embed(embedder)

    def featurize(texts: list[str]) -> np.ndarray:
        return np.hstack([embed(texts).astype(np.float64), style_matrix(texts)])

    return featurize
