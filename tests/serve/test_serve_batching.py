"""``mimesis serve`` under concurrent batches of real conversations.

Requests replay the smoke profile's curated test split (the ``curate`` stage on the ShareGPT
package, built once here) through a loopback server with the tiny random Llama: a batch of
real-shaped requests of different lengths is answered 200 throughout, batched greedy serving
writes what one-at-a-time serving writes, a request that breaks generation fails alone, and a
200-request soak (slow) is answered 200 throughout.
"""

from __future__ import annotations

import http.client
import importlib.util
import json
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType

import httpx
import pytest

from mimesis.serve.app import create_app
from mimesis.serve.backends import FunctionBackend, Sampling, TransformersBackend
from mimesis.serve.batching import BatchingSimulator
from mimesis.serve.config import ServeConfig
from mimesis.serve.local import serve_in_thread
from mimesis.simulator.prompts import render_system_prompt

SOAK_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "serve_soak.py"
# The server's default budget: a longer real history is fitted to it, not refused.
PROMPT_BUDGET = 768


@pytest.fixture(scope="module")
def soak() -> Iterator[ModuleType]:
    spec = importlib.util.spec_from_file_location("bench_serve_soak", SOAK_PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def _serve(backend, bodies: list[dict], max_batch: int, window_ms: float, max_turns: int = 8
           ) -> tuple[list[str], dict]:
    """The replies to ``bodies`` (sent at once) and the batching stats of a server on ``backend``."""
    sim = BatchingSimulator(backend, max_turns=max_turns, window_ms=window_ms, max_batch=max_batch)
    with serve_in_thread(create_app(sim, ServeConfig(max_batch=max_batch))) as base:
        responses = _post_all(base, bodies)
        stats = httpx.get(f"{base}/stats").json()["batching"]
    assert [r.status_code for r in responses] == [200] * len(bodies)
    return [r.json()["choices"][0]["message"]["content"] for r in responses], stats


@pytest.fixture(scope="module")
def tiny():
    from mimesis.models.base import load_base

    return load_base("tiny-llama")


class ThreadRecordingBackend(TransformersBackend):
    """The transformers backend, recording which threads call it (its tokenizer included)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.threads: set[int] = set()

    def generate(self, batch, sampling: Sampling, stop=None) -> list[str]:
        self.threads.add(threading.get_ident())
        return super().generate(batch, sampling, stop)

    def count_tokens(self, text: str) -> int:
        self.threads.add(threading.get_ident())
        return super().count_tokens(text)

    def prompt_tokens(self, messages) -> int:
        self.threads.add(threading.get_ident())
        return super().prompt_tokens(messages)


def _post_all(base: str, bodies: list[dict], threads: int = 8) -> list[httpx.Response]:
    with httpx.Client(base_url=base, timeout=600) as http, ThreadPoolExecutor(threads) as pool:
        return list(pool.map(lambda b: http.post("/v1/chat/completions", json=b), bodies))


@pytest.mark.slow
def test_a_batch_of_real_conversations_of_different_lengths_is_answered_200(
        soak, smoke_test_split, tiny) -> None:
    model, tokenizer = tiny
    backend = ThreadRecordingBackend(model, tokenizer, batch_size=8,
                                     max_prompt_tokens=PROMPT_BUDGET)
    bodies = soak.replay_bodies(smoke_test_split, 48, max_tokens=2, temperature=0.0)
    assert len({backend.prompt_tokens(b["messages"]) for b in bodies}) >= 8  # different lengths
    backend.threads.clear()
    sim = BatchingSimulator(backend, max_turns=64, window_ms=10, max_batch=8)
    with serve_in_thread(create_app(sim, ServeConfig(max_batch=8))) as base:
        # 8 clients, each sending its next request when answered (as in the issue): requests
        # keep arriving while the worker encodes a batch.
        responses = _post_all(base, bodies, threads=8)
        stats = httpx.get(f"{base}/stats").json()["batching"]
    statuses = [r.status_code for r in responses]
    assert statuses == [200] * len(bodies), [r.text for r in responses if r.status_code != 200]
    # The cause of the 500s: the fast tokenizer's padding state is shared, so token counts on
    # the event loop thread unpadded the worker's batch. Only the worker may call the backend.
    assert len(backend.threads) == 1
    assert stats["largest_batch"] > 1 and stats["retried_batches"] == 0


@pytest.mark.slow  # curates the smoke split first (~17 s)
def test_batched_serving_writes_what_one_at_a_time_serving_writes(soak, smoke_test_split,
                                                                   tiny) -> None:
    model, tokenizer = tiny
    bodies = [dict(b, seed=11) for b in soak.replay_bodies(smoke_test_split, 8, max_tokens=24,
                                                           temperature=0.0)]
    # prefill "": random weights never close a <think>, every prefilled turn would be private
    backend = TransformersBackend(model, tokenizer, batch_size=8, max_prompt_tokens=PROMPT_BUDGET,
                                  prefill="")
    assert len({backend.prompt_tokens(b["messages"]) for b in bodies}) >= 4

    batched, stats = _serve(backend, bodies, max_batch=8, window_ms=2000, max_turns=64)
    assert stats["largest_batch"] == 8  # one left-padded generate call for all eight
    single, stats = _serve(backend, bodies, max_batch=1, window_ms=0, max_turns=64)
    assert stats["largest_batch"] == 1
    assert len(set(single)) > 1  # the prompts lead to different texts
    assert batched == single


def test_a_seeded_request_gets_the_same_reply_alone_or_batched_with_others(tiny) -> None:
    model, tokenizer = tiny
    backend = TransformersBackend(model, tokenizer, batch_size=8, prefill="")

    def body(agent: str) -> dict:  # an evaluation harness sends one seed with every request
        return {"messages": [{"role": "user", "content": "hi, I need a hotel"},
                             {"role": "assistant", "content": agent}],
                "scenario": {"goal": "book a hotel in Lisbon"}, "seed": 7,
                "temperature": 1.0, "max_tokens": 16}

    target = body("Sure! Which dates do you have in mind?")
    others = [body(text) for text in ("Hello, how can I help you today?", "Lisbon is lovely.",
                                      "I found three hotels near the river for you.")]

    (alone,), _ = _serve(backend, [target], max_batch=1, window_ms=0)
    batched, stats = _serve(backend, [others[0], target, *others[1:]], max_batch=4,
                            window_ms=2000)
    assert stats["largest_batch"] == 4  # the four shared one batch
    assert batched[1] == alone
    assert len(set(batched)) > 1  # the views lead to different texts


class PoisonedUser:
    """``generate_fn`` that raises on any view whose last message holds ``POISON``."""

    def __call__(self, batch: list[list[dict[str, str]]]) -> list[str]:
        if any("POISON" in view[-1]["content"] for view in batch):
            raise ValueError("the engine choked on a poisoned prompt")
        return [f"<think>n{len(view)}</think>\nso what about turn {len(view)}?" for view in batch]


class PoisonedBackend(FunctionBackend):
    """Its prompt rendering (the budget check's token count) rejects ``UNRENDERABLE``."""

    def prompt_tokens(self, messages) -> int:
        if any("UNRENDERABLE" in m["content"] for m in messages):
            raise TypeError("the chat template rejects this message")
        return super().prompt_tokens(messages)


def test_a_request_that_breaks_generation_fails_alone_and_its_batch_is_answered() -> None:
    sim = BatchingSimulator(PoisonedBackend(PoisonedUser()), max_turns=8, window_ms=1000,
                            max_batch=8)
    agent = ["Hello, how can I help?", "Which city?", "POISON pill", "Any budget?",
             "UNRENDERABLE", "Shall I book it?"]
    bodies = [{"messages": [{"role": "user", "content": "hi, I need a hotel"},
                            {"role": "assistant", "content": text}],
               "scenario": {"goal": "book a hotel in Oslo"}} for text in agent]
    with serve_in_thread(create_app(sim, ServeConfig())) as base:
        responses = _post_all(base, bodies)
        stats = httpx.get(f"{base}/stats").json()["batching"]
    assert stats["batches"] == 1 and stats["largest_batch"] == 6  # they did share a batch
    assert [r.status_code for r in responses] == [200, 200, 500, 200, 500, 200]
    assert all(r.json()["choices"][0]["message"]["content"] == "so what about turn 3?"
               for k, r in enumerate(responses) if k not in (2, 4))
    errors = [responses[k].json()["error"] for k in (2, 4)]
    assert all(e["type"] == "server_error" and e["code"] == "generation_failed" for e in errors)
    assert "ValueError: the engine choked on a poisoned prompt" in errors[0]["message"]
    assert "TypeError: the chat template rejects this message" in errors[1]["message"]
    assert (stats["retried_batches"], stats["failed_requests"]) == (1, 2)


def test_an_unexpected_error_gets_a_500_and_the_connection_stays_open() -> None:
    def system_prompt(scenario) -> str:
        if "crash" in scenario.goal:
            raise KeyError("no prompt for this scenario")
        return render_system_prompt(scenario)

    sim = BatchingSimulator(FunctionBackend(PoisonedUser()), system_prompt_fn=system_prompt)
    with serve_in_thread(create_app(sim, ServeConfig())) as base:
        conn = http.client.HTTPConnection(base.removeprefix("http://"), timeout=30)
        answers = []
        for goal in ("crash the server", "book a hotel in Oslo"):
            conn.request("POST", "/v1/chat/completions", json.dumps(
                {"messages": [], "scenario": {"goal": goal}}), {"Content-Type": "application/json"})
            response = conn.getresponse()  # the second one: on the same keep-alive connection
            answers.append((response.status, json.loads(response.read())))
        conn.close()
    assert answers[0] == (500, {"error": {"message": "internal error: KeyError",
                                          "type": "server_error", "param": None,
                                          "code": "internal_error"}})
    assert answers[1][0] == 200 and answers[1][1]["choices"][0]["message"]["content"]


@pytest.mark.slow
def test_soak_200_concurrent_real_conversations_all_answered_200(soak, smoke_test_split,
                                                                 tmp_path) -> None:
    # the server's default prompt budget: long real histories are fitted, not refused
    figures = soak.main(["--conversations", str(smoke_test_split), "--requests", "200",
                         "--max-tokens", "8", "--deadline-s", "1800",
                         "--out", str(tmp_path / "soak.json")])
    assert figures["statuses"] == {200: 200}, figures["error_messages"]
    assert figures["failed_requests"] == 0 and figures["retried_batches"] == 0
    assert figures["mean_batch"] > 1 and 0 < figures["p50_s"] <= figures["p99_s"]
