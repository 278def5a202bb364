"""Episodes as MLflow traces (:mod:`mimesis.traces`): a session per episode, a trace per turn
of the conversation showing what the user said and the agent's reply, the user who played as
the session's user, and nothing private: no trace holds the simulator's reasoning or a hidden
fact of its scenario.

The episodes are played by the real runtime (:class:`~mimesis.simulator.runtime.UserSimulator`)
on the leak corpus (tests/leak_corpus.py): every format of leaking generation, each hiding a
secret in the reasoning and in the scenario's goal, so a trace that carried either would name it.
One test plays TravelGym through the rollout engine, as the stages do.
"""

from __future__ import annotations

import json
import random

import mlflow
import pytest

from mimesis.envs.registry import success_thresholds
from mimesis.schemas import Scenario
from mimesis.simulator.runtime import UserSimulator
from mimesis.traces import (
    SESSION,
    USER,
    conversation_turns,
    log_episode_traces,
    sample_evenly,
)
from tests.leak_corpus import FORMATS, SECRETS, UTTERANCES, leaks

OPENING = "You are a travel agent. Ask the user with [action]; recommend with [answer]."
AGENT_TURNS = ("[action] Hello! How can I help you today?", "[action] Could you tell me more?",
               "[answer] the blue hotel")
NOTE = "\n\n(1 message left)"


def played_episode(index: int, raw: str, secret: str) -> dict:
    """An episode record (the shape of agent_episodes.jsonl: the env's prompt opens the agent's
    chat, the agent speaks first) of three agent messages against the runtime, whose every
    generation is ``raw`` and whose scenario holds ``secret``."""
    sim = UserSimulator(lambda batch: [raw] * len(batch))
    scenario = Scenario(goal=f"Get help with an order. Private: {secret}.", annotator="corpus")
    state = sim.init_state(scenario)
    messages, turns = [{"role": "user", "content": OPENING}], []
    for agent_text in AGENT_TURNS:
        messages.append({"role": "assistant", "content": agent_text})
        if agent_text.startswith("[answer]"):
            turns.append({"agent_text": agent_text, "kind": "answer", "to_user": None,
                          "obs": "Answer recorded.", "obs_source": "env", "user_reasoning": None})
            break
        to_user = agent_text.removeprefix("[action] ")
        said, state = sim.next_message(to_user, state)
        turns.append({"agent_text": agent_text, "kind": "action", "to_user": to_user,
                      "obs": said, "obs_source": "user",
                      "user_reasoning": state.end_reasoning if state.ended else state.private[-1]})
        if state.ended:
            break
        messages.append({"role": "user", "content": said + NOTE})
    return {"agent": "sft", "user": "frozen", "env": "TravelGym", "scenario_id": f"TravelGym:{index}",
            "index": index, "reward": 1.0, "termination": "answer", "messages": messages,
            "turns": turns, "scenario": scenario.model_dump(), "user_end_reason": state.end_reason}


def shown(trace) -> tuple[str | None, str]:
    """What MLflow 3's session view shows for a trace: the last ``user`` message of the root
    span's input chat (the trace's request) as the User's, its output as the Assistant's."""
    said = [m["content"] for m in json.loads(trace.data.request)["messages"]
            if m["role"] == "user"]
    return (said[-1] if said else None), json.loads(trace.data.response)


def plain_text(value) -> str:
    """Every string in a trace (``trace.to_dict()``), JSON inside strings decoded: span inputs
    and outputs are JSON texts within the trace's JSON, which escapes them twice."""
    if isinstance(value, dict):
        return "\n".join(plain_text(v) for v in [*value.keys(), *value.values()])
    if isinstance(value, list):
        return "\n".join(plain_text(v) for v in value)
    if isinstance(value, str):
        try:
            decoded = json.loads(value)
        except ValueError:
            return value
        return value if isinstance(decoded, str | int | float) or decoded is None else (
            plain_text(decoded))
    return str(value)


def in_order(traces) -> dict[str, list]:
    """Session id -> its traces in the order the UI lists them (start time)."""
    sessions: dict[str, list] = {}
    for trace in sorted(traces, key=lambda t: t.info.request_time):
        sessions.setdefault(trace.info.trace_metadata[SESSION], []).append(trace)
    return sessions


def corpus_episodes() -> list[tuple[str, dict]]:
    """One episode per leaking format (secrets and utterances in turn): ``(secret, record)``,
    leaving out the few the runtime itself lets through (that is test_simulator_leaks' job)."""
    out = []
    for i, fmt in enumerate(FORMATS.values()):
        secret = SECRETS[i % len(SECRETS)]
        row = played_episode(i, fmt(secret, UTTERANCES[i % len(UTTERANCES)]), secret)
        public = " ".join(m["content"] for m in row["messages"])
        if not leaks(secret, public):
            out.append((secret, row))
    assert len(out) >= 0.9 * len(FORMATS), "the runtime let most secrets through"
    return out


def traces_of(run) -> list:
    """The traces of the MLflow run ``run`` (the tests share one tracking database)."""
    mlflow.flush_trace_async_logging()
    return mlflow.search_traces(locations=[run.info.experiment_id], run_id=run.info.run_id,
                                return_type="list")


@pytest.fixture(autouse=True)
def _experiment():
    mlflow.set_experiment("mimesis")


@pytest.fixture
def synchronous_export(monkeypatch):
    """Trace info and spans written in order, in the logging thread: MLflow's background writer
    may let its own request preview win over the one a trace set (traces.request_preview)."""
    monkeypatch.setenv("MLFLOW_ENABLE_ASYNC_TRACE_LOGGING", "false")
    mlflow.tracing.reset()
    yield
    mlflow.tracing.reset()  # the next trace sets tracing up again, asynchronous


@pytest.mark.slow  # logs a trace per turn of one episode per leaking format (~13 s)
def test_no_trace_holds_reasoning_or_a_hidden_fact() -> None:
    episodes = corpus_episodes()
    assert any(r["turns"] and r["turns"][0]["user_reasoning"] for _, r in episodes)
    with mlflow.start_run(run_name="evaluate_agents") as run:
        logged = log_episode_traces([row for _, row in episodes], "evaluate_agents")
    traces = traces_of(run)
    assert len(traces) == logged == sum(len(conversation_turns(r["messages"], r["turns"]))
                                        for _, r in episodes)
    by_session: dict[str, list[str]] = {}
    for trace in traces:
        by_session.setdefault(trace.info.trace_metadata[SESSION], []).append(trace.to_json())
    assert len(by_session) == len(episodes)
    for secret, row in episodes:
        [text] = [" ".join(t) for s, t in by_session.items() if s.endswith(f"-{row['index']}")]
        assert not leaks(secret, text), (secret, row["messages"])
        for reasoning in (t["user_reasoning"] for t in row["turns"]):
            assert not reasoning or reasoning not in text
        # what the user said is there: the test looks at the traces, not at nothing
        public = [t["obs"] for t in row["turns"] if t["obs_source"] == "user" and t["obs"]]
        assert all(json.dumps(p)[1:-1] in text for p in public[:1])


def test_a_session_is_one_episode_and_its_user_is_who_played(synchronous_export) -> None:
    rows = [played_episode(i, f"<think>plan {i}</think>\nreply {i}", "refund quietly")
            for i in range(3)]
    rows[1]["user"], rows[2]["agent"] = "agenda", "grpo"
    with mlflow.start_run(run_name="evaluate_agents") as run:
        log_episode_traces(rows, "evaluate_agents", thresholds=success_thresholds())
    traces = traces_of(run)
    sessions = {t.info.trace_metadata[SESSION] for t in traces}
    assert len(sessions) == 3 and all(s.startswith(f"evaluate_agents-{run.info.run_id[:8]}-")
                                      for s in sessions)
    assert sorted(t.info.trace_metadata[USER] for t in traces) == sorted(
        ["frozen"] * 3 + ["agenda"] * 3 + ["frozen"] * 3)
    first, second = (next(t for t in traces if t.info.tags["mimesis.turn"] == turn
                          and t.info.tags["mimesis.agent"] == "grpo") for turn in ("0", "1"))
    assert {k: first.info.tags[k] for k in ("mimesis.env", "mimesis.scenario", "mimesis.reward",
                                            "mimesis.success", "mimesis.turns")} == {
        "mimesis.env": "TravelGym", "mimesis.scenario": "TravelGym:2", "mimesis.reward": "1",
        "mimesis.success": "true", "mimesis.turns": "3"}
    # the opening: the agent speaks first, on its instructions, which are no user's words
    assert shown(first) == (None, AGENT_TURNS[0])
    assert json.loads(first.data.request) == {"messages": [{"role": "system", "content": OPENING}]}
    assert first.info.request_preview == f"[system] {OPENING}"  # the list's Input: not the user's
    root, step = first.data.spans
    assert step.parent_id == root.span_id and step.name == "agent"
    assert step.inputs["messages"] == [{"role": "user", "content": OPENING}]  # as the agent got it
    # then the user's words (without the engine's turns-left note) and the agent's reply
    assert shown(second) == ("reply 2", AGENT_TURNS[1])
    assert second.info.request_preview == "reply 2"
    assert second.data.spans[1].inputs["messages"] == [{"role": "user",
                                                        "content": "reply 2" + NOTE}]
    # one session's traces, by the session metadata (what the MLflow UI filters on)
    one = mlflow.search_traces(locations=[run.info.experiment_id], return_type="list",
                               filter_string=f"metadata.`{SESSION}` = '{min(sessions)}'")
    assert len(one) == 3


def test_the_sample_is_bounded_and_spread() -> None:
    assert sample_evenly(list(range(100)), 5) == [0, 25, 50, 74, 99]
    assert sample_evenly(list(range(3)), 200) == [0, 1, 2]
    assert sample_evenly(list(range(3)), 0) == []
    with mlflow.start_run(run_name="train_agent"):
        assert log_episode_traces([], "train_agent") == 0


def test_stages_seeded_alike_keep_each_others_traces() -> None:
    """Stages seed the global random, which OpenTelemetry draws trace ids from: two stages with
    one seed must still log distinct traces, and tracing must not move the stage's stream."""
    rows = [played_episode(i, f"reply {i}", "refund quietly") for i in range(2)]
    runs = []
    for stage in ("train_agent", "distill_agent"):
        random.seed(11)
        with mlflow.start_run(run_name=stage) as run:
            assert log_episode_traces(rows, stage) == 6
        assert random.random() == random.Random(11).random()  # the stage's stream is untouched
        runs.append(run)
    first, second = (traces_of(run) for run in runs)
    assert len(first) == len(second) == 6
    assert not {t.info.trace_id for t in first} & {t.info.trace_id for t in second}


def test_a_session_lists_its_turns_in_order() -> None:
    rows = [played_episode(0, "<think>plan</think>\nreply", "refund quietly")]
    with mlflow.start_run(run_name="evaluate_agents") as run:
        log_episode_traces(rows, "evaluate_agents")
    traces = sorted(traces_of(run), key=lambda t: t.info.request_time)
    assert [t.info.tags["mimesis.turn"] for t in traces] == ["0", "1", "2"]
    assert traces[0].info.request_time < traces[1].info.request_time < traces[2].info.request_time


class ScriptedAgent:
    """A text policy: search, two questions to the user, then an answer."""

    SCRIPT = ("[search] hotel", "[action] What matters most to you in a hotel?",
              "[action] Anything about the area or the room?", "[answer] H1")

    def act(self, views):
        return [self.SCRIPT[len(v.turns)] for v in views]


def test_each_turn_shows_what_the_user_said_and_the_agents_reply() -> None:
    """The stages' path: the rollout engine plays TravelGym against the simulator runtime (every
    generation hides its reasoning, in a leak-corpus format), the records are logged and read
    back. Each trace's request is the user's words as its user message, its response the agent's
    reply; the agent's instructions are in the trace but no user's; no trace holds the
    simulator's reasoning or a hidden fact of its scenario."""
    from transformers import AutoTokenizer

    from mimesis.models.base import base_dir
    from mimesis.rollout.engine import RolloutEngine
    from mimesis.rollout.records import RolloutParams, ScenarioSpec

    secret = SECRETS[2]
    formats = list(FORMATS.values())[:4]

    def user_model(views):  # the reply's words name the view's length: each turn its own
        return [formats[len(v) % 4](secret, f"{UTTERANCES[len(v) % 4]} ({len(v)})") for v in views]

    engine = RolloutEngine(ScriptedAgent(), AutoTokenizer.from_pretrained(base_dir("tiny-llama")),
                           UserSimulator(user_model, max_turns=8),
                           RolloutParams(group_size=1, max_turns=4), progress=False)
    episodes = engine.run([ScenarioSpec(env="TravelGym", seed=s) for s in (3, 4)])
    rows = [{**e.model_dump(mode="json"), "agent": "sft", "user": "frozen"} for e in episodes]
    with mlflow.start_run(run_name="evaluate_agents") as run:
        logged = log_episode_traces(episodes, "evaluate_agents", agent="sft", user="frozen")
    sessions = in_order(traces_of(run))
    assert logged == 6 and len(sessions) == 2
    for row in rows:
        [turns] = [t for s, t in sessions.items() if s.endswith(f"-{row['index']}")]
        said = [t["obs"] for t in row["turns"] if t["obs_source"] == "user"]
        replies = [t["agent_text"] for t in row["turns"]]
        assert len(said) == 2 and all(said) and len(set(said)) == 2
        # the opening: the agent's first message to the user, no user message
        assert shown(turns[0]) == (None, replies[1])
        # then every user message, as the user said it, and the agent's reply to it
        assert [shown(t) for t in turns[1:]] == list(zip(said, replies[2:], strict=True))
        assert [t.info.request_preview for t in turns[1:]] == said
        full = mlflow.get_trace(turns[0].info.trace_id)
        instructions = row["messages"][0]["content"]
        assert [s.name for s in full.data.spans] == ["conversation_turn", "agent", "agent"]
        assert full.data.spans[1].inputs["messages"] == [{"role": "user", "content": instructions}]
        assert full.data.spans[2].inputs["messages"][0]["role"] == "tool"  # the search's result
        text = "\n".join(plain_text(mlflow.get_trace(t.info.trace_id).to_dict()) for t in turns)
        assert instructions in text and all(s in text for s in said)  # the check sees the text
        assert not leaks(secret, text)
        goal, reasoning = row["scenario"]["goal"], [t["user_reasoning"] for t in row["turns"]]
        assert sum(bool(r) and secret in r for r in reasoning) == 2  # there was something to leak
        for private in [goal, *goal.splitlines()[1:], *filter(None, reasoning)]:
            assert private not in text, private


@pytest.mark.slow
def test_the_evaluation_logs_its_episodes_as_sessions(tmp_path) -> None:
    """The stage's path: run_agent_evaluation on tiny agents under the frozen simulator and the
    agenda user logs a bounded, spread sample of its episodes, none holding their reasoning."""
    from mimesis.eval.agents.arms import agent_sources
    from mimesis.eval.agents.run import AgentComparisonParams, run_agent_evaluation
    from tests.eval.test_eval_pairing import ENVS, _arms, _frozen, _tiny_adapter, _user_sampling

    train, distill, sft = _arms(tmp_path / "arms", max_new_tokens=8)
    for folder in (train / "grpo", sft):
        _tiny_adapter(folder)
    p = AgentComparisonParams(
        envs=ENVS, n_scenarios=2, max_turns=2, max_new_tokens=8, max_completion_tokens=256,
        n_bootstrap=20, user=_user_sampling(), base=False, csd=False, train_agent_arms=["grpo"],
        unseen_users=[{"name": "agenda", "kind": "agenda"}], comparisons=[["grpo", "sft"]])
    out = tmp_path / "evaluate_agents"
    with mlflow.start_run(run_name="evaluate_agents") as run:
        metrics = run_agent_evaluation(_frozen(tmp_path / "freeze_user"),
                                       agent_sources(train, distill, sft, p), tmp_path / "no.jsonl",
                                       out, p, mlflow_traces=6)  # 4 runs of 4 episodes: 2 each
    traces = traces_of(run)
    episodes = [json.loads(line) for line in (out / "agent_episodes.jsonl").read_text().splitlines()]
    sessions: dict[str, list] = {}
    for trace in traces:
        sessions.setdefault(trace.info.trace_metadata[SESSION], []).append(trace)
    assert len(sessions) == 8 and metrics["mlflow_traces"] == len(traces) > 0
    assert metrics["tracing_seconds"] > 0
    runs = {(t[0].info.tags["mimesis.agent"], t[0].info.trace_metadata[USER])
            for t in sessions.values()}
    assert runs == {(a, u) for a in ("sft", "grpo") for u in ("frozen", "agenda")}
    text = " ".join(t.to_json() for t in traces)
    for episode in episodes:
        for turn in episode["turns"]:
            reasoning = (turn.get("user_reasoning") or "").strip()
            public = " ".join(m["content"] for m in episode["messages"])
            assert len(reasoning) < 8 or reasoning in public or reasoning not in text
        assert episode["scenario"]["goal"] not in text
