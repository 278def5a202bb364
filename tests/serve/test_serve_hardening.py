"""``mimesis serve`` under hostile or careless clients: context budget, numbers, keys, ids, memory."""

from __future__ import annotations

import http.client
import json
from collections.abc import Sequence

import httpx
import pytest
import torch
from test_serve_api import ScriptedUser, live_server
from test_serve_views import RecordingBackend

from mimesis.schemas import Scenario
from mimesis.serve import app as app_mod
from mimesis.serve.app import create_app
from mimesis.serve.backends import FunctionBackend, Sampling
from mimesis.serve.batching import BatchingSimulator
from mimesis.serve.config import ServeConfig
from mimesis.serve.episodes import EpisodeStore, state_bytes
from mimesis.serve.local import serve_in_thread
from mimesis.simulator.runtime import UserState

GOAL = "fly to Oslo in May"


class RecordingUser(ScriptedUser):
    """ScriptedUser that keeps every view it was given."""

    def __init__(self) -> None:
        super().__init__(end_at=99)
        self.views: list[list[dict[str, str]]] = []

    def __call__(self, batch):
        self.views.extend(batch)
        return super().__call__(batch)


def _post(http: httpx.Client, episode: str, messages: list[dict], **extra) -> httpx.Response:
    return http.post(f"/ep/{episode}/v1/chat/completions",
                     json={"messages": messages, "scenario": {"goal": GOAL}, **extra})


def _conversation(http: httpx.Client, episode: str, agent_turns: Sequence[str]) -> list[dict]:
    messages: list[dict] = []
    for agent in [None, *agent_turns]:
        if agent is not None:
            messages.append({"role": "assistant", "content": agent})
        r = _post(http, episode, messages)
        assert r.status_code == 200, r.text
        messages.append({"role": "user", "content": r.json()["choices"][0]["message"]["content"]})
    return messages


def test_old_exchanges_go_first_and_a_long_last_agent_turn_loses_its_middle(monkeypatch) -> None:
    script = RecordingUser()
    monkeypatch.setattr("test_serve_api.FunctionBackend",
                        lambda fn: FunctionBackend(fn, max_prompt_tokens=400))
    long_reply = "please tell me more about it " * 30  # 180 words
    with live_server(script) as base, httpx.Client(base_url=base) as http:
        _conversation(http, "long", ["hello", long_reply, "and " + long_reply])
        view = script.views[-1]
        assert GOAL in view[0]["content"]
        assert view[-1] == {"role": "user", "content": "and " + long_reply}
        assert sum(len(m["content"].split()) for m in view) <= 400
        assert len(view) < 8 and view[1]["role"] == "assistant"  # oldest exchanges dropped
        messages = _conversation(http, "huge", [])
        huge = " ".join(f"w{k}" for k in range(500))
        r = _post(http, "huge", messages + [{"role": "assistant", "content": huge}])
        assert r.status_code == 200, r.text
        view = script.views[-1]  # the agent's turn alone was over: its middle left out
        assert GOAL in view[0]["content"] and len(view) == 2
        assert sum(len(m["content"].split()) for m in view) <= 400
        shown = view[-1]["content"]
        left_out = r.json()["mimesis"]["prompt"]["left_out_chars"]
        assert shown.startswith("w0 w1 w2") and shown.endswith("w498 w499")
        assert f"[… {left_out} characters left out …]" in shown and left_out > 0
        assert "agent_message_shortened" in r.json()["mimesis"]["flags"]
        private = http.get("/ep/huge/private").json()
        assert "agent_message_shortened" in private["turns"][-1]["flags"]
        over = http.post("/v1/chat/completions", json={  # the system prompt alone is over
            "messages": [], "scenario": {"goal": "fly " * 450}})
        assert over.status_code == 400
        assert over.json()["error"]["code"] == "context_length_exceeded"
        assert "400" in over.json()["error"]["message"]


def test_a_6000_character_agent_message_is_answered_under_the_default_settings() -> None:
    from mimesis.models.base import load_base

    backend = RecordingBackend(*load_base("tiny-llama"))
    words = ["the", "room", "rate", "includes", "breakfast", "and", "a", "late", "checkout",
             "if", "you", "would", "like", "to", "stay", "longer", "in", "the", "city"]
    long = " ".join(words[k % len(words)] + str(k) for k in range(900))[:6000]
    assert len(long) == 6000 and backend.count_tokens(long) > backend.max_prompt_tokens
    sim = BatchingSimulator(backend)
    with serve_in_thread(create_app(sim, ServeConfig())) as base, httpx.Client(
            base_url=base, timeout=120) as http:
        r = http.post("/v1/chat/completions", json={
            "messages": [{"role": "user", "content": "I need a hotel in Lisbon"},
                         {"role": "assistant", "content": long}],
            "scenario": {"goal": "book a hotel in Lisbon for two nights"}, "max_tokens": 4})
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["finish_reason"] in ("stop", "end_conversation")
    left_out = r.json()["mimesis"]["prompt"]["left_out_chars"]
    assert 0 < left_out < 6000
    view = backend.seen[-1]
    assert backend.prompt_tokens(view) <= backend.max_prompt_tokens == 768
    shown = view[-1]["content"]
    assert shown.startswith(long[:200]) and shown.endswith(long[-200:])
    assert f"[… {left_out} characters left out …]" in shown


class SeededBackend(FunctionBackend):
    """Seeds torch the way ChatGenerator does (an out-of-range seed raised inside it)."""

    def generate(self, batch, sampling: Sampling, stop=None) -> list[str]:
        if sampling.seed is not None:
            torch.manual_seed(sampling.seed)
        return super().generate(batch, sampling, stop)


@pytest.mark.parametrize("field,value", [
    ("seed", 2**70), ("seed", -1), ("n", 10**30), ("max_tokens", 10**30),
    ("max_completion_tokens", 2**64), ("temperature", 1e308), ("top_p", -0.5)])
def test_out_of_range_numbers_get_400_and_the_connection_stays_open(monkeypatch, field,
                                                                    value) -> None:
    monkeypatch.setattr("test_serve_api.FunctionBackend", SeededBackend)
    with live_server(ScriptedUser()) as base:
        conn = http.client.HTTPConnection(base.removeprefix("http://"), timeout=10)
        body = {"messages": [], "scenario": {"goal": GOAL}, field: value}
        conn.request("POST", "/v1/chat/completions", json.dumps(body),
                     {"Content-Type": "application/json"})
        bad = conn.getresponse()
        assert bad.status == 400 and json.loads(bad.read())["error"]["param"] == field
        assert bad.getheader("connection") != "close"
        body[field] = 1 if field != "top_p" else 0.5
        conn.request("POST", "/v1/chat/completions", json.dumps(body),
                     {"Content-Type": "application/json"})
        good = conn.getresponse()
        assert good.status == 200 and json.loads(good.read())["choices"][0]["message"]
        conn.close()


@pytest.mark.parametrize("host,key", [("0.0.0.0", None), ("10.1.2.3", ""), ("::", None)])
def test_off_loopback_needs_a_non_empty_key(monkeypatch, host, key) -> None:
    started = []
    monkeypatch.setattr("uvicorn.run", lambda *a, **k: started.append(k))
    sim = BatchingSimulator(FunctionBackend(ScriptedUser()))
    with pytest.raises(ValueError, match="without an API key"):
        app_mod.run_server(sim, ServeConfig(api_key=key), host=host)
    app_mod.run_server(sim, ServeConfig(api_key=key), host="127.0.0.1")
    app_mod.run_server(sim, ServeConfig(api_key="k"), host=host)
    assert len(started) == 2


def test_agent_key_cannot_read_private_and_private_key_cannot_play() -> None:
    config = ServeConfig(api_key="agent-key", private_key="coach-key")
    agent, coach = ({"Authorization": f"Bearer {k}"} for k in ("agent-key", "coach-key"))
    with live_server(ScriptedUser(), config) as base, httpx.Client(base_url=base) as http:
        body = {"messages": [], "scenario": {"goal": GOAL}}
        assert http.post("/ep/e1/v1/chat/completions", json=body, headers=agent).status_code == 200
        assert http.post("/ep/e2/v1/chat/completions", json=body, headers=coach).status_code == 401
        assert http.get("/ep/e1/private", headers=agent).status_code == 401
        assert http.get("/ep/e1/private/", headers=agent).status_code == 401
        private = http.get("/ep/e1/private", headers=coach)
        assert private.status_code == 200 and GOAL in private.json()["turns"][0]["reasoning"]
    with pytest.raises(ValueError, match="differ"):
        ServeConfig(api_key="same", private_key="same")


@pytest.mark.parametrize("episode_id", ["abc%0A", "abc%0D%0A", "abc%0Adef", "%0Aabc"])
def test_episode_ids_with_newlines_are_rejected(episode_id) -> None:
    with live_server(ScriptedUser()) as base, httpx.Client(base_url=base) as http:
        r = _post(http, episode_id, [])
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_episode_id"
        assert _post(http, "abc", []).status_code == 200


def test_an_episode_over_its_memory_budget_gets_400() -> None:
    config = ServeConfig(max_episode_bytes=4096)
    with live_server(ScriptedUser(end_at=99), config) as base, httpx.Client(base_url=base) as http:
        messages = _conversation(http, "big", ["a" * 1000])
        r = _post(http, "big", messages + [{"role": "assistant", "content": "b" * 3000}])
        assert r.status_code == 400 and r.json()["error"]["code"] == "episode_too_large"
        assert _post(http, "small", []).status_code == 200


def _state(text_bytes: int) -> UserState:
    return UserState(scenario=Scenario(goal="g", annotator="test"), system_prompt="s" * text_bytes)


def test_the_store_keeps_all_episodes_under_the_total_budget() -> None:
    store = EpisodeStore(ttl_s=60, max_episodes=100, max_total_bytes=10_000)
    for i in range(5):
        store.create(f"e{i}", _state(3000))
    assert len(store) == 3 and store.total_bytes <= 10_000 and store.evicted == 2
    assert store.get("e0") is None and store.get("e4") is not None
    episode = store.get("e2")
    store.update(episode, _state(6000))  # the episode in use grows: others make room
    assert store.get("e2") is episode and store.total_bytes <= 10_000
    assert store.total_bytes == sum(state_bytes(store.get(e).state) for e in ("e2",)
                                    if store.get(e)) + sum(
        state_bytes(store.get(e).state) for e in ("e3", "e4") if store.get(e))
    store.delete("e2")
    assert store.total_bytes == sum(state_bytes(store.get(e).state) for e in ("e3", "e4")
                                    if store.get(e))
