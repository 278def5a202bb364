"""A request's work stops at its deadline or when its client leaves, and the core is free again:
the batcher drops abandoned requests and stops a running generation between decode steps."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time

import httpx
import pytest
from test_serve_api import ScriptedUser
from test_serve_limits import serve

from mimesis.models.base import load_base
from mimesis.models.generation import ChatGenerator, GenerationConfig
from mimesis.schemas import Scenario
from mimesis.serve.backends import (
    FunctionBackend,
    GenerationCancelled,
    Sampling,
    TransformersBackend,
)
from mimesis.serve.batching import BatchingSimulator
from mimesis.serve.config import ServeConfig

SLOW_S = 30.0  # a generation that would hold the core this long unless stopped
STEP_S = 0.02  # one "decode step" of the stub


class SleepyBackend(FunctionBackend):
    """A stub engine: a batch whose goal says ``slow`` decodes for ``SLOW_S`` seconds in
    ``STEP_S`` steps, asking ``stop`` between steps as the transformers backend does."""

    def __init__(self) -> None:
        super().__init__(ScriptedUser(end_at=99))
        self.stopped_at: list[float] = []
        self.finished_slow = 0
        self.goals: list[str] = []

    def generate(self, batch, sampling, stop=None) -> list[str]:
        self.goals += [view[0]["content"] for view in batch]
        if any("slow" in view[0]["content"] for view in batch):
            until = time.monotonic() + SLOW_S
            while time.monotonic() < until:
                if stop is not None and stop():
                    self.stopped_at.append(time.monotonic())
                    raise GenerationCancelled("stopped")
                time.sleep(STEP_S)
            self.finished_slow += 1
        return super().generate(batch, sampling, stop)


def body(goal: str) -> dict:
    return {"messages": [], "scenario": {"goal": goal}, "max_tokens": 8}


def test_a_request_past_its_deadline_is_cancelled_and_the_core_is_free_within_2_s() -> None:
    backend, deadline_s = SleepyBackend(), 1.0
    with serve(backend, ServeConfig(deadline_s=deadline_s)) as base, \
            httpx.Client(base_url=base, timeout=60) as http:
        started = time.monotonic()
        slow = http.post("/v1/chat/completions", json=body("a slow trip to Oslo"))
        refused_after = time.monotonic() - started
        fast = http.post("/v1/chat/completions", json=body("a quick trip to Rome"))
        free_after = time.monotonic() - started
    err = slow.json()["error"]
    assert slow.status_code == 504 and err["code"] == "deadline_exceeded"
    assert "deadline of 1 s" in err["message"] and "--deadline-s" in err["message"]
    assert deadline_s <= refused_after < deadline_s + 2
    assert fast.status_code == 200 and free_after < deadline_s + 2  # the worker is free again
    assert backend.stopped_at and backend.stopped_at[0] - started < deadline_s + 2
    assert backend.finished_slow == 0


def test_a_client_that_disconnects_cancels_its_generation() -> None:
    backend = SleepyBackend()
    with serve(backend, ServeConfig(deadline_s=60)) as base:
        host, port = base.removeprefix("http://").split(":")
        payload = json.dumps(body("a slow trip to Oslo")).encode()
        sock = socket.create_connection((host, int(port)))
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                     b"application/json\r\nContent-Length: " + str(len(payload)).encode()
                     + b"\r\n\r\n" + payload)
        time.sleep(0.5)  # the slow generation is running
        left = time.monotonic()
        sock.close()
        deadline = left + 2
        while not backend.stopped_at and time.monotonic() < deadline:
            time.sleep(0.05)
        assert backend.stopped_at and backend.stopped_at[0] - left < 2
        fast = httpx.post(f"{base}/v1/chat/completions", json=body("a quick trip to Rome"),
                          timeout=10)
        assert fast.status_code == 200 and backend.finished_slow == 0


def read_response(sock: socket.socket) -> str:
    """One whole HTTP response: the head and body may arrive in separate TCP segments."""
    data = b""
    while True:
        head, sep, body = data.partition(b"\r\n\r\n")
        if sep:
            length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            if len(body) >= length:
                return data.decode()
        chunk = sock.recv(4096)
        if not chunk:
            return data.decode()
        data += chunk


def test_a_body_that_never_arrives_gets_408_at_the_deadline() -> None:
    with serve(SleepyBackend(), ServeConfig(deadline_s=0.5)) as base:
        host, port = base.removeprefix("http://").split(":")
        sock = socket.create_connection((host, int(port)), timeout=5)
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                     b"application/json\r\nContent-Length: 100\r\n\r\n{\"messages\"")
        started = time.monotonic()
        reply = read_response(sock)
        sock.close()
    assert reply.startswith("HTTP/1.1 408") and time.monotonic() - started < 2.5
    error = json.loads(reply.split("\r\n\r\n", 1)[1])["error"]
    assert (error["param"], error["code"]) == ("body", "request_timeout")
    assert "0.5 s" in error["message"]


def test_the_batcher_drops_a_queued_request_whose_caller_left() -> None:
    backend = SleepyBackend()
    sim = BatchingSimulator(backend, max_turns=4, window_ms=0, max_batch=1)
    sampling = Sampling(8, 0.0, 1.0)

    async def main() -> None:
        await sim.start()
        try:
            slow = asyncio.create_task(sim.next_message(
                None, sim.init_state(Scenario(goal="a slow one", annotator="t")), sampling))
            await asyncio.sleep(0.3)  # the slow one is generating, the next one queues
            queued = asyncio.create_task(sim.next_message(
                None, sim.init_state(Scenario(goal="the queued one", annotator="t")), sampling))
            await asyncio.sleep(0.1)
            queued.cancel()
            slow.cancel()
            for task in (slow, queued):
                with pytest.raises(asyncio.CancelledError):
                    await task
            fresh = await asyncio.wait_for(sim.next_message(
                None, sim.init_state(Scenario(goal="a fresh one", annotator="t")), sampling), 5)
            assert fresh.message
        finally:
            await sim.stop()

    asyncio.run(main())
    assert not any("queued" in goal for goal in backend.goals)
    assert backend.finished_slow == 0 and sim.stats.abandoned_requests == 2


def test_transformers_generation_stops_between_decode_steps() -> None:
    model, tokenizer = load_base("tiny-llama")
    asked = threading.Event()
    calls = [0]

    def stop() -> bool:
        calls[0] += 1
        asked.set()
        return calls[0] > 3

    chat = [[{"role": "user", "content": "hello"}]]
    generator = ChatGenerator(model, tokenizer, GenerationConfig(max_new_tokens=200,
                                                                 temperature=0.0))
    text = generator.generate(chat, stop=stop)
    assert asked.is_set() and len(tokenizer(text[0])["input_ids"]) <= 6
    calls[0] = 0
    backend = TransformersBackend(model, tokenizer, max_prompt_tokens=64)
    with pytest.raises(GenerationCancelled):
        backend.generate(chat, Sampling(200, 0.0, 1.0), stop=stop)
    assert calls[0] <= 6  # stopped at once, not after 200 steps
