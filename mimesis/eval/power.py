"""Power of a paired comparison: the smallest effect it detects, and the n it needs.

For a paired difference of means over ``n`` scenarios with per-scenario differences of standard
deviation ``sd``, a two-sided test at level ``alpha`` has power ``power`` against an effect of

    MDE = (t_{1-alpha/2, n-1} + t_{power, n-1}) * sd / sqrt(n)

(the usual normal-approximation formula with Student t quantiles for small ``n``; Cohen 1988,
*Statistical Power Analysis for the Behavioral Sciences*, ch. 2; Bloom 1995, "Minimum detectable
effects", Evaluation Review 19(5)). Several environments averaged with equal weight (the agents
table's ``ALL``) have standard error ``sqrt(sum_e sd_e^2 / n_e) / E``, used in place of
``sd / sqrt(n)``. A reward in [0, 1] has paired differences in [-1, 1], so ``sd <= 1``: the
*worst-case* MDE (:func:`worst_case_mde`) holds whatever the variance turns out to be.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
from scipy import stats


def _multiplier(df: int, alpha: float, power: float) -> float:
    if not 0 < alpha < 1 or not 0 < power < 1:
        raise ValueError(f"alpha and power must lie in (0, 1), got {alpha}, {power}")
    df = max(int(df), 1)
    return float(stats.t.ppf(1 - alpha / 2, df) + stats.t.ppf(power, df))


def mde(se: float, df: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """Minimal detectable effect of a paired comparison with standard error ``se``.

    Args:
        se: Standard error of the mean paired difference (reward units).
        df: Degrees of freedom (scenarios − 1; floored at 1).
        alpha: Two-sided test level.
        power: Probability of detecting an effect of the returned size.

    Returns:
        The effect, in the units of ``se``.

    Raises:
        ValueError: ``se`` negative, ``alpha`` or ``power`` outside (0, 1).

    >>> round(mde(0.1, 10_000), 3)  # normal limit: (1.96 + 0.84) * se
    0.28
    """
    if se < 0 or math.isnan(se):
        raise ValueError(f"standard error must be >= 0, got {se}")
    return _multiplier(df, alpha, power) * se


def paired_se(diffs_by_env: Mapping[str, Sequence[float]]) -> tuple[float, int]:
    """(standard error, degrees of freedom) of the unweighted mean over envs of the mean paired
    differences; ``diffs_by_env`` maps env → one difference per scenario.

    An env with one scenario has no variance estimate: it contributes the worst case (sd = 1).

    Raises:
        ValueError: no envs, or an env without scenarios.
    """
    if not diffs_by_env:
        raise ValueError("no environments")
    var, n_total = 0.0, 0
    for env, d in diffs_by_env.items():
        x = np.asarray(d, dtype=float)
        if x.size == 0:
            raise ValueError(f"{env}: no scenarios")
        sd2 = float(np.var(x, ddof=1)) if x.size > 1 else 1.0
        var += sd2 / x.size
        n_total += x.size
    e = len(diffs_by_env)
    return math.sqrt(var) / e, n_total - e if n_total > e else 1


def worst_case_mde(n_by_env: Mapping[str, int], alpha: float = 0.05, power: float = 0.8) -> float:
    """The MDE for rewards in [0, 1] whatever their variance (sd = 1 in every env).

    >>> round(worst_case_mde({"X": 8}), 2)
    1.15
    """
    if not n_by_env or min(n_by_env.values()) < 1:
        raise ValueError(f"need >= 1 scenario per env, got {dict(n_by_env)}")
    e = len(n_by_env)
    se = math.sqrt(sum(1.0 / n for n in n_by_env.values())) / e
    n_total = sum(n_by_env.values())
    return mde(se, max(n_total - e, 1), alpha, power)


def scenarios_needed(sd: float, effect: float, alpha: float = 0.05, power: float = 0.8,
                     n_max: int = 100_000) -> int:
    """Smallest number of paired scenarios whose MDE is at most ``effect`` (one env).

    Raises:
        ValueError: ``effect`` not positive or ``sd`` negative; more than ``n_max`` needed.

    >>> scenarios_needed(0.3, 0.1)
    73
    """
    if effect <= 0 or sd < 0:
        raise ValueError(f"need effect > 0 and sd >= 0, got {effect}, {sd}")
    for n in range(2, n_max + 1):
        if mde(sd / math.sqrt(n), n - 1, alpha, power) <= effect:
            return n
    raise ValueError(f"more than {n_max} scenarios needed for effect {effect} at sd {sd}")
