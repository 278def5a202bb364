"""PersuadeGym: shipped statements, stance parsing, reward, episodes, UserRL loader, registry."""

from __future__ import annotations

import doctest
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import mimesis.envs.persuade.gym as persuade_module
from mimesis.envs import list_envs
from mimesis.envs.persuade.gym import (
    PersuadeGym,
    PersuadeTask,
    load_userrl_tasks,
    parse_stance,
    persuade_reward,
    stance_room,
)

SCOOTERS = PersuadeTask(
    "p-scooter",
    "Electric scooters should be allowed on cycle lanes.",
    2,
    "agree",
    "a pensioner who was knocked over by a scooter",
    ("Riders go too fast.", "You broke your wrist."),
)


def play(env: PersuadeGym, replies: list[str], ended_last: bool = False) -> tuple:
    """Reset, send one argument per scripted user reply, then ``[finish]`` (unless the user
    ended the conversation with the last reply)."""
    env.reset(options={"task": SCOOTERS})
    result = None
    for i, reply in enumerate(replies):
        _, _, _, _, info = env.step("[action] Lanes keep scooters off pavements. Where do you "
                                    "stand now, from 1 to 7?")
        assert info["to_user"] is not None
        result = env.observe_user(reply, ended=ended_last and i == len(replies) - 1)
    return result if ended_last else env.step("[finish]")


def test_shipped_statements() -> None:
    tasks = PersuadeGym.default_tasks()
    assert len(tasks) >= 30 and PersuadeGym.scenario_count() == len(tasks)
    assert len({t.id for t in tasks}) == len(tasks)
    assert len({t.statement for t in tasks}) == len(tasks)
    assert {t.direction for t in tasks} == {"agree", "disagree"}
    for t in tasks:
        assert stance_room(t.initial_stance, t.direction) >= 3, t.id  # room to persuade
        assert t.persona.strip() and len(t.reasons) >= 2


@pytest.mark.parametrize(
    ("reply", "stance"),
    [
        ("My stance: 4/7", 4),
        ("I'd say 5 out of 7 now.", 5),
        ("Rating: 2", 2),
        ("I'm still at 6, though your point is fair.", 6),
        ("Honestly, I'm a 3.", 3),
        ("6", 6),
        ("I strongly disagree.", 1),
        ("Neither agree nor disagree, really.", 4),
        ("I somewhat agree now.", 5),
        ("I agree with your point on cost, but I still disagree.", 2),
        ("I was at 6/7 before; now I'd say 4.", 4),
        ("I'm at 5/7. I agree with some of it.", 5),  # a number beats words
        ("We hired 5 people and 7 left.", None),
        ("That's an interesting argument.", None),
        ("9/7", None),
    ],
)
def test_parse_stance(reply: str, stance: int | None) -> None:
    assert parse_stance(reply) == stance


def test_reward_function() -> None:
    assert persuade_reward(2, 7, "agree") == 1.0
    assert persuade_reward(2, 4, "agree") == pytest.approx(0.4)
    assert persuade_reward(6, 3, "disagree") == pytest.approx(0.6)
    assert persuade_reward(2, None, "agree") == 0.0
    assert persuade_reward(2, 1, "agree") == pytest.approx(-0.2)  # backfired
    assert persuade_reward(6, 7, "disagree") == pytest.approx(-0.2)
    assert persuade_reward(6, 1, "agree") == -1.0  # clipped
    with pytest.raises(ValueError, match="no room"):
        persuade_reward(7, 7, "agree")


def test_task_validation() -> None:
    with pytest.raises(ValueError, match="1..7"):
        PersuadeTask("x", "s", 0, "agree", "p", ("r",))
    with pytest.raises(ValueError, match="no room"):
        PersuadeTask("x", "s", 1, "disagree", "p", ("r",))
    with pytest.raises(ValueError, match="agree|disagree"):
        PersuadeTask("x", "s", 4, "sideways", "p", ("r",))  # type: ignore[arg-type]


def test_prompts() -> None:
    env = PersuadeGym(tasks=[SCOOTERS])
    obs, info = env.reset()
    goal = info["scenario"].goal
    assert SCOOTERS.statement in obs and "agree more" in obs and "[action]" in obs
    assert SCOOTERS.persona not in obs and "You broke your wrist." not in obs
    assert SCOOTERS.persona in goal and "You broke your wrist." in goal
    # The stance example is the user's own (a fixed "4/7" paid a copying user's agent for free).
    assert "start at 2 (disagree)" in goal and "'My stance: 2/7'" in goal and "4/7" not in goal


def test_winning_episode() -> None:
    env = PersuadeGym(tasks=[SCOOTERS])
    _, reward, term, trunc, info = play(env, ["I still disagree.", "Fair enough. I'd say 6/7."])
    assert (term, trunc, info["outcome"]) == (True, False, "finished")
    assert reward == pytest.approx((6 - 2) / 5) and env.stances == [2, 6]
    assert info["stance"] == env.final_stance == 6


def test_losing_episodes() -> None:
    env = PersuadeGym(tasks=[SCOOTERS])
    assert play(env, ["Hmm.", "Not convinced."])[1] == 0.0  # never stated a stance
    assert play(env, ["Now I strongly disagree!"])[1] == pytest.approx(-0.2)  # backfired
    assert play(env, ["I'd say 4.", "Actually, back to 2/7."])[1] == 0.0  # last stance counts


def test_answer_ends_like_finish() -> None:
    env = PersuadeGym(tasks=[SCOOTERS])
    env.reset()
    env.step("[action] Rate it 1-7?")
    env.observe_user("5/7")
    obs, reward, term, _, info = env.step("[answer] Thanks for listening.")
    assert term and info["outcome"] == "answered" and reward == pytest.approx(0.6)
    assert "last stated stance" in obs


def test_stance_in_the_ending_reply_counts() -> None:
    env = PersuadeGym(tasks=[SCOOTERS])
    _, reward, term, _, info = play(env, ["I'm at 5/7 now. Goodbye."], ended_last=True)
    assert term and info["outcome"] == "user_ended" and reward == pytest.approx(0.6)


def test_stray_reply_is_rejected_and_not_recorded() -> None:
    env = PersuadeGym(tasks=[SCOOTERS])
    env.reset()
    with pytest.raises(RuntimeError, match="no agent message"):
        env.observe_user("7/7")
    assert env.stances == [] and env.final_stance is None


def test_truncation_scores_last_stated_stance() -> None:
    env = PersuadeGym(tasks=[SCOOTERS], max_turns=2)
    env.reset()
    env.step("[action] Where are you now?")
    env.observe_user("I'd say 3.")
    _, reward, _, trunc, info = env.step("[action] And now?")
    assert trunc and info["outcome"] == "truncated" and reward == pytest.approx(0.2)


def test_userrl_loader(shared_dir: Path) -> None:
    folder = shared_dir / "data" / "userrl_gyms" / "parquet" / "persuasion_multiturn"
    n_rows = sum(pq.read_metadata(f).num_rows for f in folder.glob("*.parquet"))
    tasks, rejects = load_userrl_tasks(shared_dir / "data" / "userrl_gyms")
    assert len(tasks) + len(rejects) == n_rows == 420 and not rejects
    assert len({t.id for t in tasks}) == len(tasks)
    assert all((t.initial_stance, t.direction) == (7, "disagree") for t in tasks)
    test_first = next(t for t in tasks if t.id == "YV3MRNMKH6MV")
    assert test_first.statement == "Anti-aging therapies should be made available even if expensive"
    assert test_first.reasons[0].startswith("While anti-aging therapies")
    env = PersuadeGym(tasks=tasks)
    env.reset(options={"task": test_first})
    env.step("[action] Where do you stand?")
    env.observe_user("Partly agree, I suppose.")
    assert env.step("[finish]")[1] == pytest.approx((7 - 5) / 6)


def test_userrl_loader_rejects(tmp_path: Path) -> None:
    rows = [
        {"reward_model": {"id": "a", "claim": "Cats are better than dogs", "argument": "Quiet."}},
        {"reward_model": {"id": "b", "claim": "", "argument": "x"}},
        {"reward_model": {"id": "a", "claim": "Duplicate", "argument": "y"}},
    ]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "train.parquet")
    tasks, rejects = load_userrl_tasks(tmp_path)
    assert [(t.id, t.statement, t.reasons) for t in tasks] == [
        ("a", "Cats are better than dogs", ("Quiet.",))
    ]
    assert [(r.id, r.reason) for r in rejects] == [("b", "missing_claim"), ("a", "duplicate_id")]
    with pytest.raises(FileNotFoundError):
        load_userrl_tasks(tmp_path / "nothing")


def test_registry_and_doctests() -> None:
    spec = next(s for s in list_envs() if s.name == "PersuadeGym")
    assert (spec.split, spec.n_scenarios) == ("train", len(PersuadeGym.default_tasks()))
    result = doctest.testmod(persuade_module)
    assert result.attempted > 0 and result.failed == 0
