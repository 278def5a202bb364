"""The agents tables never print an MDE of 0 or an empty interval: they say why there is none."""

from __future__ import annotations

from mimesis.eval.agents.claim import claim_markdown
from mimesis.eval.agents.pairs import MIN_SCENARIOS, outcome_rows, paired_differences
from mimesis.eval.agents.tables import agent_table_markdown, comparison_table_markdown
from mimesis.rollout.records import Episode, ScenarioSpec, TurnRecord


def _ep(env: str, seed: int, reward: float) -> Episode:
    return Episode.model_construct(env=env, spec=ScenarioSpec(env=env, seed=seed), reward=reward,
                                   termination="answer", user_end_reason=None,
                                   turns=[TurnRecord(agent_text="x")])


def _diffs(n: int, reward_a, reward_b, user: str = "agenda") -> list[dict]:
    rows = outcome_rows("grpo", user, [_ep("TravelGym", s, reward_a(s)) for s in range(n)])
    rows += outcome_rows("sft", user, [_ep("TravelGym", s, reward_b(s)) for s in range(n)])
    return paired_differences(rows, [("grpo", "sft")], n_bootstrap=100)


def _overall_line(table: str) -> str:
    return next(line for line in table.splitlines() if "| grpo − sft | agenda | ALL |" in line)


def test_equal_paired_differences_give_no_mde_and_say_why():
    diffs = _diffs(8, lambda s: 0.0, lambda s: 0.0)  # both agents fail every scenario
    overall = next(d for d in diffs if d["env"] == "ALL")
    assert overall["mde"] == 0.0  # what the spread gives: the table must not print it as a size
    line = _overall_line(comparison_table_markdown(diffs))
    assert "0.00 |" not in line.split("| noise |")[1]
    assert "no spread to size it" in line and "whatever the spread" in line
    claim = claim_markdown(diffs, [], {}, ["agenda"], training_user="frozen")
    assert "MDE 0.00" not in claim and "| 0.00 |" not in claim
    assert "no spread to size it" in claim


def test_too_few_scenarios_give_no_interval_and_say_why():
    diffs = _diffs(MIN_SCENARIOS - 2, lambda s: float(s % 2), lambda s: 0.0)
    table = comparison_table_markdown(diffs)
    claim = claim_markdown(diffs, [], {}, ["agenda"], training_user="frozen")
    for text in (table, claim):
        assert "[–, –]" not in text and "–, –" not in text
        assert f"no CI: fewer than {MIN_SCENARIOS} scenarios" in text


def test_a_row_without_episodes_says_so_instead_of_an_empty_interval():
    nan = float("nan")
    rows = [{"agent": "grpo", "simulator": "agenda", "env": "TravelGym", "n": 0,
             "success_rate": nan, "success_ci_low": nan, "success_ci_high": nan,
             "mean_reward": nan, "reward_ci_low": nan, "reward_ci_high": nan,
             "mean_turns": nan, "reward_std": nan},
            {"agent": "grpo", "simulator": "agenda", "env": "ALL", "n": 0,
             "success_rate": nan, "success_ci_low": nan, "success_ci_high": nan,
             "mean_reward": nan, "reward_ci_low": nan, "reward_ci_high": nan, "mean_turns": nan}]
    table = agent_table_markdown(rows)
    assert "[–, –]" not in table and "no CI: no episodes" in table


def test_regular_comparisons_still_print_numbers():
    diffs = _diffs(12, lambda s: float(s % 3 != 0), lambda s: float(s % 4 == 0))
    line = _overall_line(comparison_table_markdown(diffs))
    overall = next(d for d in diffs if d["env"] == "ALL")
    assert overall["mde"] > 0 and f"{overall['mde']:.2f}" in line
    assert "no CI" not in line and "n/a" not in line and "[" in line
