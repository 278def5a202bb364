"""mean_ci (scipy's percentile bootstrap) gives the numbers of the resampling it replaced, seeded
or on a shared generator, so the evaluation's CIs did not move when it switched."""

from __future__ import annotations

import numpy as np
import pytest

from mimesis.stats import mean_ci


def _by_hand(values, n_bootstrap, ci, rng):
    x = np.asarray(values, dtype=float)
    means = x[rng.integers(0, x.size, (n_bootstrap, x.size))].mean(axis=1)
    tail = (1 - ci) / 2 * 100
    return tuple(float(v) for v in np.percentile(means, [tail, 100 - tail]))


@pytest.mark.parametrize("seed", range(20))
def test_seeded_ci_is_the_hand_written_resampling(seed):
    data = np.random.default_rng(100 + seed)
    x = data.random(int(data.integers(2, 50))).round(2)
    expected = _by_hand(x, 1000, 0.95, np.random.default_rng(seed))
    assert mean_ci(x, 1000, 0.95, seed) == pytest.approx(expected, abs=1e-12)


def test_a_shared_generator_advances_as_before_one_value_included():
    levels = [[0.2, 0.4, 1.0], [0.5], [0.0, 0.0, 1.0, 1.0], [1.0, 1.0]]
    old, new = np.random.default_rng(7), np.random.default_rng(7)
    for values in levels:
        assert mean_ci(values, 500, 0.95, new) == pytest.approx(
            _by_hand(values, 500, 0.95, old), abs=1e-12)
    assert old.random() == new.random()


def test_edge_cases():
    assert mean_ci([1.0, 1.0, 1.0]) == (1.0, 1.0)
    assert mean_ci([0.3]) == (0.3, 0.3)
    with pytest.raises(ValueError, match="at least one value"):
        mean_ci([])
