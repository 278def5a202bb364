"""TauGym: tau2 tasks, tool calls through [search], tau2's reward, UserRL loader, registry."""

from __future__ import annotations

import doctest
import json
from pathlib import Path

import pytest

from mimesis.envs import registry
from mimesis.envs.tau import adapter as tau_adapter
from mimesis.envs.tau import reward as tau_reward_module
from mimesis.envs.tau.adapter import make_environment
from mimesis.envs.tau.gym import (
    TauGym,
    TauTask,
    load_userrl_tasks,
    parse_tool_call,
    tau2_tasks,
    tau_reward,
)
from mimesis.envs.tau.tasks import gold_action_error, is_trivial

TASKS = {t.id: t for t in tau2_tasks()}
# retail-2: return three items and tell the user there are 10 t-shirt options (communicate_info).
RETAIL = TASKS["retail-2"]
# airline-20: book a one-way JFK→SEA trip paid with a certificate and a credit card.
AIRLINE = TASKS["airline-20"]


def gold_calls(task: TauTask) -> list[str]:
    """The task's gold actions as the agent's ``[search]`` tool calls."""
    return [
        f"[search] {a.name} {json.dumps(a.arguments)}"
        for a in task.task.evaluation_criteria.actions
    ]


def play(env: TauGym, messages: list[str], seed: int = 0) -> tuple[float, dict]:
    """Run agent messages (the user answers "ok") until the episode ends."""
    env.reset(seed=seed)
    for message in messages:
        _, reward, term, trunc, info = env.step(message)
        if info["to_user"] is not None:
            _, reward, term, trunc, info = env.observe_user("ok")
        if term or trunc:
            return reward, info
    raise AssertionError("episode did not end")


def test_shipped_tasks_come_from_tau2() -> None:
    domains = [t.domain for t in TASKS.values()]
    assert (len(TASKS), domains.count("airline"), domains.count("retail")) == (164, 50, 114)
    shipped = TauGym.default_tasks()
    assert TauGym.scenario_count() == len(shipped) == 164 - 24
    assert not any(is_trivial(t) for t in shipped)


def test_trivial_tasks_are_exactly_those_where_stopping_at_once_scores_one() -> None:
    # Over a sample of both kinds: the filter must match what the reward actually pays.
    trivial = [t for t in TASKS.values() if is_trivial(t)]
    kept = [t for t in TASKS.values() if not is_trivial(t)]
    assert len(trivial) == 24
    for task in trivial[:3] + kept[:3]:
        reward, _ = play(TauGym(tasks=[task]), ["[finish]"])
        assert reward == (1.0 if task in trivial else 0.0), task.id
    assert len(tau2_tasks(split="train")) == 30 + 74
    assert [t.id for t in tau2_tasks(["airline"], split="test")][:1] != []


@pytest.mark.parametrize(
    ("text", "call"),
    [
        ('get_user_details {"user_id": "a_1"}', ("get_user_details", {"user_id": "a_1"})),
        ("list_all_airports", ("list_all_airports", {})),
        ('`calculate({"expression": "1+1"})`', ("calculate", {"expression": "1+1"})),
    ],
)
def test_parse_tool_call(text: str, call: tuple) -> None:
    assert parse_tool_call(text) == call


@pytest.mark.parametrize(
    "text", ["", '{"user_id": "x"}', "get_user_details {user_id: x}", 'get_user_details ["x"]']
)
def test_parse_tool_call_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_tool_call(text)


def test_prompts() -> None:
    env = TauGym(tasks=[RETAIL])
    obs, info = env.reset()
    goal = info["scenario"].goal
    assert "[search] <tool_name> <JSON object of arguments>" in obs
    assert "return_delivered_order_items(order_id: string, item_ids: list[string]" in obs
    assert "## Policy" in obs and "Retail agent policy" in obs
    assert "tshirt options" in goal and "Yusuf Rossi" in goal and goal not in obs
    assert "10" not in goal  # the information to communicate is the agent's job to find
    short = TauGym(tasks=[RETAIL], policy_chars=500, tool_docs="names").reset()[0]
    assert "[... policy truncated]" in short and len(short) < len(obs) / 2
    assert "return_delivered_order_items(" in short


def test_gold_replay_scores_one_retail() -> None:
    env = TauGym(tasks=[RETAIL])
    reward, info = play(
        env, [*gold_calls(RETAIL), "[action] We have 10 t-shirt options.", "[finish]"]
    )
    assert (reward, info["outcome"]) == (1.0, "finished")
    assert env.reward_breakdown == {"DB": 1.0, "COMMUNICATE": 1.0}


def test_gold_replay_scores_one_airline_with_answer() -> None:
    env = TauGym(tasks=[AIRLINE])
    reward, info = play(
        env,
        [
            "[action] Hello! How can I help?",
            *gold_calls(AIRLINE),
            "[answer] Your flight is booked.",
        ],
    )
    assert (reward, info["outcome"]) == (1.0, "answered")
    assert env.reward_breakdown["DB"] == 1.0


def test_wrong_write_scores_zero() -> None:
    calls = gold_calls(AIRLINE)
    wrong = (
        calls[-1]
        .replace('"amount": 250', '"amount": 100')
        .replace('"amount": 5}', '"amount": 155}')
    )
    assert wrong != calls[-1]
    env = TauGym(tasks=[AIRLINE])
    reward, _ = play(env, [*calls[:-1], wrong, "[finish]"])
    assert reward == 0.0 and env.reward_breakdown["DB"] == 0.0
    # A different write call altogether (return only one of the three items).
    calls = gold_calls(RETAIL)
    args = json.loads(calls[-1].split(" ", 2)[2])
    args["item_ids"] = args["item_ids"][:1]
    env = TauGym(tasks=[RETAIL])
    reward, _ = play(
        env,
        [
            *calls[:-1],
            f"[search] return_delivered_order_items {json.dumps(args)}",
            "[answer] There are 10 options.",
        ],
    )
    assert reward == 0.0 and env.reward_breakdown == {"DB": 0.0, "COMMUNICATE": 1.0}


def test_missing_communication_scores_zero() -> None:
    env = TauGym(tasks=[RETAIL])
    reward, _ = play(env, [*gold_calls(RETAIL), "[answer] Your return is being processed."])
    assert reward == 0.0 and env.reward_breakdown == {"DB": 1.0, "COMMUNICATE": 0.0}


def test_truncation_scores_zero_but_the_same_work_with_a_stop_scores_one() -> None:
    # All the work (gold writes, "10" said) is done before the last turn; only the ending differs.
    work = [*gold_calls(RETAIL), "[action] We have 10 t-shirt options."]
    env = TauGym(tasks=[RETAIL], max_turns=len(work) + 1)
    reward, info = play(env, [*work, '[search] get_user_details {"user_id": "yusuf_rossi_9620"}'])
    assert (reward, info["outcome"]) == (0.0, "truncated")
    assert env.reward_breakdown == {}
    reward, info = play(env, [*work, "[finish]"])
    assert (reward, info["outcome"]) == (1.0, "finished")


def test_user_stop_is_scored() -> None:
    env = TauGym(tasks=[RETAIL])
    env.reset()
    for call in gold_calls(RETAIL):
        env.step(call)
    env.step("[action] Done! Also, we have 10 t-shirt options.")
    _, reward, term, _, info = env.observe_user("Thanks, bye!", ended=True)
    assert (reward, term, info["outcome"]) == (1.0, True, "user_ended")
    env.reset()
    env.step("[action] hi")
    assert env.observe_user("bye", ended=True)[1] == 0.0  # nothing done yet: DB check fails


def test_tool_errors_and_state() -> None:
    env = TauGym(tasks=[RETAIL])
    env.reset()
    before = env.environment.get_db_hash()
    obs, _, _, _, info = env.step("[search] get_order_details #W2378156")
    assert obs.startswith("Error: the arguments are not valid JSON") and env.messages == []
    assert info["obs_source"] == "tool"
    obs = env.step("[search] open_the_vault {}")[0]
    assert obs == "Error: Tool 'open_the_vault' not found." and len(env.messages) == 2
    obs = env.step('[search] get_order_details {"order_id": "#W2378156"}')[0]
    assert json.loads(obs)["user_id"] == "yusuf_rossi_9620"
    assert env.environment.get_db_hash() == before  # reads leave the database as it was
    env = TauGym(tasks=[RETAIL], tool_result_chars=40)
    env.reset()
    assert env.step('[search] get_order_details {"order_id": "#W2378156"}')[0].endswith(
        "[... tool result truncated]"
    )


def test_pure_reward_function() -> None:
    env = TauGym(tasks=[RETAIL])
    play(env, [*gold_calls(RETAIL), "[answer] 10 t-shirt options"])
    assert tau_reward(RETAIL, env.messages, stopped=True) == 1.0
    assert tau_reward(RETAIL, env.messages, stopped=False) == 0.0
    assert tau_reward(RETAIL, env.messages[:-1], stopped=True) == 0.0  # "10" never said


def _tau2_environment_reward(task: TauTask, messages: list) -> dict[str, float]:
    """tau2's own DB / ENV_ASSERTION components (its evaluator, no cache, two fresh loads)."""
    from tau2.evaluator.evaluator_env import EnvironmentEvaluator

    info = EnvironmentEvaluator.calculate_reward(
        environment_constructor=tau_adapter._ENV_CONSTRUCTORS[task.domain], task=task.task,
        full_trajectory=list(messages))
    return {k.value: float(v) for k, v in (info.reward_breakdown or {}).items()}


def test_cached_environment_reward_is_tau2s_on_every_path() -> None:
    # Paths: no tool call (cached initial state), reads only, gold writes, a wrong write, an
    # erroring call; each scored from the episode's own database and by replay, against tau2.
    calls = gold_calls(RETAIL)
    read = '[search] get_order_details {"order_id": "#W2378156"}'
    wrong = calls[-1].replace('"item_ids": [', '"item_ids": ["0", ')
    runs = [[], [read], calls, [*calls[:-1], wrong], ["[search] open_the_vault {}"]]
    seen = set()
    for run in runs:
        env = TauGym(tasks=[RETAIL])
        play(env, [*run, "[finish]"])
        ours = env.reward_breakdown
        assert ours == _tau2_environment_reward(RETAIL, env.messages) | {
            k: v for k, v in ours.items() if k not in ("DB", "ENV_ASSERTION")}, run
        replayed = tau_reward_module.tau_reward_breakdown(RETAIL, env.messages)
        assert replayed == ours, run
        seen.add(ours.get("DB"))
    assert seen == {0.0, 1.0}  # both verdicts occur, so the comparison can tell them apart
    # a task whose gold only reads: its gold hashes are the pristine database's, replay-free
    reads_only = TASKS["retail-65"]
    assert not _writes(reads_only) and reads_only.task.evaluation_criteria.actions
    verdicts = set()
    for run in (gold_calls(reads_only), [*gold_calls(reads_only), calls[-1]]):  # + a write
        env = TauGym(tasks=[reads_only])
        play(env, [*run, "[finish]"])
        verdicts.add(env.reward_breakdown["DB"])
        assert env.reward_breakdown["DB"] == _tau2_environment_reward(
            reads_only, env.messages)["DB"], run
    assert verdicts == {0.0, 1.0}


def _writes(task: TauTask) -> list[str]:
    """The task's gold actions that tau2 types as database writes."""
    writes = tau_reward_module._pristine(task.domain)[1]
    return [a.name for a in task.task.evaluation_criteria.actions or []
            if (a.requestor, a.name) in writes]


@pytest.mark.slow  # sweeps every task
def test_a_gold_that_writes_nothing_leaves_the_pristine_database() -> None:
    # Every shipped task whose gold writes nothing: replaying that gold, as tau2's evaluator
    # does, leaves the hashes the reward takes without replaying it. One database per domain:
    # each replay must leave it pristine, so the next starts from the pristine state too.
    assert ("assistant", "cancel_reservation") in tau_reward_module._pristine("airline")[1]
    quiet = [t for t in TASKS.values() if not _writes(t)]
    assert len(quiet) >= 24  # the trivial tasks at least
    envs = {domain: make_environment(domain) for domain in {t.domain for t in quiet}}
    for task in quiet:
        env = envs[task.domain]
        for action in task.task.evaluation_criteria.actions or []:
            try:
                env.make_tool_call(tool_name=action.name, requestor=action.requestor,
                                   **action.arguments)
            except Exception:  # noqa: BLE001, S110 (as tau2: a failing gold call changes nothing)
                pass
        assert (env.get_db_hash(), env.get_user_db_hash()) == tau_reward_module._gold_hashes(task), task.id


def test_an_episode_without_tool_calls_loads_no_database(monkeypatch) -> None:
    env = TauGym(tasks=[RETAIL])
    play(env, ["[finish]"])  # warms the per-task cache of the initial and gold hashes
    loads = []
    real = tau_adapter._ENV_CONSTRUCTORS["retail"]
    monkeypatch.setitem(tau_adapter._ENV_CONSTRUCTORS, "retail",
                        lambda *a, **k: loads.append(1) or real(*a, **k))
    assert play(env, ["[action] hi", "[finish]"])[0] == 0.0 and loads == []
    play(env, ['[search] get_order_details {"order_id": "#W2378156"}', "[finish]"])
    assert loads == [1]  # one load, at the first tool call; the reward reads that database


def test_userrl_loader(shared_dir: Path) -> None:
    folder = shared_dir / "data" / "userrl_gyms"
    train, rejects = load_userrl_tasks(folder, split="train")
    assert (len(train), rejects) == (500, [])
    test, rejects = load_userrl_tasks(folder / "TauGym" / "tau_test.json")
    assert len(test) == 165 and not rejects
    assert sum(t.domain == "airline" for t in test) == 50
    assert len(load_userrl_tasks(folder)[0]) == 665
    first = train[0]
    assert (first.id, first.domain) == ("retail-train-000", "retail")
    assert first.opening and first.task.evaluation_criteria.actions[0].name == (
        "return_delivered_order_items"
    )
    env = TauGym(tasks=[first])
    _, info = env.reset()
    assert "Omar Anderson" in info["scenario"].goal and first.opening in info["scenario"].goal
    reward, _ = play(env, [*gold_calls(first), "[finish]"])
    assert reward == 1.0
    reward, _ = play(env, ["[finish]"])
    assert reward == 0.0


def test_userrl_loader_rejects(tmp_path: Path) -> None:
    def row(rid: str, actions: list, instruction: str = "You are Omar.") -> dict:
        return {
            "id": rid,
            "obs": "hi",
            "info": {
                "task": {
                    "user_id": "u",
                    "instruction": instruction,
                    "actions": actions,
                    "outputs": ["7"],
                }
            },
        }

    cancel = {
        "name": "cancel_pending_order",
        "kwargs": {"order_id": "#W0000000", "reason": "no longer needed"},
    }
    rows = [
        row("retail-1", [cancel]),
        row("task-2", [cancel]),  # domain from the tool names
        row("retail-3", [{"name": "teleport", "kwargs": {}}]),
        row("moon-4", [{"name": "teleport", "kwargs": {}}]),
        row("retail-5", [cancel], instruction=" "),
        row("retail-6", [{"name": "cancel_pending_order"}]),
        "junk",
    ]
    (tmp_path / "tau_train.json").write_text(json.dumps(rows))
    tasks, rejects = load_userrl_tasks(tmp_path)
    assert [(t.id, t.domain) for t in tasks] == [("retail-1", "retail"), ("task-2", "retail")]
    assert tasks[0].task.evaluation_criteria.communicate_info == ["7"]
    assert [(r.id, r.reason) for r in rejects] == [
        ("retail-3", "unknown_tool"),
        ("moon-4", "unknown_domain"),
        ("retail-5", "missing_instruction"),
        ("retail-6", "bad_actions"),
        ("6", "missing_task"),
    ]
    # Order #W0000000 does not exist: the gold action fails, so replay=True refuses the task.
    assert gold_action_error(tasks[0]) == "cancel_pending_order: Order not found"
    tasks, rejects = load_userrl_tasks(tmp_path / "tau_train.json", replay=True)
    assert tasks == [] and {r.reason for r in rejects} >= {"gold_action_error"}
    with pytest.raises(FileNotFoundError):
        load_userrl_tasks(tmp_path, split="test")


def test_registry_lists_tau_as_train() -> None:
    specs = {s.name: s for s in registry.list_envs()}
    assert (specs["TauGym"].split, specs["TauGym"].n_scenarios) == ("train", 140)
    assert isinstance(registry.make("TauGym", max_turns=5), TauGym)
    assert make_environment("airline").get_domain_name() == "airline"


def test_doctests() -> None:
    result = doctest.testmod(tau_adapter)
    assert result.attempted > 0 and result.failed == 0
