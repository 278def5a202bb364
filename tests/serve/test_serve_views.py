"""``mimesis serve``'s two request conventions: the agent's view and the simulator's view (scenario
as the system message, roles flipped) give the same turn for the same episode and seed, with the
same private-channel and end-signal guarantees.

The model is the tiny random Llama behind the real transformers backend, so equal turns mean equal
prompts (a recording backend also checks that the simulator saw the same chat).
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from mimesis.models.base import load_base
from mimesis.serve.app import create_app
from mimesis.serve.backends import TransformersBackend
from mimesis.serve.batching import BatchingSimulator
from mimesis.serve.schemas import END_CONTENT, END_FINISH_REASON

GOAL = "book a cheap flight from Oslo to Rome in May"
SYSTEM = ("You are playing a customer. Follow the guidelines.\n\n<scenario>\n" + GOAL +
          "\n</scenario>")
AGENT_TURNS = ["Hello! How can I help you today?", "Sure. Which dates in May work for you?",
               "I found two flights. Shall I book the cheaper one?"]


class RecordingBackend(TransformersBackend):
    """The transformers backend, keeping every chat it is given."""

    def __init__(self, model, tokenizer) -> None:
        super().__init__(model, tokenizer, prefill="")  # random weights: no private channel
        self.seen: list = []

    def generate(self, batch, sampling, stop=None):
        self.seen.extend(batch)
        return super().generate(batch, sampling, stop)


@pytest.fixture(scope="module")
def server():
    model, tokenizer = load_base("tiny-llama")
    backend = RecordingBackend(model, tokenizer)
    app = create_app(BatchingSimulator(backend, max_turns=4, window_ms=0))
    with TestClient(app) as client:
        yield client, backend


def agent_messages(user_turns: list[str], k: int) -> list[dict]:
    msgs = [{"role": "system", "content": "You are a travel agent."}]  # the agent's own: unread
    for i in range(k + 1):
        msgs.append({"role": "assistant", "content": AGENT_TURNS[i]})
        if i < k:
            msgs.append({"role": "user", "content": user_turns[i]})
    return msgs


def simulator_messages(user_turns: list[str], k: int) -> list[dict]:
    msgs = [{"role": "system", "content": SYSTEM}]
    for i in range(k + 1):
        msgs.append({"role": "user", "content": AGENT_TURNS[i]})
        if i < k:
            msgs.append({"role": "assistant", "content": user_turns[i]})
    return msgs


def play(client: TestClient, url: str, messages_fn, extra: dict) -> tuple[list, list]:
    """Three agent turns of one episode; returns the user turns and the raw responses."""
    turns, responses = [], []
    for k in range(len(AGENT_TURNS)):
        body = {"messages": messages_fn(turns, k), "seed": 11 + k, "temperature": 1.0,
                "max_tokens": 24, **extra}
        r = client.post(url, json=body)
        assert r.status_code == 200, r.text
        responses.append(r.json())
        if r.json()["choices"][0]["finish_reason"] == END_FINISH_REASON:
            break
        turns.append(r.json()["choices"][0]["message"]["content"])
    return turns, responses


def test_both_views_give_the_same_turns_for_the_same_episode(server) -> None:
    client, backend = server
    runs = {}
    for name, url, fn, extra in [
        ("agent", "/ep/a-1/v1/chat/completions", agent_messages, {"scenario": {"goal": GOAL}}),
        ("sim-path", "/sim/ep/s-1/v1/chat/completions", simulator_messages, {}),
        ("sim-field", "/ep/f-1/v1/chat/completions", simulator_messages, {"view": "simulator"}),
    ]:
        start = len(backend.seen)
        turns, responses = play(client, url, fn, extra)
        private = client.get(f"/ep/{url.split('/ep/')[1].split('/')[0]}/private").json()
        runs[name] = (turns, responses, backend.seen[start:], private)
    agent = runs["agent"]
    assert agent[0], "the tiny simulator sent no turn at all"
    for name in ("sim-path", "sim-field"):
        turns, responses, seen, private = runs[name]
        assert turns == agent[0]
        assert [r["choices"][0] for r in responses] == [r["choices"][0] for r in agent[1]]
        assert seen == agent[2]  # the simulator read the same chats
        assert [t["reasoning"] for t in private["turns"]] == [
            t["reasoning"] for t in agent[3]["turns"]]
        assert private["scenario"]["goal"] == GOAL
    for _, responses, _, private in runs.values():
        for r in responses:
            content = r["choices"][0]["message"]["content"]
            assert "<think>" not in content and "</think>" not in content
            assert all(t["reasoning"] not in content for t in private["turns"] if t["reasoning"])
            ended = r["choices"][0]["finish_reason"] == END_FINISH_REASON
            assert (content == END_CONTENT) == ended == r["mimesis"]["ended"]


def test_stateless_calls_agree_across_views(server) -> None:
    client, _ = server
    user_turns = ["I need a flight to Rome.", "Any day in mid May."]
    common = {"seed": 3, "temperature": 1.0, "max_tokens": 24}
    a = client.post("/v1/chat/completions", json={
        "messages": agent_messages(user_turns, 2), "scenario": {"goal": GOAL}, **common})
    s = client.post("/sim/v1/chat/completions", json={
        "messages": simulator_messages(user_turns, 2), **common})
    assert a.status_code == s.status_code == 200
    assert a.json()["choices"] == s.json()["choices"]


def test_simulator_view_errors(server) -> None:
    client, _ = server
    conflicting = client.post("/sim/v1/chat/completions", json={
        "messages": simulator_messages([], 0), "view": "agent"})
    assert conflicting.status_code == 400 and conflicting.json()["error"]["param"] == "view"
    both = client.post("/sim/v1/chat/completions", json={
        "messages": simulator_messages([], 0), "scenario": {"goal": GOAL}})
    assert both.status_code == 400 and both.json()["error"]["code"] == "conflicting_parameters"
    ends_with_user = client.post("/sim/v1/chat/completions", json={
        "messages": [{"role": "system", "content": GOAL}, {"role": "user", "content": "Hi"},
                     {"role": "assistant", "content": "I need a flight."}]})
    err = ends_with_user.json()["error"]
    assert ends_with_user.status_code == 400 and err["code"] == "agent_message_missing"
    assert "simulated user" in err["message"]
    no_scenario = client.post("/sim/v1/chat/completions", json={
        "messages": [{"role": "user", "content": "Hi"}]})
    assert no_scenario.status_code == 400
    assert no_scenario.json()["error"]["code"] == "scenario_required"
