"""``mimesis serve`` over real HTTP on loopback, driven by the official ``openai`` client.

The model is a scripted ``generate_fn`` (deterministic; it writes each episode's goal into the
private reasoning), so the tests can tell whose reasoning went where.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import openai
import pytest

from mimesis.serve.app import create_app
from mimesis.serve.backends import FunctionBackend
from mimesis.serve.batching import BatchingSimulator
from mimesis.serve.config import ServeConfig
from mimesis.serve.local import serve_in_thread
from mimesis.serve.schemas import END_CONTENT, END_FINISH_REASON

GOAL_RX = re.compile(r"Your goal: (.+)")


class ScriptedUser:
    """Turn n (0-based) of an episode: ``<think>secret about <goal></think>\\nturn n``; the
    ``end_at``-th turn is only the end signal. Records every batch it is given."""

    def __init__(self, end_at: int = 3, delay_s: float = 0.0) -> None:
        self.end_at, self.delay_s = end_at, delay_s
        self.batches: list[list[str]] = []
        self.lock = threading.Lock()

    def __call__(self, batch: list[list[dict[str, str]]]) -> list[str]:
        time.sleep(self.delay_s)
        goals = [GOAL_RX.search(view[0]["content"]).group(1) for view in batch]
        with self.lock:
            self.batches.append(goals)
        out = []
        for view, goal in zip(batch, goals, strict=True):
            n = sum(m["role"] == "assistant" for m in view)
            out.append(f"<think>secret about {goal}</think>\n<|end_conversation|>"
                       if n >= self.end_at else f"<think>secret about {goal} #{n}</think>\nturn {n}")
        return out


@contextmanager
def live_server(script: ScriptedUser, config: ServeConfig | None = None, max_turns: int = 8,
                window_ms: float = 30.0, scenarios: dict | None = None) -> Iterator[str]:
    """Run the app with uvicorn in a thread on a free loopback port; yields the base URL."""
    sim = BatchingSimulator(FunctionBackend(script), max_turns=max_turns, window_ms=window_ms)
    with serve_in_thread(create_app(sim, config or ServeConfig(), scenarios)) as url:
        yield url


def client(base: str, episode: str | None = None, **kwargs) -> openai.OpenAI:
    url = f"{base}/ep/{episode}/v1" if episode else f"{base}/v1"
    return openai.OpenAI(base_url=url, api_key=kwargs.pop("api_key", "unused"), max_retries=0,
                         **kwargs)


def play(c: openai.OpenAI, goal: str, replies: list[str]) -> tuple[list, list[dict]]:
    """An agent loop: opening call, then one call per agent reply until the end signal."""
    messages = [{"role": "system", "content": "You are a helpful travel agent."}]
    responses = [c.chat.completions.create(model="sim", messages=messages,
                                           extra_body={"scenario": {"goal": goal}})]
    for reply in replies:
        choice = responses[-1].choices[0]
        if choice.finish_reason == END_FINISH_REASON:
            break
        messages += [{"role": "user", "content": choice.message.content},
                     {"role": "assistant", "content": reply}]
        responses.append(c.chat.completions.create(model="sim", messages=messages))
    return responses, messages


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, ScriptedUser]]:
    script = ScriptedUser()
    with live_server(script, ServeConfig(max_tokens_limit=256, max_body_bytes=4096,
                                         default_goal=None)) as base:
        yield base, script


def test_multi_turn_episode_hides_reasoning_and_signals_the_end(server) -> None:
    base, _ = server
    responses, _ = play(client(base, "trip-1"), "fly to Oslo in May", ["Where to?", "Booked.",
                                                                       "Anything else?"])
    contents = [r.choices[0].message.content for r in responses]
    assert contents == ["turn 0", "turn 1", "turn 2", END_CONTENT]
    assert [r.choices[0].finish_reason for r in responses] == ["stop"] * 3 + [END_FINISH_REASON]
    assert all("secret" not in c and "<think>" not in c for c in contents)
    last = responses[-1].model_extra["mimesis"]
    assert last["ended"] and last["end_reason"] == "end_signal" and last["turn"] == 3
    assert responses[0].usage.completion_tokens > 0 and responses[0].usage.prompt_tokens > 0

    private = httpx.get(f"{base}/ep/trip-1/private").json()
    assert [t["reasoning"] for t in private["turns"]] == [
        f"secret about fly to Oslo in May #{n}" for n in range(3)]
    assert [t["utterance"] for t in private["turns"]] == contents[:3]
    assert private["end_reasoning"] == "secret about fly to Oslo in May"
    # 3 turns + the off-goal opening drawn again ("turn 0" shares no goal word) + 3 end draws
    assert private["ended"] and len(private["raw"]) == 7


def test_after_the_end_every_call_returns_the_end_again(server) -> None:
    base, _ = server
    c = client(base, "trip-ended")
    responses, messages = play(c, "rent a car", ["a", "b", "c"])
    assert responses[-1].choices[0].finish_reason == END_FINISH_REASON
    again = c.chat.completions.create(model="sim", messages=messages + [
        {"role": "assistant", "content": "Hello? Still there?"}])
    assert again.choices[0].finish_reason == END_FINISH_REASON
    assert again.choices[0].message.content == END_CONTENT


def test_concurrent_episodes_are_batched_but_never_see_each_others_reasoning() -> None:
    script = ScriptedUser(end_at=4, delay_s=0.05)
    goals = {f"ep-{k}": f"goal number {k} with token TOKEN{k}" for k in range(4)}
    results: dict[str, list] = {}
    with live_server(script, window_ms=80) as base:
        start = threading.Barrier(len(goals))

        def run(episode: str) -> None:
            start.wait()
            results[episode] = play(client(base, episode), goals[episode], ["ok", "ok", "ok"])[0]

        threads = [threading.Thread(target=run, args=(e,)) for e in goals]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        privates = {e: httpx.get(f"{base}/ep/{e}/private").json() for e in goals}
        stats = httpx.get(f"{base}/stats").json()["batching"]
    assert stats["largest_batch"] >= 2  # several episodes shared one generate call
    assert any(len(set(b)) >= 2 for b in script.batches)
    for episode, goal in goals.items():
        token = goal.split()[-1]
        contents = [r.choices[0].message.content for r in results[episode]]
        assert contents[:4] == ["turn 0", "turn 1", "turn 2", "turn 3"]
        assert not any("TOKEN" in c or "secret" in c for c in contents)
        reasoning = " ".join(t["reasoning"] for t in privates[episode]["turns"])
        assert reasoning.count(token) == 4
        assert all(goals[other].split()[-1] not in reasoning for other in goals if other != episode)


def test_stateless_endpoint_needs_no_server_state(server) -> None:
    base, _ = server
    c = client(base)
    history = [{"role": "user", "content": "turn 0"}, {"role": "assistant", "content": "Sure."},
               {"role": "user", "content": "turn 1"}, {"role": "assistant", "content": "Done."}]
    r = c.chat.completions.create(model="sim", messages=history,
                                  extra_body={"scenario": {"goal": "buy shoes"}})
    assert r.choices[0].message.content == "turn 2" and r.choices[0].finish_reason == "stop"
    assert r.model_extra["mimesis"]["episode_id"] is None


@pytest.mark.parametrize("blank", ["", "  \n", [], [{"type": "text", "text": " "}]])
def test_a_blank_user_message_in_the_history_is_an_empty_user_turn(server, blank) -> None:
    base, _ = server
    # a logged user turn that held only an image: its text is empty
    history = [{"role": "user", "content": "I need a hotel in Lisbon"},
               {"role": "assistant", "content": "Which dates?"},
               {"role": "user", "content": blank},
               {"role": "assistant", "content": "Thanks for the screenshot. From Friday?"}]
    r = httpx.post(f"{base}/v1/chat/completions",
                   json={"messages": history, "scenario": {"goal": "a hotel in Lisbon"}})
    assert r.status_code == 200, r.text
    # the simulator's view held two turns of its own before this one: the blank one counts
    assert r.json()["choices"][0]["message"]["content"] == "turn 2"
    flipped = [{"role": "system", "content": "a hotel in Lisbon"},
               {"role": "user", "content": "Hi, how can I help?"},
               {"role": "assistant", "content": blank},
               {"role": "user", "content": "I could not open your file. Can you type it?"}]
    sim = httpx.post(f"{base}/sim/v1/chat/completions", json={"messages": flipped})
    assert sim.status_code == 200, sim.text
    assert sim.json()["choices"][0]["message"]["content"] == "turn 1"


def test_turn_budget_ends_the_episode() -> None:
    with live_server(ScriptedUser(end_at=99), max_turns=2) as base:
        responses, _ = play(client(base, "short"), "find a recipe", ["a", "b", "c"])
    assert [r.choices[0].finish_reason for r in responses] == ["stop", "stop", END_FINISH_REASON]
    assert responses[-1].model_extra["mimesis"]["end_reason"] == "max_turns"


def test_agent_may_speak_first_and_retries_are_idempotent(server) -> None:
    base, script = server
    c = client(base, "agent-first")
    messages = [{"role": "assistant", "content": "Hi! How can I help?"}]
    first = c.chat.completions.create(model="sim", messages=messages,
                                      extra_body={"scenario": {"goal": "fix my bike"}})
    calls = len(script.batches)
    retry = c.chat.completions.create(model="sim", messages=messages)
    assert retry.id == first.id and len(script.batches) == calls  # replayed, not regenerated
    assert first.choices[0].message.content == "turn 0"
    assert script.batches[-1] == ["fix my bike"]


def _error(exc: openai.APIStatusError) -> dict:
    return exc.response.json()["error"]


@pytest.mark.parametrize(("kwargs", "param", "code"), [
    ({"max_tokens": 100_000}, "max_tokens", "max_tokens_too_large"),
    ({"n": 2}, "n", "unsupported_parameter"),
    ({"temperature": 5.0}, "temperature", "invalid_value"),
    ({"extra_body": {"scenario": {"goal": "x", "behaviors": ["B99"]}}}, "scenario.behaviors",
     "invalid_value"),
    ({"extra_body": {"scenario_id": "nope"}}, "scenario_id", "unknown_scenario"),
])
def test_bad_parameters_get_openai_style_400s(server, kwargs, param, code) -> None:
    base, _ = server
    extra = kwargs.pop("extra_body", {"scenario": {"goal": "x"}})
    with pytest.raises(openai.BadRequestError) as info:
        client(base, "bad-params").chat.completions.create(
            model="sim", messages=[{"role": "system", "content": "s"}], extra_body=extra, **kwargs)
    err = _error(info.value)
    assert (err["param"], err["code"], err["type"]) == (param, code, "invalid_request_error")
    assert err["message"]


def test_malformed_and_oversized_bodies_are_rejected(server) -> None:
    base, _ = server
    url = f"{base}/ep/raw/v1/chat/completions"
    bad_json = httpx.post(url, content=b'{"messages": [', headers={"content-type":
                                                                    "application/json"})
    assert bad_json.status_code == 400 and bad_json.json()["error"]["code"] == "invalid_json"
    no_messages = httpx.post(url, json={"model": "sim"})
    assert no_messages.status_code == 400 and no_messages.json()["error"]["param"] == "messages"
    bad_role = httpx.post(url, json={"messages": [{"role": "robot", "content": "hi"}]})
    assert bad_role.status_code == 400 and bad_role.json()["error"]["param"] == "messages.0.role"
    huge = {"messages": [{"role": "assistant", "content": "x" * 10_000}],
            "scenario": {"goal": "g"}}
    big = httpx.post(url, json=huge)
    assert big.status_code == 413 and big.json()["error"]["code"] == "request_too_large"

    def chunks():
        for _ in range(10):
            yield b" " * 1000  # no Content-Length: streamed, counted while read

    streamed = httpx.post(url, content=chunks(), headers={"content-type": "application/json"})
    assert streamed.status_code == 413
    with pytest.raises(openai.APIStatusError) as info:
        client(base, "big").chat.completions.create(
            model="sim", messages=[{"role": "assistant", "content": "y" * 8000}],
            extra_body={"scenario": {"goal": "g"}})
    assert info.value.status_code == 413
    unknown = httpx.get(f"{base}/nowhere")
    assert unknown.status_code == 404 and set(unknown.json()["error"]) == {
        "message", "type", "param", "code"}


def test_episode_rules_give_4xx(server) -> None:
    base, _ = server
    c = client(base, "rules")
    with pytest.raises(openai.BadRequestError) as info:  # stream is refused
        c.chat.completions.create(model="sim", messages=[], stream=True,
                                  extra_body={"scenario": {"goal": "g"}})
    assert _error(info.value)["param"] == "stream"
    with pytest.raises(openai.BadRequestError) as info:  # no scenario, no server default
        c.chat.completions.create(model="sim", messages=[])
    assert _error(info.value)["code"] == "scenario_required"
    first = c.chat.completions.create(model="sim", messages=[],
                                      extra_body={"scenario": {"goal": "g"}})
    with pytest.raises(openai.ConflictError) as info:  # edited history
        c.chat.completions.create(model="sim", messages=[
            {"role": "user", "content": "something I never said"},
            {"role": "assistant", "content": "ok"}])
    assert _error(info.value)["code"] == "history_mismatch"
    with pytest.raises(openai.ConflictError):
        c.chat.completions.create(model="sim", messages=[
            {"role": "user", "content": first.choices[0].message.content},
            {"role": "assistant", "content": "ok"}], extra_body={"scenario": {"goal": "other"}})
    with pytest.raises(openai.BadRequestError) as info:  # ends with the user's message
        c.chat.completions.create(model="sim", messages=[
            {"role": "user", "content": first.choices[0].message.content}])
    assert _error(info.value)["code"] == "agent_message_missing"
    with pytest.raises(openai.NotFoundError) as info:
        client(base, "never-started").chat.completions.create(model="sim", messages=[
            {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
    assert _error(info.value)["code"] == "episode_not_found"
    assert httpx.get(f"{base}/ep/never-started/private").status_code == 404
    bad_id = httpx.post(f"{base}/ep/bad%20id!/v1/chat/completions", json={"messages": []})
    assert bad_id.status_code == 400 and bad_id.json()["error"]["param"] == "episode_id"
    assert httpx.delete(f"{base}/ep/rules").json()["deleted"] is True
    assert httpx.get(f"{base}/ep/rules/private").status_code == 404


def test_api_key_guards_everything_but_health() -> None:
    with live_server(ScriptedUser(), ServeConfig(api_key="s3cret", default_goal="g")) as base:
        assert httpx.get(f"{base}/health").status_code == 200
        with pytest.raises(openai.AuthenticationError):
            client(base, "k").chat.completions.create(model="sim", messages=[])
        assert httpx.get(f"{base}/ep/k/private").status_code == 403  # no private key: closed
        ok = client(base, "k", api_key="s3cret").chat.completions.create(model="sim", messages=[])
        assert ok.choices[0].message.content == "turn 0"
        models = client(base, api_key="s3cret").models.list()
        assert [m.id for m in models.data] == ["mimesis-user-simulator"]
