"""C2ST (Turing-distance estimator): chance on one distribution, high on separable data, and the
grouped-folds pitfall (docs/pitfalls.md #14)."""

from __future__ import annotations

import numpy as np
import pytest

from mimesis.eval.realism.c2st import c2st


def _conversations(rng, n_convs, turns_per_conv, dim, prefix, shift=0.0, topic_scale=3.0):
    """Turns clustered by conversation topic; ``shift`` moves the whole sample."""
    rows, groups = [], []
    for c in range(n_convs):
        topic = rng.normal(0, topic_scale, dim)
        for _ in range(turns_per_conv):
            rows.append(topic + rng.normal(0, 1, dim) + shift)
            groups.append(f"{prefix}{c}")
    return np.array(rows), groups


def test_same_distribution_is_near_chance():
    rng = np.random.default_rng(0)
    xa, ga = _conversations(rng, 40, 3, 8, "a")
    xb, gb = _conversations(rng, 40, 3, 8, "b")
    res = c2st(xa, xb, ga, gb, n_splits=5, seed=0)
    assert res.grouped and res.n_per_class == 120 and res.n_splits == 5
    assert res.distance < 10
    assert res.distance == pytest.approx(abs(res.accuracy - 50))


def test_separable_samples_are_detected():
    rng = np.random.default_rng(1)
    xa, ga = _conversations(rng, 30, 2, 8, "a", topic_scale=1.0)
    xb, gb = _conversations(rng, 30, 2, 8, "b", shift=3.0, topic_scale=1.0)
    res = c2st(xa, xb, ga, gb, seed=0)
    assert res.accuracy > 95 and res.distance > 45


def test_grouped_folds_matter():
    """Each conversation has its own topic; there is no real class difference. Plain stratified
    folds let the discriminator memorise conversations (high accuracy); grouped folds do not."""
    rng = np.random.default_rng(4)
    xa, ga = _conversations(rng, 24, 6, 40, "a", topic_scale=4.0)
    xb, gb = _conversations(rng, 24, 6, 40, "b", topic_scale=4.0)
    leaky = c2st(xa, xb, ga, gb, seed=0, grouped=False)
    honest = c2st(xa, xb, ga, gb, seed=0, grouped=True)
    assert leaky.accuracy > 80
    assert honest.distance < 12
    assert leaky.distance > honest.distance + 25


def test_unbalanced_classes_are_subsampled():
    rng = np.random.default_rng(3)
    xa, ga = _conversations(rng, 10, 2, 4, "a")
    xb, gb = _conversations(rng, 30, 2, 4, "b")
    assert c2st(xa, xb, ga, gb, seed=1).n_per_class == 20


def test_too_few_groups_or_bad_shapes_raise():
    x = np.zeros((4, 3))
    with pytest.raises(ValueError):
        c2st(x, x, ["a"] * 4, ["b"] * 4)
    with pytest.raises(ValueError):
        c2st(x, np.zeros((4, 2)), list("abcd"), list("efgh"))
    with pytest.raises(ValueError):
        c2st(x, x, ["a"], list("efgh"))
