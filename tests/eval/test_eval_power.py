"""The power calculation behind every MDE the reports state (docs/claim.md rule 3): the formula's
quantiles, the standard error over environments, the worst case, the n it asks for, and that a
paired test really detects an effect of the stated size about 80% of the time."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from mimesis.eval.power import mde, paired_se, scenarios_needed, worst_case_mde


def test_mde_uses_both_quantiles_and_student_t_for_small_n():
    # normal limit: (z_0.975 + z_0.8) * se
    assert mde(0.1, 1_000_000) == pytest.approx((1.959964 + 0.841621) * 0.1, rel=1e-4)
    # small n: t quantiles are wider than the normal ones
    assert mde(0.1, 5) == pytest.approx((stats.t.ppf(0.975, 5) + stats.t.ppf(0.8, 5)) * 0.1)
    assert mde(0.1, 5) > mde(0.1, 1_000_000)
    # more power or a stricter level ask for a larger effect
    assert mde(0.1, 50, power=0.9) > mde(0.1, 50) > mde(0.1, 50, alpha=0.1)
    with pytest.raises(ValueError, match="standard error"):
        mde(-0.1, 10)
    with pytest.raises(ValueError, match="alpha and power"):
        mde(0.1, 10, power=1.0)


def test_paired_se_is_the_se_of_the_unweighted_mean_over_envs():
    a, b = [0.0, 1.0, 0.0, 1.0], [0.5, -0.5, 0.5]
    se, df = paired_se({"A": a, "B": b})
    expected = math.sqrt(np.var(a, ddof=1) / 4 + np.var(b, ddof=1) / 3) / 2
    assert se == pytest.approx(expected) and df == 7 - 2
    # one env alone: the plain standard error of the mean
    assert paired_se({"A": a})[0] == pytest.approx(np.std(a, ddof=1) / 2)
    # one scenario: no variance estimate, the worst case (sd 1) counts
    assert paired_se({"A": [0.3]})[0] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="A: no scenarios"):
        paired_se({"A": []})


def test_worst_case_holds_for_any_reward_in_the_unit_interval():
    n = 48
    worst = worst_case_mde({"TravelGym": n})
    # the largest sd a paired difference of [0, 1] rewards can have is 1 (half -1, half +1)
    extreme = np.array([1.0, -1.0] * (n // 2))
    assert np.std(extreme) == pytest.approx(1.0)
    assert worst == pytest.approx(mde(np.std(extreme) / math.sqrt(n), n - 1))
    rng = np.random.default_rng(1)
    for _ in range(20):  # any other [0, 1] rewards: a smaller (population) spread
        d = rng.uniform(0, 1, n) - rng.uniform(0, 1, n)
        assert mde(np.std(d) / math.sqrt(n), n - 1) < worst
    with pytest.raises(ValueError):
        worst_case_mde({"X": 0})


def test_scenarios_needed_is_the_smallest_n_whose_mde_reaches_the_effect():
    n = scenarios_needed(0.43, 0.18)
    assert mde(0.43 / math.sqrt(n), n - 1) <= 0.18 < mde(0.43 / math.sqrt(n - 1), n - 2)
    assert 45 <= n <= 52  # docs/claim.md: n = 48 for MDE 0.18 at SD 0.43
    with pytest.raises(ValueError, match="effect > 0"):
        scenarios_needed(0.4, 0.0)


def test_an_effect_of_the_stated_mde_is_detected_about_80_percent_of_the_time():
    rng = np.random.default_rng(0)
    n, sd = 48, 0.43
    effect = mde(sd / math.sqrt(n), n - 1)
    trials = 2000
    diffs = rng.normal(effect, sd, size=(trials, n))
    t = diffs.mean(axis=1) / (diffs.std(axis=1, ddof=1) / math.sqrt(n))
    detected = np.mean(np.abs(t) > stats.t.ppf(0.975, n - 1))
    assert 0.76 <= detected <= 0.84
    # and at half that effect the same test misses most of the time
    half = rng.normal(effect / 2, sd, size=(trials, n))
    t_half = half.mean(axis=1) / (half.std(axis=1, ddof=1) / math.sqrt(n))
    assert np.mean(np.abs(t_half) > stats.t.ppf(0.975, n - 1)) < 0.4
