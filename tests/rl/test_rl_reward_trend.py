"""Reward trend: quarters, means, bootstrap CI of last-minus-first, verdicts, group resampling."""

from __future__ import annotations

import numpy as np
import pytest

from mimesis.eval.agents.reward_trend import (
    episode_rewards,
    history_rewards,
    quarter_steps,
    reward_trend,
    trend_markdown,
)


@pytest.mark.parametrize(("n", "first", "last"), [
    (2, [1], [2]), (5, [1, 2], [4, 5]), (8, [1, 2], [7, 8]), (3, [1], [3]),
    (9, [1, 2, 3], [7, 8, 9]),
])
def test_quarters_are_the_right_steps(n: int, first: list[int], last: list[int]) -> None:
    assert quarter_steps(range(1, n + 1)) == (first, last)
    # the trend uses the same steps: only the marked steps carry a non-zero reward
    rewards = {s: [1.0 if s in first else 3.0 if s in last else 100.0] * 4
               for s in range(1, n + 1)}
    t = reward_trend(rewards)
    assert (t["first_steps"], t["last_steps"]) == (first, last)
    assert (t["mean_first"], t["mean_last"], t["diff"]) == (1.0, 3.0, 2.0)
    assert (t["n_first"], t["n_last"]) == (4 * len(first), 4 * len(last))


def test_quarters_follow_step_order_not_insertion_order() -> None:
    t = reward_trend({8: [1.0, 1.0], 1: [0.0, 0.0], 4: [0.5, 0.5], 2: [0.2, 0.2]})
    assert (t["first_steps"], t["last_steps"]) == ([1], [8])
    assert t["diff"] == 1.0


def test_rising_series_rose_with_ci_above_zero() -> None:
    rng = np.random.default_rng(1)
    rewards = {s: list(np.clip(0.1 + 0.05 * s + rng.normal(0, 0.1, 16), 0, 1))
               for s in range(1, 13)}
    t = reward_trend(rewards)
    assert t["verdict"] == "rose"
    assert 0 < t["ci_low"] < t["diff"] < t["ci_high"]
    falling = reward_trend({s: [1 - v for v in r] for s, r in rewards.items()})
    assert falling["verdict"] == "fell" and falling["ci_high"] < 0


def test_flat_noisy_series_is_flat() -> None:
    rng = np.random.default_rng(2)
    rewards = {s: list(rng.uniform(0, 1, 16)) for s in range(1, 13)}
    t = reward_trend(rewards)
    assert t["verdict"] == "flat (noise)"
    assert t["ci_low"] < 0 < t["ci_high"]
    assert t["diff"] != 0  # noise moves the means; the CI is what says it is noise


def test_seeded_and_reproducible() -> None:
    rng = np.random.default_rng(3)
    rewards = {s: list(rng.uniform(0, 1, 8)) for s in range(1, 9)}
    assert reward_trend(rewards, seed=5) == reward_trend(rewards, seed=5)
    assert reward_trend(rewards, seed=5)["ci_low"] != reward_trend(rewards, seed=6)["ci_low"]


def _grouped() -> tuple[dict[int, list[float]], dict[int, list[int]]]:
    """8 steps, 2 scenarios x 8 identical-reward episodes per step: the group is the unit."""
    per_step = {1: (0.2, 0.6), 2: (0.3, 0.5), 7: (0.3, 0.8), 8: (0.4, 0.7)}
    rewards = {s: [per_step.get(s, (0.5, 0.5))[g] for g in (0, 1) for _ in range(8)]
               for s in range(1, 9)}
    return rewards, {s: [0] * 8 + [1] * 8 for s in rewards}


def test_groups_are_resampled_as_units() -> None:
    rewards, groups = _grouped()
    by_episode = reward_trend(rewards)
    by_group = reward_trend(rewards, groups_by_step=groups)
    assert by_episode["diff"] == pytest.approx(by_group["diff"]) == pytest.approx(0.15)
    # 32 correlated episodes per quarter look like 32 draws; there are only 4 scenarios
    assert (by_episode["units_first"], by_group["units_first"]) == (32, 4)
    assert by_episode["verdict"] == "rose"
    assert by_group["verdict"] == "flat (noise)"
    assert by_group["ci_high"] - by_group["ci_low"] > by_episode["ci_high"] - by_episode["ci_low"]


def test_group_ids_are_per_step() -> None:
    # group 0 of step 1 and group 0 of step 2 are different scenarios: 2 units, not 1
    t = reward_trend({1: [0.0, 0.0], 2: [1.0, 1.0], 3: [0.0, 1.0], 4: [1.0, 0.0],
                      5: [0.5, 0.5], 6: [0.5, 0.5], 7: [0.5, 0.5], 8: [0.5, 0.5]},
                     groups_by_step={s: [0, 0] for s in range(1, 9)})
    assert t["units_first"] == 2 and t["mean_first"] == 0.5


def test_one_unit_per_quarter_gives_no_ci_and_flat() -> None:
    t = reward_trend(history_rewards([{"step": 1, "reward": 0.1}, {"step": 2, "reward": 0.9}]))
    assert t["diff"] == pytest.approx(0.8)
    assert (t["ci_low"], t["ci_high"], t["verdict"]) == (None, None, "flat (noise)")
    assert "n/a" in trend_markdown({"tiny": t})


def test_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match="at least 2 steps"):
        reward_trend({1: [0.5, 0.6]})
    with pytest.raises(ValueError, match="at least 2 steps"):
        reward_trend({})
    with pytest.raises(ValueError, match="step 2: no rewards"):
        reward_trend({1: [0.5], 2: []})
    with pytest.raises(ValueError, match="non-finite"):
        reward_trend({1: [0.5], 2: [float("nan")]})
    with pytest.raises(ValueError, match="2 rewards but 1 group ids"):
        reward_trend({1: [0.5, 0.5], 2: [0.5]}, groups_by_step={1: [0], 2: [0]})


def test_readers_of_episodes_jsonl_and_history() -> None:
    def row(step: int, reward: float, group: int, scenario: str) -> dict:
        return {"step": step, "reward": reward, "group_id": group, "scenario_id": scenario,
                "env": scenario.split(":")[0]}

    rows = [row(1, 0.0, 0, "TravelGym:a"), row(1, 1.0, 0, "TravelGym:a"),
            row(1, 1.0, 0, "TauGym:b"), row(2, 0.5, 1, "TravelGym:c")]
    rewards, groups = episode_rewards(rows, env="TravelGym")
    assert rewards == {1: [0.0, 1.0], 2: [0.5]}
    assert groups == {1: [(0, "TravelGym:a")] * 2, 2: [(1, "TravelGym:c")]}
    everyone, groups_all = episode_rewards(rows)
    assert everyone[1] == [0.0, 1.0, 1.0]
    assert len(set(groups_all[1])) == 2  # same group_id, different scenario: two groups
    history = [{"step": 1, "reward": 0.2, "reward/TravelGym": 0.3}, {"step": 2, "reward": 0.4}]
    assert history_rewards(history) == {1: [0.2], 2: [0.4]}
    assert history_rewards(history, "reward/TravelGym") == {1: [0.3]}


def test_markdown_has_one_row_per_arm() -> None:
    rng = np.random.default_rng(4)
    up = reward_trend({s: list(0.1 * s + rng.normal(0, 0.05, 8)) for s in range(1, 9)})
    md = trend_markdown({"mimesis": up, "prompted": reward_trend({1: [0.4, 0.5], 2: [0.5, 0.4],
                                                                  3: [0.45, 0.45]})})
    lines = md.splitlines()
    assert len(lines) == 4
    assert lines[2].startswith("| mimesis | 8 |") and "rose" in lines[2]
    assert lines[3].startswith("| prompted | 3 |") and "flat (noise)" in lines[3]


def test_group_signal_counts_groups_with_reward_variance_per_step() -> None:
    """Bug: groups pooled across steps (same group id at two steps counted once) or a flat
    group counted as signal."""
    from mimesis.eval.agents.reward_trend import group_signal

    rewards = {1: [0.0, 0.0, 1.0, 1.0], 2: [0.0, 1.0, 0.5, 0.5]}
    groups = {1: ["a", "a", "b", "b"], 2: ["a", "a", "b", "b"]}
    signal = group_signal(rewards, groups)
    assert signal == {"groups": 4, "with_signal": 1, "share": 0.25}


def test_why_not_rising_gives_the_measured_reasons_and_nothing_when_it_rose() -> None:
    """Bug: a rise explained away, or a flat trend reported without its figures."""
    from mimesis.eval.agents.reward_trend import why_not_rising

    flat = {"verdict": "flat (noise)", "ci_low": -0.2, "ci_high": 0.0, "units": "groups",
            "units_first": 6, "units_last": 6, "mean_first": 0.15}
    difficulty = {"enabled": True, "selection": {"in_band": False,
                                                 "reason": "no level succeeds inside the band"}}
    reasons = why_not_rising(flat, {"groups": 24, "with_signal": 10, "share": 10 / 24},
                             difficulty)
    text = " ".join(reasons)
    assert "±0.10" in text and "10 of 24 groups (42%)" in text
    assert "first quarter's mean reward was 0.15" in text and "no level succeeds" in text
    in_band = {"enabled": True, "selection": {"in_band": True, "reason": "level 1"}}
    assert not any("difficulty" in r for r in why_not_rising(flat, None, in_band))
    assert why_not_rising({**flat, "verdict": "rose", "ci_low": 0.05}, None, difficulty) == []
