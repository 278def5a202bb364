"""``mimesis serve`` bounds every request: size limits before any tokenization, linear-time
fitting of long histories, and the measured real conversations pass the default limits."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import numpy as np
import pytest
from test_serve_api import ScriptedUser

from mimesis.io import read_jsonl
from mimesis.schemas import Conversation
from mimesis.serve.app import create_app
from mimesis.serve.backends import FunctionBackend
from mimesis.serve.batching import BatchingSimulator
from mimesis.serve.config import ServeConfig
from mimesis.serve.fitting import fit
from mimesis.serve.limits import check_request
from mimesis.serve.local import serve_in_thread
from mimesis.serve.schemas import APIError, ChatCompletionRequest

GOAL = {"goal": "fly to Oslo in May"}


class CountingBackend(FunctionBackend):
    """Whitespace tokens, like FunctionBackend, counting every call that reads a prompt."""

    def __init__(self, generate_fn, max_prompt_tokens: int | None = None) -> None:
        super().__init__(generate_fn, max_prompt_tokens=max_prompt_tokens)
        self.prompt_calls = 0
        self.generate_calls = 0

    def prompt_tokens(self, messages) -> int:
        self.prompt_calls += 1
        return super().prompt_tokens(messages)

    def generate(self, batch, sampling, stop=None) -> list[str]:
        self.generate_calls += 1
        return super().generate(batch, sampling, stop)


@contextmanager
def serve(backend, config: ServeConfig | None = None, max_turns: int = 8) -> Iterator[str]:
    sim = BatchingSimulator(backend, max_turns=max_turns, window_ms=5)
    with serve_in_thread(create_app(sim, config or ServeConfig())) as url:
        yield url


def history(n: int) -> list[dict]:
    """``n`` short messages, alternating, ending with the agent (assistant) as a client sends."""
    return [{"role": "user" if (n - k) % 2 == 0 else "assistant", "content": f"hi {k}"}
            for k in range(n)]


def test_a_20000_message_request_is_refused_within_2_s_before_any_tokenization() -> None:
    backend = CountingBackend(ScriptedUser(), max_prompt_tokens=400)
    with serve(backend) as base, httpx.Client(base_url=base, timeout=30) as http:
        started = time.perf_counter()
        r = http.post("/v1/chat/completions", json={"messages": history(20_000),
                                                    "max_tokens": 4, "scenario": GOAL})
        elapsed = time.perf_counter() - started
    err = r.json()["error"]
    assert r.status_code == 400 and elapsed < 2.0, (r.status_code, elapsed)
    assert (err["param"], err["code"]) == ("messages", "too_many_messages")
    assert "20000" in err["message"] and "256" in err["message"]
    assert "--max-messages" in err["message"]
    assert backend.prompt_calls == backend.generate_calls == 0


def test_with_the_limits_lifted_a_request_renders_its_prompt_o_log_n_times() -> None:
    # Before fitting galloped, each dropped exchange re-counted the whole history: quadratic
    # (10x the messages took ~100x the time; 40+ min for 20,000 with a real tokenizer). The
    # count of prompt renders is what grew; the time per request is measured by
    # benchmarks/serve_long_history.py, not here.
    backend = CountingBackend(ScriptedUser(end_at=99_999), max_prompt_tokens=400)
    config = ServeConfig(max_messages=50_000, max_total_chars=10**7, max_body_bytes=10**7)

    def renders(http: httpx.Client, n: int) -> int:
        before = backend.prompt_calls
        r = http.post("/v1/chat/completions",
                      json={"messages": history(n), "max_tokens": 4, "scenario": GOAL})
        assert r.status_code == 200, r.text
        return backend.prompt_calls - before

    with serve(backend, config, max_turns=50_000) as base, httpx.Client(base_url=base,
                                                                        timeout=120) as http:
        small, large = renders(http, 2000), renders(http, 20_000)
    # 10x the messages: a few more renders (log2 10 ~ 3.3 more halvings), not 10x or 9,000 more
    assert 0 < small and large < 2 * small + 30, (small, large)


def test_fitting_renders_log_many_suffixes() -> None:
    rendered: list[int] = []

    def count(messages) -> int:
        rendered.append(len(messages))
        return sum(len(m["content"].split()) for m in messages)

    view = [{"role": "system", "content": "goal " * 10}]
    for k in range(5000):
        view += [{"role": "assistant", "content": f"user turn {k}"},
                 {"role": "user", "content": f"agent turn {k}"}]
    fitted = fit(view, count, budget=100).messages
    assert count(fitted) <= 100 and fitted[0] == view[0] and fitted[-1] == view[-1]
    assert fitted[1]["role"] == "assistant"
    longer = [view[0], *view[-len(fitted):]]  # one more exchange does not fit
    assert count(longer) > 100
    # The dropped part is never rendered: the work is bounded by what is kept, not the history.
    assert len(rendered) < 40 and sum(rendered[:-2]) < 8 * len(fitted) * np.log2(len(fitted))
    rendered.clear()
    assert fit(view[:9], count, budget=100).messages == view[:9] and len(rendered) <= 4


@pytest.mark.parametrize(("body", "param", "code", "limit"), [
    ({"messages": history(9)}, "messages", "too_many_messages", "8"),
    ({"messages": [{"role": "assistant", "content": "x" * 101}]}, "messages.0.content",
     "message_too_long", "100"),
    ({"messages": [{"role": "assistant", "content": [{"type": "text", "text": "x" * 101}]}]},
     "messages.0.content", "message_too_long", "100"),
    ({"messages": [{"role": "user", "content": "x" * 61},
                   {"role": "assistant", "content": "y" * 61}]}, "messages", "messages_too_long",
     "120"),
    ({"messages": [], "scenario": {"goal": "g" * 61}}, "scenario.goal", "scenario_too_long", "60"),
    ({"messages": [], "max_tokens": 33}, "max_tokens", "max_tokens_too_large", "32"),
    ({"messages": [], "max_completion_tokens": 33}, "max_completion_tokens",
     "max_tokens_too_large", "32"),
    ({"messages": [], "n": 3}, "n", "unsupported_parameter", "n must be 1"),
])
def test_each_limit_is_refused_with_its_field_and_value(body, param, code, limit) -> None:
    config = ServeConfig(max_messages=8, max_message_chars=100, max_total_chars=120,
                         max_scenario_chars=60, max_tokens_limit=32, default_max_tokens=16)
    with pytest.raises(APIError) as info:
        check_request(ChatCompletionRequest(**{"scenario": GOAL, **body}), config)
    err = info.value.body.error
    assert (info.value.status, err.param, err.code) == (400, param, code)
    assert limit in err.message


def test_the_simulator_views_scenario_has_the_same_limit() -> None:
    backend = CountingBackend(ScriptedUser())
    config = ServeConfig(max_scenario_chars=60)
    with serve(backend, config) as base:
        r = httpx.post(f"{base}/sim/v1/chat/completions", json={"messages": [
            {"role": "system", "content": "g" * 61}]})
        ok = httpx.post(f"{base}/sim/v1/chat/completions", json={"messages": [
            {"role": "system", "content": "fly to Oslo"}]})
    err = r.json()["error"]
    assert (r.status_code, err["param"], err["code"]) == (400, "messages.0.content",
                                                          "scenario_too_long")
    assert "60" in err["message"] and ok.status_code == 200


# real conversations pass -----------------------------------------------------------------------
def conversation_requests(split_path: Path) -> list[dict]:
    """One request per conversation: every turn up to its last agent turn, behind an agent
    system prompt, with a one-line goal (as a next-turn harness sends it)."""
    bodies = []
    for conv in read_jsonl(split_path, Conversation):
        last = max(k for k, t in enumerate(conv.turns) if t.role == "assistant")
        messages = [{"role": "system", "content": "You are a helpful assistant."}]
        messages += [{"role": t.role, "content": t.text} for t in conv.turns[:last + 1]]
        goal = conv.turns[0].text.strip().split("\n")[0][:200] or "get help"
        bodies.append({"messages": messages, "scenario": {"goal": goal}, "max_tokens": 4})
    return bodies


@pytest.mark.slow  # curates the smoke split first (~15 s)
def test_the_99th_percentile_curated_test_conversation_passes_the_default_limits(
        smoke_test_split) -> None:
    bodies = conversation_requests(smoke_test_split)
    config = ServeConfig()
    sizes = {"messages": [len(b["messages"]) for b in bodies],
             "total": [sum(len(m["content"]) for m in b["messages"]) for b in bodies],
             "longest": [max(len(m["content"]) for m in b["messages"]) for b in bodies]}
    p99 = {k: float(np.percentile(v, 99)) for k, v in sizes.items()}
    assert p99["messages"] <= config.max_messages
    assert p99["total"] <= config.max_total_chars
    assert p99["longest"] <= config.max_message_chars
    for body in bodies:  # every one of them, not only the 99th percentile
        check_request(ChatCompletionRequest(**body), config)
    p99_body = bodies[int(np.argsort(sizes["total"])[int(0.99 * (len(bodies) - 1))])]
    with serve(CountingBackend(ScriptedUser(end_at=99)), config, max_turns=64) as base:
        r = httpx.post(f"{base}/v1/chat/completions", json=p99_body, timeout=30)
    assert r.status_code == 200, r.text
