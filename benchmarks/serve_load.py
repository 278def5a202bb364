"""Bounded load test of ``mimesis serve`` on loopback: normal, oversized and slow clients at once.

A server with a stub engine (no model: each batch "decodes" ``--step-ms`` per new token, asking
the batcher's ``stop`` between steps, as the transformers backend does) runs in a child process
with the default limits and ``--deadline-s``. The client sends ``--requests`` requests at once:

* normal (70 %): stateless next-turn requests of a six-message conversation, 16 new tokens;
* oversized (20 %): 20,000 messages; a body over ``max_body_bytes``; a 40,000-character
  message; ``max_tokens`` 100,000; ``n`` = 4; a 5,000-character goal (cycled);
* slow (10 %): half trickle their body a byte at a time and never finish it (the server answers
  408 at the deadline), half ask for 512 new tokens and hang up after 1 s (their generation is
  stopped).

Then each oversized kind is sent 10 more times, one at a time, to measure the server's CPU time
per refused request (``/proc/<pid>/stat``, Linux). Every normal request must be answered 200 and
no request may get a 5xx; the run ends by itself (``--timeout-s``) and stops the server.

    python benchmarks/serve_load.py                       # 300 requests, ~30 s
    python benchmarks/serve_load.py --requests 60 --deadline-s 4

Prints the figures (served, refused, p50/p99 of normal requests, peak RSS, CPU ms per refused
request by kind) and, with ``--out``, writes them as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import httpx
import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
CONVERSATION = [{"role": "system", "content": "You are a travel agent."},
                {"role": "assistant", "content": "Hello! Where would you like to go?"},
                {"role": "user", "content": "Somewhere warm in May, not too far."},
                {"role": "assistant", "content": "Lisbon or Seville? Both are sunny then."},
                {"role": "user", "content": "Lisbon sounds good. How much are flights?"},
                {"role": "assistant", "content": "From about 120 EUR return. Shall I book?"}]
GOAL = {"goal": "Book a cheap flight to Lisbon in May"}


def oversized_bodies() -> dict[str, bytes]:
    """One request body per way of exceeding a limit (kind -> JSON bytes)."""
    many = [{"role": "user" if k % 2 else "assistant", "content": "hi"} for k in range(20_000)]
    kinds = {
        "20000_messages": {"messages": many, "max_tokens": 4},
        "body_over_1MB": {"messages": [{"role": "assistant", "content": "x" * 1_100_000}]},
        "message_40k_chars": {"messages": [{"role": "assistant", "content": "x" * 40_000}]},
        "max_tokens_100k": {"messages": CONVERSATION, "max_tokens": 100_000},
        "n_4": {"messages": CONVERSATION, "n": 4},
        "goal_5k_chars": {"messages": CONVERSATION, "scenario": {"goal": "g" * 5000}},
    }
    return {k: json.dumps({"scenario": GOAL, **b}).encode() for k, b in kinds.items()}


def serve(args: argparse.Namespace) -> None:
    """Child process (``--serve PORT``): the stub engine behind the real app, until killed."""
    from mimesis.serve.app import run_server
    from mimesis.serve.backends import FunctionBackend, GenerationCancelled
    from mimesis.serve.batching import BatchingSimulator
    from mimesis.serve.config import ServeConfig

    class StubEngine(FunctionBackend):
        def generate(self, batch, sampling, stop=None):
            for _ in range(sampling.max_tokens):
                if stop is not None and stop():
                    raise GenerationCancelled("stopped")
                time.sleep(args.step_ms / 1000)
            return ["<think>the flight is what I need</think>\nHow much with a bag?"] * len(batch)

    engine = StubEngine(lambda batch: [])
    sim = BatchingSimulator(engine, max_turns=16, window_ms=10, max_batch=16)
    run_server(sim, ServeConfig(deadline_s=args.deadline_s), port=args.serve,
               log_level="warning")


def proc_figures(pid: int) -> tuple[float, int]:
    """``(cpu_seconds, peak_rss_bytes)`` of process ``pid`` (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    status = Path(f"/proc/{pid}/status").read_text()
    peak_kb = next(int(line.split()[1]) for line in status.splitlines()
                   if line.startswith("VmHWM:"))
    return cpu, peak_kb * 1024


async def post(http: httpx.AsyncClient, content: bytes) -> tuple[int, float, dict]:
    started = time.perf_counter()
    r = await http.post("/v1/chat/completions", content=content,
                        headers={"content-type": "application/json"})
    return r.status_code, time.perf_counter() - started, r.json()


async def raw_slow(port: int, content: bytes, trickle: bool, hang_up_s: float) -> str:
    """A slow client on a raw socket: trickles its body (never finishing), or sends it whole
    and hangs up after ``hang_up_s``. Returns the status line it got, or ``hung up``."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
            f"\r\nContent-Length: {len(content)}\r\n\r\n").encode()
    try:
        if trickle:
            writer.write(head)
            for byte in content:
                writer.write(bytes([byte]))
                await writer.drain()
                try:
                    return (await asyncio.wait_for(reader.readline(), 0.5)).decode().strip()
                except TimeoutError:
                    continue
            return "finished body"
        writer.write(head + content)
        await writer.drain()
        await asyncio.sleep(hang_up_s)
        return "hung up"
    finally:
        writer.close()


async def load(port: int, n: int) -> dict:
    """The mixed burst: returns statuses and latencies per client kind."""
    kinds = oversized_bodies()
    normal = json.dumps({"messages": CONVERSATION, "scenario": GOAL, "max_tokens": 16}).encode()
    slow_body = json.dumps({"messages": CONVERSATION, "scenario": GOAL,
                            "max_tokens": 512}).encode()
    n_over, n_slow = n // 5, n // 10
    n_normal = n - n_over - n_slow
    limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=120,
                                 limits=limits) as http:
        names = list(kinds)
        jobs = ([post(http, normal) for _ in range(n_normal)]
                + [post(http, kinds[names[i % len(names)]]) for i in range(n_over)]
                + [raw_slow(port, slow_body, trickle=i % 2 == 0, hang_up_s=1.0)
                   for i in range(n_slow)])
        results = await asyncio.gather(*jobs)
    return {"normal": results[:n_normal], "oversized": results[n_normal:n_normal + n_over],
            "slow": results[n_normal + n_over:]}


def cpu_per_refusal(port: int, pid: int, repeats: int = 10) -> dict[str, float]:
    """Server CPU milliseconds per refused request, by kind (one request at a time)."""
    out = {}
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
        for kind, content in oversized_bodies().items():
            before, _ = proc_figures(pid)
            for _ in range(repeats):
                r = http.post("/v1/chat/completions", content=content,
                              headers={"content-type": "application/json"})
                assert 400 <= r.status_code < 500, (kind, r.status_code)
            out[kind] = round((proc_figures(pid)[0] - before) * 1000 / repeats, 1)
    return out


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--deadline-s", type=float, default=10.0)
    parser.add_argument("--step-ms", type=float, default=5.0)
    parser.add_argument("--timeout-s", type=float, default=180.0)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args)
        return {}
    port = free_port()
    child = subprocess.Popen([sys.executable, __file__, "--serve", str(port), "--deadline-s",
                              str(args.deadline_s), "--step-ms", str(args.step_ms)],
                             cwd=REPO_ROOT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline and child.poll() is None, "server did not start"
            time.sleep(0.2)
        _, rss_idle = proc_figures(child.pid)
        started = time.perf_counter()
        results = asyncio.run(asyncio.wait_for(load(port, args.requests), args.timeout_s))
        wall = time.perf_counter() - started
        _, rss_peak = proc_figures(child.pid)
        batching = httpx.get(f"http://127.0.0.1:{port}/stats", timeout=10).json()["batching"]
        per_refusal = cpu_per_refusal(port, child.pid)
    finally:
        child.kill()
        child.wait()
    return report(results, wall, (rss_idle, rss_peak), per_refusal, batching, args)


def report(results: dict, wall: float, rss: tuple[int, int], per_refusal: dict[str, float],
           batching: dict, args: argparse.Namespace) -> dict:
    """The figures as a dict (printed; written to ``--out``)."""
    normal = results["normal"]
    latencies = [t for status, t, _ in normal if status == 200]
    statuses = Counter(s for s, _, _ in normal + results["oversized"])
    statuses.update(s.split(" ")[1] if s.startswith("HTTP/") else s for s in results["slow"])
    figures = {
        "requests": args.requests, "normal": len(normal), "served": len(latencies),
        "refused": sum(1 for s, _, _ in results["oversized"] if 400 <= s < 500),
        "slow": len(results["slow"]), "statuses": {str(k): v for k, v in statuses.items()},
        "server_errors": sum(1 for s, _, _ in normal + results["oversized"] if s >= 500),
        "p50_s": round(float(np.percentile(latencies, 50)), 3) if latencies else None,
        "p99_s": round(float(np.percentile(latencies, 99)), 3) if latencies else None,
        "wall_s": round(wall, 1), "rss_idle_mb": round(rss[0] / 2**20, 1),
        "rss_peak_mb": round(rss[1] / 2**20, 1), "cpu_ms_per_refusal": per_refusal,
        "abandoned_requests": batching["abandoned_requests"], "batches": batching["batches"],
        "deadline_s": args.deadline_s,
    }
    print(json.dumps(figures, indent=1))
    if args.out:
        args.out.write_text(json.dumps(figures, indent=1))
    return figures


if __name__ == "__main__":
    main()
