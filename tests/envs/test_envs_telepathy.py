"""TelepathyGym: the shipped entity set, guess matching, reward, episodes, UserRL loader."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from mimesis.envs.telepathy.gym import (
    TelepathyGym,
    TelepathyTask,
    guess_matches,
    load_userrl_tasks,
    normalize_guess,
    telepathy_reward,
)

LION = TelepathyTask("animal-lion", "Lion", "animal", "large wild cat; males have a mane")


def test_shipped_entity_set() -> None:
    tasks = TelepathyGym.default_tasks()
    assert len(tasks) >= 250
    categories = Counter(t.category for t in tasks)
    assert len(categories) >= 10 and min(categories.values()) >= 15
    assert len({t.id for t in tasks}) == len(tasks)
    assert all(t.description.strip() and t.name.strip() for t in tasks)
    # An accepted name must point to one entity only, or a guess could be right for two.
    names = Counter(normalize_guess(n) for t in tasks for n in {t.name, *t.aliases})
    assert [n for n, c in names.items() if c > 1] == []
    assert TelepathyGym.scenario_count() == len(tasks)


@pytest.mark.parametrize(
    ("guess", "ok"),
    [
        ("Lion", True),
        ("lion.", True),
        ("Is it a lion?", True),
        ("I think it's the Lion!", True),
        ("lions", True),
        ("sea lion", False),
        ("tiger", False),
        ("", False),
    ],
)
def test_guess_matching(guess: str, ok: bool) -> None:
    assert guess_matches(guess, ("Lion",)) is ok


def test_aliases_are_accepted() -> None:
    assert guess_matches("a cell phone", ("Smartphone", "mobile phone", "cell phone"))
    assert guess_matches("The Statue of Liberty", ("Statue of Liberty",))


def test_reward_formula() -> None:
    assert telepathy_reward(True, 1, 20) == pytest.approx(0.975)
    assert telepathy_reward(True, 10, 20) == pytest.approx(0.75)
    assert telepathy_reward(True, 99, 20) == 0.5  # clipped to max_turns
    assert telepathy_reward(False, 1, 20) == 0.0
    rewards = [telepathy_reward(True, n, 20) for n in range(1, 21)]
    assert rewards == sorted(rewards, reverse=True)


def test_winning_episode_fewer_turns_better() -> None:
    results = []
    for n_questions in (1, 4):
        env = TelepathyGym(tasks=[LION], max_turns=10)
        obs, info = env.reset(seed=0)
        assert "an animal" in obs and "Lion" not in obs
        assert "Lion" in info["scenario"].goal and "Yes, No or" in info["scenario"].goal
        for _ in range(n_questions):
            _, _, _, _, info = env.step("[action] Is it a wild animal?")
            assert info["to_user"] == "Is it a wild animal?"
            env.observe_user("Yes")
        _, reward, term, _, info = env.step("[answer] lion")
        assert term and info["outcome"] == "answered"
        results.append(reward)
    assert results == [pytest.approx(1 - 0.5 * 2 / 10), pytest.approx(1 - 0.5 * 5 / 10)]


def test_wrong_guess_search_and_finish() -> None:
    env = TelepathyGym(tasks=[LION])
    env.reset()
    obs, reward, term, _, info = env.step("[search] lion facts")
    assert "no search tool" in obs and not term and info["obs_source"] == "tool"
    obs, reward, term, _, _ = env.step("[answer] tiger")
    assert term and reward == 0.0 and obs.startswith("Wrong")
    env.reset()
    assert env.step("[finish]")[1:3] == (0.0, True)


def test_category_can_be_hidden_and_seeded_choice_is_stable() -> None:
    env = TelepathyGym(reveal_category=False)
    obs, info = env.reset(seed=4)
    assert "thinking of something" in obs
    assert TelepathyGym().reset(seed=4)[1]["task_id"] == info["task_id"]


def test_userrl_loader(shared_dir: Path) -> None:
    path = shared_dir / "data" / "userrl_gyms" / "TelepathyGym" / "all_entities_refined.json"
    tasks, rejects = load_userrl_tasks(path.parent.parent)
    assert len(tasks) == len(json.loads(path.read_text())) == 401 and not rejects
    einstein = tasks[0]
    assert (einstein.id, einstein.name, einstein.category) == (
        "entity_001",
        "Albert Einstein",
        "famous_person",
    )
    assert einstein.description.startswith("the famous physicist")
    env = TelepathyGym(tasks=tasks)
    env.reset(options={"index": 0})
    assert env.step("[answer] Albert Einstein")[1] > 0.9


def test_userrl_loader_rejects(tmp_path: Path) -> None:
    rows = [
        {"id": "e1", "title": "Piano", "target_entity": "Piano - keys", "category": "x"},
        {"id": "e2", "title": "", "target_entity": "nothing"},
        "junk",
    ]
    (tmp_path / "all_entities_refined.json").write_text(json.dumps(rows))
    tasks, rejects = load_userrl_tasks(tmp_path)
    assert [(t.name, t.description) for t in tasks] == [("Piano", "keys")]
    assert [r.id for r in rejects] == ["e2", "2"]
