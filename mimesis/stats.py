"""The percentile bootstrap CI of a mean, shared by the agent evaluation and the RL stages."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
from scipy.stats import bootstrap


def mean_ci(values: Sequence[float] | np.ndarray, n_bootstrap: int = 1000, ci: float = 0.95,
            rng: np.random.Generator | int = 0) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean of ``values`` (each value one unit: a scenario, an
    episode), by :func:`scipy.stats.bootstrap`.

    Args:
        values: ``(n,)`` values, ``n >= 1``.
        n_bootstrap: Resamples.
        ci: Confidence level, e.g. 0.95.
        rng: A generator (its state advances, so successive calls draw anew) or a seed.

    Returns:
        ``(low, high)``; ``(v, v)`` when every value is ``v`` (one value included).

    Raises:
        ValueError: no value.

    Source: Efron & Tibshirani (1993), ch. 13, the percentile interval.
    """
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        raise ValueError("a bootstrap CI needs at least one value")
    if x.size == 1:  # scipy refuses one value; every resample is that value
        if isinstance(rng, np.random.Generator):  # draw as scipy would: later calls stay put
            rng.integers(0, 1, (n_bootstrap, 1))
        return float(x[0]), float(x[0])
    with warnings.catch_warnings():  # all values equal: scipy warns, the interval is (v, v)
        warnings.simplefilter("ignore")
        res = bootstrap((x,), np.mean, n_resamples=n_bootstrap, confidence_level=ci,
                        method="percentile", vectorized=True,
                        rng=rng if isinstance(rng, np.random.Generator) else
                        np.random.default_rng(rng))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)
