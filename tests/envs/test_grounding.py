"""Grounding dialogues of the user simulator's training data: rollout-shaped, fact-stating, and
disjoint from the fact-reveal probes (tasks and wordings)."""

from __future__ import annotations

import re

import pytest

from mimesis.envs import make
from mimesis.envs.function.rules import evaluate_rule, format_number, parse_number
from mimesis.envs.persuade.gym import parse_stance
from mimesis.envs.registry import env_names, fact_indices, task_indices
from mimesis.envs.tau.probes import tau_facts
from mimesis.envs.travel.probes import stated_budget, stated_values
from mimesis.envs.turtle.probes import turtle_probes, yes_no
from mimesis.eval.agents.fact_reveal import FactRevealParams, env_probes
from mimesis.simulator.parsing import parse_turn
from mimesis.simulator.prompts import render_system_prompt
from mimesis.train.grounding import GroundingParams, build_grounding_rows, task_resets

TRAIN_ENVS = env_names("train")


@pytest.fixture(scope="module")
def tokenizer():
    from mimesis.models.base import load_base

    return load_base("tiny-llama")[1]


@pytest.fixture(scope="module")
def rows(tokenizer):
    p = GroundingParams(envs=TRAIN_ENVS, tasks_per_env=6)
    got, rejects, counts = build_grounding_rows(p, tokenizer, 4096)
    assert rejects == []
    return got, counts


def _env_of(row: dict) -> str:
    return row["id"].split(":")[1]


def _task_of(row: dict) -> str:
    return row["id"].split(":")[2]


def _exchanges(row: dict) -> list[tuple[str, str]]:
    msgs = row["messages"][1:]
    return [(msgs[i]["content"], msgs[i + 1]["content"]) for i in range(0, len(msgs), 2)]


def test_fact_indices_split_the_training_part_and_never_touch_held_out() -> None:
    for n in (10, 32, 140):
        grounding, probe = fact_indices(n, "grounding"), fact_indices(n, "probe")
        assert set(grounding).isdisjoint(probe)
        assert sorted(grounding + probe) == task_indices(n, "train")
    with pytest.raises(ValueError, match="grounding"):
        fact_indices(10, "eval")


@pytest.mark.parametrize("env_name", TRAIN_ENVS)
def test_grounding_tasks_and_wordings_are_not_the_probes(env_name, rows) -> None:
    got, _ = rows
    probes = env_probes(env_name, FactRevealParams(n_tasks=12, users=["frozen"]))
    probe_tasks = {p.fact.task_id for p in probes}
    probe_questions = {p.question.lower() for p in probes}
    mine = [r for r in got if _env_of(r) == env_name]
    assert len(mine) == 6 * GroundingParams().dialogues_per_task
    assert {_task_of(r) for r in mine}.isdisjoint(probe_tasks)
    for row in mine:
        for to_user, _ in _exchanges(row):
            # without the private note of FunctionGym's / TurtleGym's user_view
            message = re.split(r"\n\n\[Your private working| \[Your private check", to_user)[0]
            assert message.lower() not in probe_questions, message


@pytest.mark.slow
@pytest.mark.parametrize("env_name", TRAIN_ENVS)
def test_rows_are_the_simulator_view_of_an_episode(env_name, rows) -> None:
    import random

    got, _ = rows
    env = make(env_name)
    by_id = {}
    for kwargs in task_resets(env, 6, random.Random(0)) + task_resets(env, 64, random.Random(1)):
        _, info = env.reset(**kwargs)
        by_id[env.task.id] = info["scenario"]
    for row in (r for r in got if _env_of(r) == env_name):
        messages = row["messages"]
        scenario = by_id[_task_of(row)]
        assert messages[0] == {"role": "system", "content": render_system_prompt(scenario)}
        assert [m["role"] for m in messages[1:]] == ["user", "assistant"] * (len(messages) // 2)
        for _, target in _exchanges(row):
            parsed = parse_turn(target)
            assert parsed.reasoning and parsed.utterance and not parsed.ended


def _function_ok(env, to_user: str, reply: str) -> bool:
    working = re.search(r"\[Your private working: f\(([^)]*)\) = (-?[\d.]+)\]", to_user)
    if working is None:  # test case refused, or a message without four numbers
        return "can't" in reply or "four numbers" in reply
    x = tuple(float(v) for v in working.group(1).split(", "))
    return parse_number(reply) == evaluate_rule(env.task.rule, x)


@pytest.mark.parametrize("env_name", TRAIN_ENVS)
def test_every_reply_states_the_fact_as_the_env_parsers_read_it(env_name, rows) -> None:
    got, _ = rows
    env = make(env_name)
    for row in (r for r in got if _env_of(r) == env_name):
        task_id = _task_of(row)
        if env.tasks is None:
            seeds = [k for k in range(300_000, 300_006)]
            for s in seeds:
                env.reset(seed=s)
                if env.task.id == task_id:
                    break
        else:
            env.reset(options={"index": [t.id for t in env.tasks].index(task_id)})
        for to_user, target in _exchanges(row):
            reply = parse_turn(target).utterance
            if env_name == "FunctionGym":
                assert _function_ok(env, to_user, reply), (to_user, reply)
            elif env_name == "PersuadeGym":
                assert parse_stance(reply) == env.task.initial_stance
            elif env_name == "TauGym":
                assert any(i in reply for _, ids in tau_facts(env) for i in ids), reply
            elif env_name == "TurtleGym":
                answers = {p["question"].lower(): p["answer"]
                           for p in turtle_probes().get(env.task.id, [])}
                asked = [a for q, a in answers.items() if q in to_user.lower()]
                check = re.search(r"\[Your private check: .*: (Yes|No)\]$", to_user)
                if asked:  # a written probe question: its written answer
                    assert yes_no(reply) == asked[0], (to_user, reply)
                elif check:  # a key point of this story or another: as the env's check says
                    assert yes_no(reply) == check.group(1).lower(), (to_user, reply)
                else:
                    assert "yes/no question" in reply, (to_user, reply)
            else:
                prefs = [p for a in env.task.aspects for p in a.preferences]
                budget = stated_budget(reply)
                assert any((p.max_price == budget) if p.attr == "price" else
                           set(p.allowed) == stated_values(reply, tuple(p.allowed))
                           for p in prefs), reply


def test_function_user_view_gives_the_value_refuses_the_test_case_and_hides_nothing() -> None:
    env = make("FunctionGym")
    _, _ = env.reset(seed=3)
    value = format_number(evaluate_rule(env.task.rule, (2, 3, 4, 5)))
    assert env.user_view("f(2, 3, 4, 5)?").endswith(f"f(2, 3, 4, 5) = {value}]")
    case = ", ".join(format_number(v) for v in env.task.test_case)
    assert "is the test case; refuse it" in env.user_view(f"What about ({case})?")
    assert env.user_view("Any hint?") == "Any hint?"
    obs, _, _, _, info = env.step("[action] f(2, 3, 4, 5)?")
    assert info["to_user"] == "f(2, 3, 4, 5)?" and obs == ""  # the agent's side has no working


def test_too_long_dialogues_are_rejects_and_counts_reconcile(tokenizer) -> None:
    p = GroundingParams(envs=["FunctionGym", "PersuadeGym"], tasks_per_env=3,
                        dialogues_per_task=1)
    got, rejects, counts = build_grounding_rows(p, tokenizer, max_length=64)
    assert got == [] and len(rejects) == 6
    assert {r.reason for r in rejects} == {"too_long"} and counts["too_long"] == 6
    got, rejects, counts = build_grounding_rows(p, tokenizer, max_length=4096)
    assert len(got) == counts["FunctionGym"] + counts["PersuadeGym"] == 6 and not rejects
    assert build_grounding_rows(GroundingParams(tasks_per_env=0), tokenizer, 4096)[0] == []


def test_params_refuse_held_out_or_unknown_envs() -> None:
    with pytest.raises(ValueError, match="no grounding dialogues"):
        GroundingParams(envs=["TelepathyGym"])
    with pytest.raises(ValueError, match="max_exchanges"):
        GroundingParams(max_exchanges=0)


def test_train_user_mixes_the_dialogues_into_the_training_rows_only(tmp_path, tokenizer) -> None:
    import importlib.util
    from pathlib import Path

    from mimesis.stages.train_user import TrainUserParams
    from mimesis.train.stage_helpers import load_splits

    spec = importlib.util.spec_from_file_location(
        "train_user_data", (Path(__file__).parents[1] / "simulator" / "test_train_user_data.py"))
    data_module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(data_module)
    label_dir = data_module.write_label_dir(tmp_path / "label", n_train=4, n_val=2)
    grounding = GroundingParams(envs=["FunctionGym", "PersuadeGym"], tasks_per_env=2,
                                dialogues_per_task=2)
    params = TrainUserParams(base_model="tiny-llama", max_length=4096, grounding=grounding)
    data = load_splits(label_dir, tokenizer, params)
    ids = data.train["id"]
    assert sum(i.startswith("grounding:") for i in ids) == 2 * 2 * 2 == data.counts[
        "grounding"]["rows"]
    assert len(ids) == data.counts["train"]["rows"] + data.counts["grounding"]["rows"]
    assert not any(i.startswith("grounding:") for i in data.val["id"])
    off = load_splits(label_dir, tokenizer, TrainUserParams(
        base_model="tiny-llama", max_length=4096, grounding=GroundingParams(tasks_per_env=0)))
    assert "grounding" not in off.counts and len(off.train) == data.counts["train"]["rows"]
