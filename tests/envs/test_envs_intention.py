"""IntentionGym: shipped tasks, question matching, reward, episodes, UserRL loader, registry."""

from __future__ import annotations

import doctest
import json
from pathlib import Path

import pytest

import mimesis.envs.intention.gym as intention_module
from mimesis.envs import list_envs
from mimesis.envs.intention.gym import (
    IMPORTANCE_WEIGHTS,
    UNMATCHED_PENALTY,
    IntentionGym,
    IntentionTask,
    MissingDetail,
    detail_cues,
    intention_reward,
    load_userrl_tasks,
    match_questions,
)

PARIS = IntentionTask(
    "i-paris",
    "travel",
    "I would like to plan a trip to Paris next month.",
    (
        MissingDetail("Trip length", 3, "One week.", ("how long", "days", "nights", "duration")),
        MissingDetail("Budget", 2, "About 2000 euros.", ("budget", "cost", "spend", "price")),
        MissingDetail("Dining", 1, "Vegetarian food.", ("food", "dietary", "restaurants")),
    ),
)
TOTAL = 1.0 + 0.7 + 0.4


def play(env: IntentionGym, questions: list[str], end: str = "[answer] A week in Paris.") -> tuple:
    """Reset on PARIS, ask each question (the user answers "Sure."), then send ``end``."""
    env.reset(options={"task": PARIS})
    for q in questions:
        _, _, _, _, info = env.step(f"[action] {q}")
        assert info["to_user"] == q
        env.observe_user("Sure.")
    return env.step(end)


def test_shipped_tasks() -> None:
    tasks = IntentionGym.default_tasks()
    assert len(tasks) >= 30 and IntentionGym.scenario_count() == len(tasks)
    assert len({t.id for t in tasks}) == len(tasks)
    for t in tasks:
        assert t.request.strip() and 3 <= len(t.details) <= 5
        assert any(d.importance == 3 for d in t.details)
        cues = [detail_cues(d, t.request) for d in t.details]
        for i, d in enumerate(t.details):
            assert d.answer.strip() and d.keywords and cues[i], (t.id, d.description)
            # A question in the detail's own words reaches it, and only it.
            question = f"What is your {d.description.lower()}? {' '.join(d.keywords)}"
            assert match_questions([question], cues) == [i], (t.id, d.description)


def test_request_words_are_not_cues() -> None:
    cues = [detail_cues(d, PARIS.request) for d in PARIS.details]
    assert "paris" not in set().union(*cues) and "trip" not in set().union(*cues)
    assert match_questions(["Do you love Paris?", "Is this a trip?"], cues) == [None, None]
    # A detail named only by request words keeps them, so "which instrument?" reaches it.
    which = MissingDetail("Instrument", 3, "Piano", ("piano", "guitar"))
    assert match_questions(["Which instrument?"], [detail_cues(which, "Learn an instrument")]) == [0]


def test_matching_rules() -> None:
    cues = [detail_cues(d, PARIS.request) for d in PARIS.details]
    # One question covers one detail: an uncovered one first.
    assert match_questions(["What budget and how many days?"] * 3, cues) == [0, 1, 0]
    assert match_questions(["How long?", "How many days?"], cues) == [0, 0]  # a repeat
    assert match_questions(["Any dietary needs?", "Hello there!"], cues) == [2, None]


def test_reward_function() -> None:
    assert intention_reward([3, 2, 1], [0, 1, 2]) == 1.0
    assert intention_reward([3, 2, 1], [0]) == pytest.approx(1.0 / TOTAL)
    assert intention_reward([3, 2, 1], [2, None]) == pytest.approx(0.4 / TOTAL - 0.1)
    assert intention_reward([3, 2, 1], [2, None, None]) == 0.0  # 0.19 - 0.2, clipped
    assert intention_reward([3, 2, 1], [None] * 5) == 0.0  # clipped
    assert intention_reward([3, 2, 1], []) == 0.0
    assert intention_reward([2, 2], [0, None], penalty=0.0) == 0.5
    assert IMPORTANCE_WEIGHTS == {3: 1.0, 2: 0.7, 1: 0.4} and UNMATCHED_PENALTY == 0.1


def test_detail_validation() -> None:
    with pytest.raises(ValueError, match="importance"):
        MissingDetail("x", 4)


def test_prompts() -> None:
    env = IntentionGym(tasks=[PARIS])
    obs, info = env.reset()
    goal = info["scenario"].goal
    assert PARIS.request in obs and "[action]" in obs and "One week" not in obs
    assert "Trip length: One week." in goal and "no preference" in goal


def test_winning_episode() -> None:
    env = IntentionGym(tasks=[PARIS])
    _, reward, term, _, info = play(
        env, ["How long will you stay?", "What is your budget?", "Any food restrictions?"]
    )
    assert (reward, term, info["outcome"]) == (1.0, True, "answered")
    assert env.summary == "A week in Paris." and env.matches() == [0, 1, 2]
    assert [m.role for m in env.history].count("user") == 3


def test_losing_and_partial_episodes() -> None:
    env = IntentionGym(tasks=[PARIS])
    assert play(env, ["Do you like Paris?", "Is this your first trip?"])[1] == 0.0
    assert play(env, [], end="[finish]")[1] == 0.0
    partial = play(env, ["How many days?", "What's the weather like?"], end="[finish]")
    assert partial[1] == pytest.approx(1.0 / TOTAL - 0.1) and partial[4]["outcome"] == "finished"
    # Asking everything in one message covers one detail only.
    assert play(env, ["How long, what budget, any food needs?"])[1] == pytest.approx(1 / TOTAL)


def test_user_ended_and_truncation_count_sent_questions_only() -> None:
    env = IntentionGym(tasks=[PARIS], max_turns=2)
    env.reset()
    env.step("[action] How long?")
    env.observe_user("A week.")
    _, reward, _, trunc, info = env.step("[action] What budget?")  # last turn: never sent
    assert trunc and info["to_user"] is None and env.questions == ["How long?"]
    assert reward == pytest.approx(1.0 / TOTAL)
    env = IntentionGym(tasks=[PARIS])
    env.reset()
    env.step("[action] What is your budget?")
    _, reward, term, _, info = env.observe_user("Bye.", ended=True)
    assert term and info["outcome"] == "user_ended" and reward == pytest.approx(0.7 / TOTAL)


def test_userrl_loader(shared_dir: Path) -> None:
    folder = shared_dir / "data" / "userrl_gyms" / "IntentionGym"
    n_rows = sum(len(json.loads(f.read_text())) for f in folder.glob("all_intentions_*.json"))
    tasks, rejects = load_userrl_tasks(folder.parent)
    assert len(tasks) + len(rejects) == n_rows == 1107 and not rejects
    paris = tasks[0]
    assert paris.request == "I would like to plan a trip to Paris next month."
    assert [d.importance for d in paris.details] == [3, 2, 2, 2, 2, 1]
    assert paris.details[0].options == ("3-5 days", "1 week", "More than a week")
    # UserRL's own example question reaches its detail for nearly every detail.
    hits = total = 0
    for t in tasks:
        cues = [detail_cues(d, t.request) for d in t.details]
        for i, d in enumerate(t.details):
            total += 1
            hits += match_questions([d.inquiry], cues) == [i]
    assert hits / total > 0.9
    env = IntentionGym(tasks=tasks)
    _, info = env.reset(options={"index": 0})
    assert "pick one of: 3-5 days / 1 week / More than a week" in info["scenario"].goal
    test_tasks, _ = load_userrl_tasks(folder / "all_intentions_test.json")
    assert len(test_tasks) == 95


def test_userrl_loader_rejects(tmp_path: Path) -> None:
    good = {"id": "a", "category": "c", "task": "Plan a party.", "missing_details": [
        {"description": "Guests", "importance": "3", "inquiry": "How many?", "options": ["10"]}]}
    rows = [
        good,
        {"id": "b", "task": "", "missing_details": good["missing_details"]},
        {"id": "c", "task": "Do it.", "missing_details": []},
        {"id": "d", "task": "Do it.", "missing_details": [{"description": "x", "importance": "5"}]},
        {"id": "e", "task": "Do it.", "missing_details": [{"importance": "2"}]},
    ]
    (tmp_path / "all_intentions_train.json").write_text(json.dumps(rows))
    tasks, rejects = load_userrl_tasks(tmp_path)
    assert [t.id for t in tasks] == ["a"] and tasks[0].details[0].inquiry == "How many?"
    assert [(r.id, r.reason) for r in rejects] == [
        ("b", "missing_task"), ("c", "no_missing_details"), ("d", "bad_importance"),
        ("e", "bad_detail"),
    ]
    with pytest.raises(FileNotFoundError):
        load_userrl_tasks(tmp_path / "nothing")


def test_registry_and_doctests() -> None:
    spec = next(s for s in list_envs() if s.name == "IntentionGym")
    assert (spec.split, spec.n_scenarios) == ("held_out", len(IntentionGym.default_tasks()))
    result = doctest.testmod(intention_module)
    assert result.attempted > 0 and result.failed == 0
