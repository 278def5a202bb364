"""TravelGym: generation invariants, scripted episodes, partial credit, UserRL parquet loader."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mimesis.envs.travel.gym import TravelGym, load_userrl_tasks, preference_text, travel_reward
from mimesis.envs.travel.tasks import INITIALS, PRICE, TravelAspect, TravelTask, make_aspect


def _acceptable(aspect: TravelAspect) -> list[str]:
    return [
        o.id for o in aspect.options if all(p.accepts(o.attrs, o.price) for p in aspect.preferences)
    ]


@pytest.mark.parametrize("n_prefs", [1, 2, 3, 4])
def test_generated_aspects_have_one_best_and_traps(n_prefs: int) -> None:
    for seed in range(40):
        rng = np.random.default_rng(seed)
        kind = list(INITIALS)[seed % len(INITIALS)]
        aspect = make_aspect(rng, kind, n_prefs, n_prefs + 6, n_hidden=n_prefs // 2)
        ok = _acceptable(aspect)
        prices = {o.id: o.price for o in aspect.options}
        assert 2 <= len(ok) <= 3
        assert aspect.best_id == min(ok, key=prices.get)
        assert sorted(aspect.acceptable_ids) == sorted(set(ok) - {aspect.best_id})
        assert len({prices[i] for i in ok}) == len(ok)  # exactly one cheapest
        assert min(prices.values()) < prices[aspect.best_id]  # "cheapest overall" is a trap
        for pref in aspect.preferences:  # every preference matters
            assert any(not pref.accepts(o.attrs, o.price) for o in aspect.options)
        assert all(o.id[0] == INITIALS[kind] for o in aspect.options)
        assert sum(p.hidden for p in aspect.preferences) == n_prefs // 2


def test_reset_is_deterministic_per_seed() -> None:
    a, b = TravelGym(n_aspects=2), TravelGym(n_aspects=2)
    assert a.reset(seed=11)[0] == b.reset(seed=11)[0]
    assert a.task == b.task
    assert a.reset(seed=12)[1]["task_id"] != b.reset(seed=11)[1]["task_id"]


def test_preferences_are_the_users_secret() -> None:
    env = TravelGym(n_preferences=3, hidden_fraction=1 / 3)
    obs, info = env.reset(seed=3)
    aspect = env.task.aspects[0]
    goal = info["scenario"].goal
    for pref in aspect.preferences:
        text = preference_text(aspect.kind, pref)
        assert text in goal and text not in obs
        hint = "only if the agent asks about" if pref.hidden else "when the agent asks what"
        assert f"{text} (say this {hint}" in goal
    assert env.task.request in obs and env.task.request in goal


def _play(env: TravelGym, seed: int, pick) -> tuple[float, dict]:
    env.reset(seed=seed)
    obs, *_ = env.step("[search] options")
    for aspect in env.task.aspects:
        assert all(o.id in obs for o in aspect.options)
    env.step("[action] Any preferences for the trip?")
    env.observe_user("I'd like something comfortable.")
    for aspect in env.task.aspects:
        _, reward, _, _, info = env.step(f"[answer] {pick(aspect)}")
    return reward, info


def test_best_acceptable_and_wrong_choices() -> None:
    env = TravelGym()
    assert _play(env, 0, lambda a: a.best_id)[0] == 1.0
    assert _play(env, 0, lambda a: a.acceptable_ids[0])[0] == 0.5
    reward, info = _play(
        env, 0, lambda a: next(o.id for o in a.options if o.id not in _acceptable(a))
    )
    assert reward == 0.0 and info["outcome"] == "answered"


def test_multi_aspect_episode_scores_the_mean_and_ends_when_all_answered() -> None:
    env = TravelGym(n_aspects=2)
    env.reset(seed=5)
    first, second = env.task.aspects
    obs, reward, term, _, _ = env.step(f"[answer] {first.best_id}")
    assert not term and reward == 0.0 and f"Recorded {first.best_id}" in obs
    obs, _, term, _, _ = env.step(f"[answer] {first.acceptable_ids[0]}")  # first answer is final
    assert not term and "already chose" in obs
    obs, _, term, _, _ = env.step("[answer] Z4")
    assert not term and "No option id" in obs
    _, reward, term, _, _ = env.step(f"[answer] Option {second.acceptable_ids[0]} please")
    assert term and reward == pytest.approx(0.75)


def test_search_lists_only_the_asked_part() -> None:
    env = TravelGym(n_aspects=3)
    env.reset(seed=2)
    kinds = [a.kind for a in env.task.aspects]
    query = {
        "flight": "flights",
        "hotel": "hotel",
        "apartment": "apartment",
        "rental_car": "rental car",
        "restaurant": "restaurant",
    }[kinds[0]]
    obs, _, _, _, info = env.step(f"[search] {query}")
    assert info["obs_source"] == "tool"
    assert all(o.id in obs for o in env.task.aspects[0].options)
    assert not any(f"\n{o.id} |" in obs for a in env.task.aspects[1:] for o in a.options)


def test_truncation_keeps_partial_credit() -> None:
    env = TravelGym(n_aspects=2, max_turns=2)
    env.reset(seed=1)
    env.step(f"[answer] {env.task.aspects[0].best_id}")
    _, reward, term, trunc, info = env.step("[action] and the other one?")
    assert (term, trunc, info["outcome"], info["to_user"]) == (False, True, "truncated", None)
    assert reward == 0.5


def test_reward_function() -> None:
    best = {"flight": "F1", "hotel": "H2"}
    ok = {"flight": ("F3",), "hotel": ("H4", "H5")}
    assert travel_reward({"flight": "F1", "hotel": "H2"}, best, ok) == 1.0
    assert travel_reward({"flight": "F3", "hotel": "H5"}, best, ok) == 0.5
    assert travel_reward({"flight": "F1"}, best, ok) == 0.5
    assert travel_reward({}, best, ok) == 0.0
    assert travel_reward({"flight": "F3"}, {"flight": "F1"}, ok, acceptable_credit=0.2) == 0.2


def test_budget_preference_text() -> None:
    for seed in range(50):
        aspect = make_aspect(np.random.default_rng(seed), "hotel", 4, 8, 0)
        budget = [p for p in aspect.preferences if p.attr == PRICE]
        if budget:
            assert preference_text("hotel", budget[0]).endswith("per night")
            return
    pytest.fail("no budget preference in 50 draws")


def test_invalid_generation_parameters() -> None:
    with pytest.raises(ValueError):
        TravelGym(n_preferences=4, n_options=6)
    with pytest.raises(ValueError):
        TravelGym(n_aspects=6)


def test_userrl_parquet_loader(shared_dir: Path) -> None:
    tasks, rejects = load_userrl_tasks(shared_dir / "data" / "userrl_gyms")
    assert len(tasks) == 2107 + 471 and not rejects
    task = next(t for t in tasks if t.id == "apartment:4-237|rental_car:4-24|restaurant:4-104")
    assert [(a.kind, a.best_id) for a in task.aspects] == [
        ("apartment", "A19"),
        ("rental_car", "C19"),
        ("restaurant", "R5"),
    ]
    assert task.request.startswith("I am planning a trip to San Diego")
    env = TravelGym(tasks=[task])
    env.reset()
    assert "No option database" in env.step("[search] restaurant")[0]
    env.step("[answer] A19")
    env.step("[answer] C3")
    _, reward, term, _, _ = env.step("[answer] R5")
    assert term and reward == pytest.approx(2 / 3)


def test_parquet_loader_rejects_rows(tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    row = {
        "prompt": [{"role": "system", "content": "s"}, {"role": "user", "content": "Trip!"}],
        "reward_model": {"id": "flight:1|hotel:2", "ground_truth": "['F2', 'H1']"},
    }
    bad = {"prompt": row["prompt"], "reward_model": {"id": "boat:1", "ground_truth": "['B1']"}}
    short = {"prompt": row["prompt"], "reward_model": {"id": "flight:1", "ground_truth": "[]"}}
    pd.DataFrame([row, bad, short]).to_parquet(tmp_path / "train.parquet")
    tasks, rejects = load_userrl_tasks(tmp_path)
    assert tasks == [
        TravelTask(
            "flight:1|hotel:2",
            "Trip!",
            (
                TravelAspect("flight", (), (), "F2", ()),
                TravelAspect("hotel", (), (), "H1", ()),
            ),
        )
    ]
    assert [r.id for r in rejects] == ["train:1", "train:2"]
