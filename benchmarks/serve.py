"""Throughput of ``mimesis serve`` at 1, 4 and 16 concurrent episodes vs a single-request baseline.

One run: the baseline calls the simulator directly, one request at a time (no HTTP, no
batching); then the server (transformers backend, batching window) runs on loopback in a child
process with its own copy of the model, and C episodes talk to it at once through the official ``openai`` async client,
each making max(turns, requests / C) calls (a new episode starts when one ends, after at most
``--turns`` user turns), so every level makes at least ``--requests`` requests. Tokens are the simulator's raw completion tokens (reasoning included).

    python benchmarks/serve.py                          # tiny random Llama (seconds)
    python benchmarks/serve.py --model smollm2-135m     # the CPU default base (minutes)
    python benchmarks/serve.py --simulator data/freeze_user/simulator
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import socket
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

# Before torch loads: OpenMP threads that spin-wait made generation 10-50x slower on a shared,
# oversubscribed 2-core machine (measured: 0.15 s -> 2-12 s per tiny-model call).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
AGENT_REPLY = "Sure, I can help with that. Could you tell me a bit more about what you need?"
GOAL = "You want to plan a three-day trip to Lisbon on a small budget."


@dataclass
class Level:
    """Measurements of one concurrency level."""

    name: str
    requests: int
    seconds: float
    tokens: int
    latencies: list[float]
    batch: float

    def row(self, base_rps: float) -> str:
        rps, tps = self.requests / self.seconds, self.tokens / self.seconds
        p50 = statistics.median(self.latencies) if self.latencies else 0.0
        return (f"| {self.name} | {self.requests} | {rps:.2f} | {tps:.1f} | {p50:.2f} | "
                f"{self.batch:.1f} | {rps / base_rps:.2f}x |")


def load(args: argparse.Namespace):
    from mimesis.serve.backends import TransformersBackend, load_backend

    if args.simulator:
        return load_backend("transformers", args.simulator, batch_size=16)
    from mimesis.models.base import load_base

    model, tokenizer = load_base(args.model)
    return TransformersBackend(model, tokenizer, name=args.model, batch_size=16)


def baseline(backend, args: argparse.Namespace, n_requests: int) -> Level:
    """Sequential, unbatched: the simulator called directly for each request."""
    from functools import partial

    from mimesis.schemas import Scenario
    from mimesis.serve.backends import Sampling
    from mimesis.simulator.runtime import UserSimulator

    sampling = Sampling(args.max_tokens, args.temperature, 0.95)
    sim = UserSimulator(partial(backend.generate, sampling=sampling), max_turns=args.turns)
    latencies, tokens, state = [], 0, None
    start = time.perf_counter()
    for _ in range(n_requests):
        t0 = time.perf_counter()
        if state is None or state.ended:
            state = sim.init_state(Scenario(goal=GOAL, annotator="bench"))
            before = 0
            _, state = sim.next_message(None, state)
        else:
            before = len(state.raw)
            _, state = sim.next_message(AGENT_REPLY, state)
        tokens += sum(backend.count_tokens(r) for r in state.raw[before:])
        latencies.append(time.perf_counter() - t0)
    return Level("baseline (direct, 1 at a time)", n_requests, time.perf_counter() - start,
                 tokens, latencies, 1.0)


async def episode_worker(base: str, worker: str, turns: int, args, out: dict) -> None:
    """``turns`` calls; a fresh episode whenever the previous one ended (``--turns`` user turns
    at most, the server's turn budget)."""
    import openai

    client, messages, k = None, [], 0
    for _ in range(turns):
        if client is None:
            k += 1
            client = openai.AsyncOpenAI(base_url=f"{base}/ep/{worker}-e{k}/v1", api_key="bench",
                                        max_retries=0, timeout=600)
            messages = []
        t0 = time.perf_counter()
        r = await client.chat.completions.create(
            model="sim", messages=messages, max_tokens=args.max_tokens,
            temperature=args.temperature, extra_body={"scenario": {"goal": GOAL}})
        out["latencies"].append(time.perf_counter() - t0)
        out["tokens"] += r.usage.completion_tokens
        choice = r.choices[0]
        if choice.finish_reason == "end_conversation":
            await client.close()
            client = None
        else:
            messages += [{"role": "user", "content": choice.message.content},
                         {"role": "assistant", "content": AGENT_REPLY}]
    if client is not None:
        await client.close()


async def level(base: str, concurrency: int, args) -> Level:
    import httpx

    async with httpx.AsyncClient() as http:
        before = (await http.get(f"{base}/stats")).json()["batching"]
    out: dict = {"latencies": [], "tokens": 0}
    calls = max(args.turns, -(-args.requests // concurrency))
    start = time.perf_counter()
    await asyncio.gather(*(episode_worker(base, f"c{concurrency}-w{w}", calls, args, out)
                           for w in range(concurrency)))
    seconds = time.perf_counter() - start
    async with httpx.AsyncClient() as http:
        after = (await http.get(f"{base}/stats")).json()["batching"]
    batches = max(after["batches"] - before["batches"], 1)
    mean_batch = (after["requests"] - before["requests"]) / batches
    return Level(f"server, {concurrency} concurrent", len(out["latencies"]), seconds,
                 out["tokens"], out["latencies"], mean_batch)


def run_server_process(args: argparse.Namespace, port: int) -> None:
    """Child process: load the model, serve on loopback until terminated."""
    from mimesis.serve.app import run_server
    from mimesis.serve.batching import BatchingSimulator
    from mimesis.serve.config import ServeConfig

    sim = BatchingSimulator(load(args), max_turns=args.turns, window_ms=args.window_ms,
                            max_batch=16)
    run_server(sim, ServeConfig(default_max_tokens=args.max_tokens,
                                max_tokens_limit=max(512, args.max_tokens)),
               port=port, log_level="warning")


def start_server(args: argparse.Namespace) -> tuple[multiprocessing.Process, str]:
    """The server in its own process (the client must not share its GIL), once healthy."""
    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = multiprocessing.get_context("spawn").Process(target=run_server_process,
                                                        args=(args, port), daemon=True)
    proc.start()
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.is_alive():
        try:
            if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                return proc, base
        except httpx.TransportError:
            time.sleep(0.3)
    proc.terminate()
    raise RuntimeError("benchmark server did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="tiny-llama", help="tiny-llama | smollm2-135m | path")
    parser.add_argument("--simulator", default=None, help="frozen simulator folder instead")
    parser.add_argument("--turns", type=int, default=3, help="user turns per episode (at least "
                        "this many calls per concurrent worker)")
    parser.add_argument("--requests", type=int, default=12,
                        help="at least this many requests per level (and in the baseline)")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--window-ms", type=float, default=10.0)
    parser.add_argument("--levels", default="1,4,16")
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")]

    import httpx

    from mimesis.serve.backends import Sampling

    backend = load(args)
    backend.generate([[{"role": "user", "content": "warm-up"}]], Sampling(4, 0.0, 1.0))
    # The server generates in a worker thread; so does the baseline. On a loaded 2-core machine,
    # torch's OpenMP team in the main thread spin-waits and made the same call 10-50x slower.
    with ThreadPoolExecutor(max_workers=1) as pool:
        rows = [pool.submit(baseline, backend, args, args.requests).result()]
    server, base = start_server(args)
    try:
        httpx.post(f"{base}/v1/chat/completions", timeout=600, json={  # warm-up, stateless
            "messages": [], "max_tokens": 4, "scenario": {"goal": GOAL}}).raise_for_status()
        rows += [asyncio.run(level(base, c, args)) for c in levels]
    finally:
        server.terminate()
        server.join(timeout=30)
    print(f"\nmimesis serve throughput — model {args.simulator or args.model}, "
          f"max_tokens {args.max_tokens}, {args.turns} calls per episode, "
          f"batch window {args.window_ms:.0f} ms\n")
    print("| run | requests | requests/s | tokens/s | p50 latency s | mean batch | vs baseline |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        print(row.row(rows[0].requests / rows[0].seconds))


if __name__ == "__main__":
    main()
