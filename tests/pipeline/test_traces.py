"""Episodes as MLflow traces (:mod:`mimesis.traces`): a session per episode, a trace per agent
turn, the user who played as the session's user, and nothing private: no trace holds the
simulator's reasoning or a hidden fact of its scenario.

The episodes are played by the real runtime (:class:`~mimesis.simulator.runtime.UserSimulator`)
on the leak corpus (tests/leak_corpus.py): every format of leaking generation, each hiding a
secret in the reasoning and in the scenario's goal, so a trace that carried either would name it.
"""

from __future__ import annotations

import json
import random

import mlflow
import pytest

from mimesis.envs.registry import success_thresholds
from mimesis.schemas import Scenario
from mimesis.simulator.runtime import UserSimulator
from mimesis.traces import SESSION, USER, log_episode_traces, sample_evenly, turn_exchanges
from tests.leak_corpus import FORMATS, SECRETS, UTTERANCES, leaks

AGENT_TURNS = ("Hello! How can I help you today?", "Could you tell me a bit more?")


def played_episode(index: int, raw: str, secret: str) -> dict:
    """An episode record (the shape of agent_episodes.jsonl) of two agent turns against the
    runtime, whose every generation is ``raw`` and whose scenario holds ``secret``."""
    sim = UserSimulator(lambda batch: [raw] * len(batch))
    scenario = Scenario(goal=f"Get help with an order. Private: {secret}.", annotator="corpus")
    state = sim.init_state(scenario)
    messages = [{"role": "system", "content": "You are a helpful travel agent."}]
    said, state = sim.next_message(None, state)
    messages.append({"role": "user", "content": said})
    for agent_text in AGENT_TURNS:
        messages.append({"role": "assistant", "content": agent_text})
        if state.ended:
            break
        said, state = sim.next_message(agent_text, state)
        messages.append({"role": "user", "content": said})
    return {"agent": "sft", "user": "frozen", "env": "TravelGym", "scenario_id": f"TravelGym:{index}",
            "index": index, "reward": 1.0, "termination": "user_end", "messages": messages,
            "turns": [{"agent_text": t, "user_reasoning": r}
                      for t, r in zip(AGENT_TURNS, state.private, strict=False)],
            "scenario": scenario.model_dump(), "user_end_reason": state.end_reason}


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


def test_no_trace_holds_reasoning_or_a_hidden_fact() -> None:
    episodes = corpus_episodes()
    assert any(r["turns"] and r["turns"][0]["user_reasoning"] for _, r in episodes)
    with mlflow.start_run(run_name="evaluate_agents") as run:
        logged = log_episode_traces([row for _, row in episodes], "evaluate_agents")
    traces = traces_of(run)
    assert len(traces) == logged == sum(len(turn_exchanges(r["messages"])) for _, r in episodes)
    by_session: dict[str, list[str]] = {}
    for trace in traces:
        by_session.setdefault(trace.info.trace_metadata[SESSION], []).append(trace.to_json())
    assert len(by_session) == len(episodes)
    for secret, row in episodes:
        [text] = [" ".join(t) for s, t in by_session.items() if s.endswith(f"-{row['index']}")]
        assert not leaks(secret, text), (secret, row["messages"])
        for reasoning in (t["user_reasoning"] for t in row["turns"]):
            assert not reasoning or reasoning not in text
        # what the agent saw is there: the test looks at the traces, not at nothing
        public = [m["content"] for m in row["messages"] if m["role"] == "user" and m["content"]]
        assert all(json.dumps(p)[1:-1] in text for p in public[:1])


def test_a_session_is_one_episode_and_its_user_is_who_played() -> None:
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
        ["frozen"] * 2 + ["agenda"] * 2 + ["frozen"] * 2)
    first = next(t for t in traces if t.info.tags["mimesis.turn"] == "0"
                 and t.info.tags["mimesis.agent"] == "grpo")
    assert {k: first.info.tags[k] for k in ("mimesis.env", "mimesis.scenario", "mimesis.reward",
                                            "mimesis.success", "mimesis.turns")} == {
        "mimesis.env": "TravelGym", "mimesis.scenario": "TravelGym:2", "mimesis.reward": "1",
        "mimesis.success": "true", "mimesis.turns": "2"}
    span = first.data.spans[0]
    assert span.inputs["messages"][-1] == {"role": "user", "content": "reply 2"}
    assert span.outputs == AGENT_TURNS[0]
    # one session's traces, by the session metadata (what the MLflow UI filters on)
    one = mlflow.search_traces(locations=[run.info.experiment_id], return_type="list",
                               filter_string=f"metadata.`{SESSION}` = '{min(sessions)}'")
    assert len(one) == 2


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
            assert log_episode_traces(rows, stage) == 4
        assert random.random() == random.Random(11).random()  # the stage's stream is untouched
        runs.append(run)
    first, second = (traces_of(run) for run in runs)
    assert len(first) == len(second) == 4
    assert not {t.info.trace_id for t in first} & {t.info.trace_id for t in second}


def test_a_session_lists_its_turns_in_order() -> None:
    rows = [played_episode(0, "<think>plan</think>\nreply", "refund quietly")]
    with mlflow.start_run(run_name="evaluate_agents") as run:
        log_episode_traces(rows, "evaluate_agents")
    traces = sorted(traces_of(run), key=lambda t: t.info.request_time)
    assert [t.info.tags["mimesis.turn"] for t in traces] == ["0", "1"]
    assert traces[0].info.request_time < traces[1].info.request_time


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
