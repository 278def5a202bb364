"""Pre-registered difficulty rule: band, target, ties, nearest out of band, CIs, ladder checks."""

from __future__ import annotations

import inspect
import json

import pytest

from mimesis.envs.telepathy.gym import TelepathyGym
from mimesis.envs.travel.gym import TravelGym
from mimesis.rl.difficulty import (
    DifficultyLevel,
    DifficultyRule,
    LevelMeasurement,
    select_level,
    selection_markdown,
    validate_ladder,
)

RULE = DifficultyRule(low=0.2, high=0.7, target=0.45, min_episodes=4)


def _ladder(*rates: float, scenarios: int = 10) -> list[LevelMeasurement]:
    """One level per rate; every scenario's episodes average to exactly that rate."""
    return [LevelMeasurement(DifficultyLevel("TravelGym", {"n_preferences": i + 1,
                                                           "n_options": i + 4}),
                             [[rate, rate]] * scenarios) for i, rate in enumerate(rates)]


def test_api_takes_only_measurements_and_rule() -> None:
    # selection by held-out/eval results cannot be expressed: no such argument exists
    assert list(inspect.signature(select_level).parameters) == [
        "measurements", "rule", "n_bootstrap", "seed"]


def test_picks_the_level_in_band_not_the_one_below() -> None:
    sel = select_level(_ladder(0.5, 0.1), RULE)
    assert (sel.chosen, sel.in_band) == (0, True)
    sel = select_level(_ladder(0.1, 0.5), RULE)
    assert (sel.chosen, sel.in_band) == (1, True)
    assert sel.level.env_kwargs == {"n_preferences": 2, "n_options": 5}


def test_several_in_band_closest_to_target() -> None:
    # 0.65 is the first in band, 0.25 the hardest in band; 0.44 is closest to 0.45
    sel = select_level(_ladder(0.9, 0.65, 0.44, 0.25), RULE)
    assert (sel.chosen, sel.in_band) == (2, True)
    assert "target" in sel.reason


def test_tie_goes_to_the_harder_level() -> None:
    # equally far from the target / the band; float rounding alone favours the easier level
    assert select_level(_ladder(0.55, 0.35), RULE).chosen == 1
    assert select_level(_ladder(0.35, 0.55), RULE).chosen == 1
    assert select_level(_ladder(0.8, 0.1), RULE).chosen == 1
    assert select_level(_ladder(0.1, 0.8), RULE).chosen == 1


def test_none_in_band_nearest_with_in_band_false() -> None:
    sel = select_level(_ladder(0.95, 0.8, 0.05), RULE)
    assert (sel.chosen, sel.in_band) == (1, False)
    assert "no level" in sel.reason and "above" in sel.reason
    sel = select_level(_ladder(0.95, 0.15), RULE)
    assert (sel.chosen, sel.in_band) == (1, False)
    assert "below" in sel.reason


def test_band_edges_are_inside() -> None:
    assert select_level(_ladder(0.9, 0.7), RULE).in_band
    assert select_level(_ladder(0.2, 0.05), RULE).chosen == 0


def test_scenarios_weigh_equally_and_ci_is_over_scenarios() -> None:
    level = DifficultyLevel("TravelGym", {})
    # 30 episodes all solved in one scenario, 10 all failed in the other: 0.5, not 0.75
    unequal = select_level([LevelMeasurement(level, [[1.0] * 30, [0.0] * 10])], RULE)
    r = unequal.levels[0]
    assert r.success == pytest.approx(0.5)
    assert (r.n_scenarios, r.n_episodes) == (2, 40)
    # two scenarios: resampling scenarios can draw both zeros or both ones; episodes could not
    assert (r.ci_low, r.ci_high) == (0.0, 1.0)


def test_ci_contains_the_mean_and_is_seeded() -> None:
    values = [[0.0, 1.0], [1.0, 1.0], [0.0, 0.0], [0.5, 0.5], [1.0, 0.0], [1.0, 1.0]] * 3
    ms = [LevelMeasurement(DifficultyLevel("TravelGym", {}), values)]
    a, b = select_level(ms, RULE, seed=3), select_level(ms, RULE, seed=3)
    r = a.levels[0]
    assert r.ci_low < r.success < r.ci_high
    assert (r.ci_low, r.ci_high) == (b.levels[0].ci_low, b.levels[0].ci_high)
    flat = select_level(_ladder(0.4), RULE).levels[0]
    assert flat.ci_low == flat.ci_high == pytest.approx(0.4)


def test_refuses_underpowered_or_invalid_measurements() -> None:
    with pytest.raises(ValueError, match=r"level 1 .*3 episodes.*at least 4"):
        short = LevelMeasurement(DifficultyLevel("TravelGym", {}), [[1.0], [0.0], [1.0]])
        select_level([*_ladder(0.5), short], RULE)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        select_level([LevelMeasurement(DifficultyLevel("TravelGym", {}), [[2.0]] * 4)], RULE)
    with pytest.raises(ValueError, match="at least one"):
        select_level([], RULE)
    with pytest.raises(ValueError, match="low <= target <= high"):
        DifficultyRule(low=0.7, high=0.2)


def test_record_and_markdown() -> None:
    sel = select_level(_ladder(0.9, 0.5, 0.1), RULE)
    record = json.loads(json.dumps(sel.to_dict()))
    assert record["chosen"] == 1 and record["in_band"] is True
    assert record["rule"]["target"] == 0.45
    assert [row["success"] for row in record["levels"]] == pytest.approx([0.9, 0.5, 0.1])
    assert record["levels"][1]["env_kwargs"] == {"n_preferences": 2, "n_options": 5}
    md = selection_markdown(sel)
    chosen_rows = [line for line in md.splitlines() if "←" in line]
    assert len(chosen_rows) == 1 and "n_options=5, n_preferences=2" in chosen_rows[0]
    assert "0.900" in md and "Chosen: level 1 (in band)" in md


def test_validate_ladder_accepts_a_good_ladder() -> None:
    levels = [DifficultyLevel("TravelGym", {"n_preferences": 1, "n_options": 4}),
              DifficultyLevel("TravelGym", {"n_preferences": 2, "n_options": 5})]
    validate_ladder(levels, TravelGym)
    validate_ladder(levels, {"TravelGym": TravelGym})


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"n_preferences": 2, "n_options": 4}, "n_options >= n_preferences"),
    ({"n_preferences": 5, "n_options": 9}, "n_preferences in 1-4"),
    ({"n_prefs": 1}, "n_prefs"),
])
def test_validate_ladder_names_the_bad_level(kwargs: dict, needle: str) -> None:
    levels = [DifficultyLevel("TravelGym", {"n_preferences": 1, "n_options": 4}),
              DifficultyLevel("TravelGym", kwargs)]
    with pytest.raises(ValueError, match=r"difficulty level 1 \(TravelGym\(") as err:
        validate_ladder(levels, TravelGym)
    assert needle in str(err.value)


def test_validate_ladder_refuses_held_out_wrong_env_repeats_and_empty() -> None:
    with pytest.raises(ValueError, match="held_out env"):
        validate_ladder([DifficultyLevel("TelepathyGym", {})], TelepathyGym)
    with pytest.raises(ValueError, match=r"level 0.*not one of"):
        validate_ladder([DifficultyLevel("SearchGym", {})], TravelGym)
    with pytest.raises(ValueError, match=r"level 1.*repeats"):
        validate_ladder([DifficultyLevel("TravelGym", {"n_options": 9})] * 2, TravelGym)
    with pytest.raises(ValueError, match="empty"):
        validate_ladder([], TravelGym)
