"""FunctionGym: safe rule evaluation, seeded generation, scripted episodes, UserRL loader."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from mimesis.envs.function.gym import FunctionGym, FunctionTask, function_reward, load_userrl_tasks
from mimesis.envs.function.rules import (
    depends_on_all,
    evaluate_rule,
    format_number,
    generate_rule,
    parse_number,
)

TASK = FunctionTask("t1", "(a + b) * c - d", (2.0, 3.0, 4.0, 5.0), 15.0)


def oracle_user(env: FunctionGym, message: str) -> str:
    """A scripted user who knows the rule: evaluates the first four numbers in the message."""
    nums = [float(x) for x in re.findall(r"-?\d+", message)][:4]
    return f"f = {format_number(evaluate_rule(env.task.rule, nums))}"


@pytest.mark.parametrize(
    "rule", ["__import__('os').system('true')", "a.real", "x + 1", "[a, b]", "a if b else c"]
)
def test_evaluator_rejects_anything_but_arithmetic(rule: str) -> None:
    with pytest.raises(ValueError):
        evaluate_rule(rule, [1, 2, 3, 4])


def test_evaluator_guards_huge_powers_but_not_trivial_bases() -> None:
    with pytest.raises(ValueError, match="exponent"):
        evaluate_rule("a ** b", [10, 10**6, 0, 0])
    assert evaluate_rule("c ** d ** b ** a", [3, 3, 1, 10]) == 1.0
    with pytest.raises(ZeroDivisionError):
        evaluate_rule("a / (b - c)", [1, 2, 2, 0])


def test_generation_is_deterministic_per_seed_and_varies_across_seeds() -> None:
    for difficulty in (1, 2, 3):
        a = [generate_rule(np.random.default_rng(s), difficulty) for s in range(20)]
        b = [generate_rule(np.random.default_rng(s), difficulty) for s in range(20)]
        assert a == b
        assert len(set(a)) >= 15


@pytest.mark.parametrize("difficulty", [1, 2, 3])
def test_generated_rules_use_all_inputs_and_give_integers(difficulty: int) -> None:
    env = FunctionGym(difficulty=difficulty)
    for seed in range(30):
        env.reset(seed=seed)
        task = env.task
        assert all(v in task.rule for v in "abcd")
        assert depends_on_all(task.rule)
        assert float(task.expected).is_integer()
        assert task.expected == evaluate_rule(task.rule, task.test_case)
        assert all(1 <= v <= 10 for v in task.test_case)
        has_int_op = "//" in task.rule or "%" in task.rule
        assert has_int_op == (difficulty == 3)
        assert any(ch.isdigit() for ch in task.rule) == (difficulty >= 2)


def test_reset_with_the_same_seed_gives_the_same_task() -> None:
    first = FunctionGym().reset(seed=7)
    again = FunctionGym().reset(seed=7)
    assert first[0] == again[0]
    assert first[1]["task_id"] == again[1]["task_id"]
    assert first[1]["scenario"] == again[1]["scenario"]


def test_winning_episode_with_a_scripted_user() -> None:
    env = FunctionGym(tasks=[TASK])
    obs, info = env.reset(seed=0)
    assert "(a + b) * c - d" not in obs  # the rule is the user's secret
    assert "(a + b) * c - d" in info["scenario"].goal
    obs, reward, term, trunc, info = env.step("[search] test")
    assert "a=2, b=3, c=4, d=5" in obs and info["obs_source"] == "tool"
    for probe in ("f(1, 1, 1, 1)?", "f(2, 1, 1, 1)?", "f(1, 1, 2, 1)?"):
        obs, reward, term, trunc, info = env.step(f"[action] {probe}")
        assert obs == "" and info["to_user"] == probe and reward == 0.0
        obs, reward, term, trunc, info = env.observe_user(oracle_user(env, probe))
        assert info["obs_source"] == "user" and not (term or trunc)
    obs, reward, term, trunc, info = env.step("[answer] 15")
    assert (reward, term, trunc, info["outcome"]) == (1.0, True, False, "answered")
    assert [m.role for m in env.history][:3] == ["env", "agent", "tool"]


@pytest.mark.parametrize(
    ("action", "outcome"), [("[answer] 14", "answered"), ("[finish]", "finished")]
)
def test_losing_episodes(action: str, outcome: str) -> None:
    env = FunctionGym(tasks=[TASK])
    env.reset()
    _, reward, term, trunc, info = env.step(action)
    assert (reward, term, trunc, info["outcome"]) == (0.0, True, False, outcome)


def test_turn_limit_truncates_even_an_action() -> None:
    env = FunctionGym(tasks=[TASK], max_turns=2)
    env.reset()
    env.step("[action] f(1, 2, 3, 4)?")
    env.observe_user("f = 5")
    _, reward, term, trunc, info = env.step("[action] f(2, 2, 2, 2)?")
    assert (reward, term, trunc) == (0.0, False, True)
    assert info["to_user"] is None and info["outcome"] == "truncated"
    with pytest.raises(RuntimeError):
        env.step("[answer] 15")


def test_contract_violations_raise() -> None:
    env = FunctionGym(tasks=[TASK])
    with pytest.raises(RuntimeError):
        env.step("[answer] 1")  # before reset
    env.reset()
    with pytest.raises(RuntimeError):
        env.observe_user("f = 3")  # nothing was sent to the user
    env.step("f(1, 2, 3, 4)?")  # untagged: goes to the user
    with pytest.raises(RuntimeError):
        env.step("[answer] 15")  # the user's reply is pending


def test_user_ending_the_conversation_terminates_with_the_score() -> None:
    env = FunctionGym(tasks=[TASK])
    env.reset()
    env.step("[action] f(1, 1, 1, 1)?")
    _, reward, term, trunc, info = env.observe_user("bye", ended=True)
    assert (reward, term, trunc, info["outcome"]) == (0.0, True, False, "user_ended")


def test_reward_and_number_parsing() -> None:
    assert function_reward("The answer is 15", 15.0) == 1.0
    assert function_reward("f(2, 3, 4, 5) = 15", 15.0) == 1.0
    assert function_reward("15.5", 15.0) == 0.0
    assert function_reward("one hundred", 100.0) == 0.0
    assert parse_number("-12") == -12.0 and parse_number("1,024") == 1024.0


def test_userrl_loader(shared_dir: Path) -> None:
    tasks, rejects = load_userrl_tasks(shared_dir / "data" / "userrl_gyms")
    raw = json.loads((shared_dir / "data/userrl_gyms/FunctionGym/functions.json").read_text())
    assert len(tasks) + len(rejects) == len(raw) == 538
    assert not rejects
    first = tasks[0]
    assert (first.id, first.rule, first.test_case, first.expected) == (
        "func-1",
        "c * (a * b) * d",
        (3.0, 5.0, 5.0, 3.0),
        225.0,
    )
    env = FunctionGym(tasks=tasks)
    env.reset(options={"index": 3})
    assert env.task.id == "func-4"
    assert env.step("[answer] 9")[1] == 1.0


def test_loader_rejects_bad_records(tmp_path: Path) -> None:
    rows = [
        {"id": "ok", "rule": "a + b + c + d", "test_case": [1, 2, 3, 4], "expected_result": 10},
        {"id": "wrong", "rule": "a * b", "test_case": [1, 2, 3, 4], "expected_result": 5},
        {"id": "bad", "rule": "a +", "test_case": [1, 2, 3, 4], "expected_result": 1},
        {"id": "short", "rule": "a", "test_case": [1, 2], "expected_result": 1},
    ]
    (tmp_path / "functions.json").write_text(json.dumps(rows))
    tasks, rejects = load_userrl_tasks(tmp_path)
    assert [t.id for t in tasks] == ["ok"]
    assert {(r.id, r.reason) for r in rejects} == {
        ("wrong", "expected_mismatch"),
        ("bad", "unusable"),
        ("short", "unusable"),
    }
    with pytest.raises(FileNotFoundError):
        load_userrl_tasks(tmp_path / "missing")
