"""Elicitation measures: ask-before-answer, hidden TravelGym preferences the user states, and the
per-(agent, user) table with scenario bootstrap CIs."""

from __future__ import annotations

import math

import pytest

from mimesis.envs import make
from mimesis.envs.travel.gym import preference_text
from mimesis.envs.travel.tasks import ATTRIBUTES, PRICE
from mimesis.eval.agents.elicitation import (
    METRICS,
    cells_from_records,
    elicitation_markdown,
    elicitation_table,
    episode_elicitation,
    scenario_bootstrap,
)
from mimesis.rollout.records import Episode, ScenarioSpec, TurnRecord
from mimesis.schemas import Scenario

KWARGS = {"n_options": 6}  # as params.yaml plays TravelGym; not the constructor default


def ask(reply: str = "I don't mind.") -> TurnRecord:
    return TurnRecord(agent_text="[action] What do you want?", kind="action",
                      to_user="What do you want?", obs=reply, obs_source="user")


def answer(option: str = "X1") -> TurnRecord:
    return TurnRecord(agent_text=f"[answer] {option}", kind="answer", obs="Recorded.")


def episode(turns: list[TurnRecord], env: str = "FunctionGym", seed: int = 0,
            task_id: str = "t0", env_kwargs: dict | None = None) -> Episode:
    spec = ScenarioSpec(env=env, seed=seed, env_kwargs=env_kwargs or {})
    return Episode(scenario_id=f"{env}:{task_id}", group_id=0, index=0, env=env, task_id=task_id,
                   spec=spec, scenario=Scenario(goal="g", annotator="test"), prompt_ids=[],
                   completion_ids=[], env_mask=[], logprobs=[], turn_ids=[], reward=0.0,
                   termination="answer", truncated=False, messages=[], turns=turns)


def travel(seed: int = 0):
    env = make("TravelGym", max_turns=8, **KWARGS)
    env.reset(seed=seed)
    return env.task


def travel_episode(turns: list[TurnRecord], seed: int = 0) -> Episode:
    return episode(turns, "TravelGym", seed, travel(seed).id, KWARGS)


def prefs(seed: int):
    return [(a.kind, p) for a in travel(seed).aspects for p in a.preferences]


# ----------------------------------------------------------------------------- asking first
def test_answer_at_turn_zero_is_not_asked_first():
    m = episode_elicitation(episode([answer(), ask()]))
    assert m["asked_first"] is False and m["questions"] == 0  # the later question is after it
    assert m["answered"] is True and m["turns"] == 2


def test_ask_then_answer_is_asked_first():
    m = episode_elicitation(episode([ask(), ask(), answer(), ask()]))
    assert m["asked_first"] is True and m["questions"] == 2 and m["turns"] == 4


def test_no_answer_with_a_question_counts_as_asked_but_not_answered():
    m = episode_elicitation(episode([ask()]))
    assert (m["asked_first"], m["answered"], m["questions"]) == (True, False, 1)


def test_only_messages_that_reached_the_user_are_questions():
    search = TurnRecord(agent_text="[search] hotel", kind="search", obs="H1", obs_source="tool")
    cut = TurnRecord(agent_text="[action] One more?", kind="action", obs="Turn limit reached.")
    budget_cut = TurnRecord(agent_text="[action] Wh")  # kind None: the token budget ended it
    m = episode_elicitation(episode([search, cut, budget_cut]))
    assert m["questions"] == 0 and m["asked_first"] is False and m["answered"] is False


def test_other_envs_have_no_fact_count():
    m = episode_elicitation(episode([ask(), answer()]))
    assert m["facts_hidden"] is None and m["facts_elicited"] is None


# ----------------------------------------------------------------------------- TravelGym facts
def test_travel_reply_stating_a_hidden_preference_counts_it():
    kind, pref = next((k, p) for k, p in prefs(0) if p.hidden and p.attr != PRICE)
    m = episode_elicitation(travel_episode([ask(f"Well, {preference_text(kind, pref)}."),
                                            answer()]))
    assert m["facts_hidden"] == len(prefs(0)) == 3
    assert m["asked_only_hidden"] == sum(p.hidden for _, p in prefs(0)) == 2
    assert m["facts_elicited"] == 1 and m["asked_only_elicited"] == 1


def test_travel_reply_naming_a_disallowed_value_is_not_a_reveal():
    kind, pref = next((k, p) for k, p in prefs(0) if p.hidden and p.attr != PRICE)
    wrong = next(v for v in ATTRIBUTES[kind][pref.attr] if v not in pref.allowed)
    for reply in (f"I'd like {wrong}.", f"Anything but {wrong}.", "Yes, that one."):
        assert episode_elicitation(travel_episode([ask(reply)]))["facts_elicited"] == 0, reply


def test_travel_budget_counts_only_at_the_true_amount():
    _, budget = next((k, p) for k, p in prefs(1) if p.attr == PRICE)
    right = travel_episode([ask(f"At most ${budget.max_price} a night.")], seed=1)
    wrong = travel_episode([ask(f"At most ${budget.max_price + 200} a night.")], seed=1)
    assert episode_elicitation(right)["facts_elicited"] == 1
    assert episode_elicitation(wrong)["facts_elicited"] == 0


def test_only_user_replies_state_facts():
    kind, pref = next((k, p) for k, p in prefs(0) if not p.hidden)
    said = preference_text(kind, pref)
    turns = [TurnRecord(agent_text=f"[action] Is {said}?", kind="action", to_user=f"Is {said}?",
                        obs="Yes.", obs_source="user"),
             TurnRecord(agent_text="[search] food", kind="search", obs=said, obs_source="tool")]
    assert episode_elicitation(travel_episode(turns))["facts_elicited"] == 0


def test_every_preference_stated_in_one_reply_counts_all():
    reply = "; ".join(preference_text(k, p) for k, p in prefs(0))
    m = episode_elicitation(travel_episode([ask(reply)]))
    assert m["facts_elicited"] == m["facts_hidden"] == 3 and m["asked_only_elicited"] == 2


def test_jsonl_record_gives_the_same_measures_as_the_episode():
    kind, pref = prefs(0)[0]
    ep = travel_episode([ask(preference_text(kind, pref)), answer()])
    record = {"agent": "base", "user": "frozen", **ep.model_dump(
        mode="json", exclude={"prompt_ids", "completion_ids", "env_mask", "logprobs", "turn_ids"})}
    assert episode_elicitation(record) == episode_elicitation(ep)


def test_a_spec_that_rebuilds_another_task_is_refused():
    ep = travel_episode([ask()])
    without_kwargs = ep.model_copy(update={"spec": ScenarioSpec(env="TravelGym", seed=0)})
    with pytest.raises(ValueError, match="rebuilds task"):
        episode_elicitation(without_kwargs)  # env_kwargs change the trip: they must be used


# ----------------------------------------------------------------------------- table
def test_bootstrap_ci_contains_the_mean_and_is_degenerate_for_identical_scenarios():
    mean, lo, hi = scenario_bootstrap([0.0, 1.0, 1.0, 0.0, 1.0], n_bootstrap=500)
    assert mean == pytest.approx(0.6) and lo <= mean <= hi and lo < hi
    assert scenario_bootstrap([0.4] * 6) == pytest.approx((0.4, 0.4, 0.4))
    assert scenario_bootstrap([0.0, 1.0, 1.0], seed=3) == scenario_bootstrap([0.0, 1.0, 1.0],
                                                                            seed=3)
    one = scenario_bootstrap([1.0])
    assert one[0] == 1.0 and math.isnan(one[1]) and math.isnan(one[2])
    assert all(math.isnan(v) for v in scenario_bootstrap([]))


def test_table_averages_scenarios_and_resamples_their_episodes_together():
    # Scenario 0: three episodes that ask first; scenarios 1-4: one each that answers at once.
    eps = [episode([ask(), answer()], seed=0) for _ in range(3)]
    eps += [episode([answer()], seed=s) for s in range(1, 5)]
    (row,) = elicitation_table({("base", "frozen"): eps}, n_bootstrap=300)
    assert (row["agent"], row["user"], row["env"], row["n"], row["n_scenarios"]) == (
        "base", "frozen", "ALL", 7, 5)
    assert row["ask_rate"] == 0.2  # mean of scenario means, not 3/7 of episodes
    # a resample holds scenario 0 (all three of its episodes together) 0 to 5 times
    assert row["ask_rate_ci_low"] == 0.0 and 0.4 <= row["ask_rate_ci_high"] <= 1.0
    assert row["questions"] == 0.2 and row["turns"] == 1.2
    assert math.isnan(row["elicited_fraction"])  # nothing hidden outside TravelGym
    (few,) = elicitation_table({("base", "frozen"): eps[:4]}, n_bootstrap=300)
    assert few["n_scenarios"] == 2 and few["ask_rate"] == 0.5  # too few scenarios for a CI
    assert math.isnan(few["ask_rate_ci_low"]) and math.isnan(few["ask_rate_ci_high"])


def test_table_identical_scenarios_give_a_zero_width_ci():
    kind, pref = prefs(0)[0]
    eps = [travel_episode([ask(preference_text(kind, pref)), answer()]) for _ in range(2)]
    eps += [episode([ask(), answer()], seed=s) for s in range(5, 10)]
    rows = elicitation_table({("grpo", "agenda"): eps}, by_env=True, n_bootstrap=200)
    travel_row, function_row = rows
    assert (travel_row["env"], function_row["env"]) == ("TravelGym", "FunctionGym")
    assert travel_row["n_scenarios"] == 1 and math.isnan(travel_row["ask_rate_ci_low"])
    assert travel_row["elicited_fraction"] == pytest.approx(1 / 3)
    assert travel_row["asked_only_fraction"] == (0.5 if pref.hidden else 0.0)
    assert function_row["ask_rate"] == function_row["ask_rate_ci_low"] == 1.0
    assert function_row["ask_rate_ci_high"] == 1.0


def test_cells_from_records_and_markdown():
    records = [{"agent": a, "user": u, **episode([ask(), answer()], seed=s).model_dump(
        mode="json")} for a in ("base", "grpo") for u in ("frozen",) for s in range(5)]
    cells = cells_from_records(records)
    assert list(cells) == [("base", "frozen"), ("grpo", "frozen")]
    rows = elicitation_table(cells, n_bootstrap=100)
    table = elicitation_markdown(rows).splitlines()
    assert table[0].split(" | ")[5:] == [*list(METRICS)[:-1], f"{list(METRICS)[-1]} |"]
    assert len(table) == 4 and table[2].startswith("| base | frozen | ALL | 5 | 5 | 1.00 [1.00")
    assert "| – |" in table[3]  # fractions undefined outside TravelGym
