"""Time per request of ``mimesis serve`` against the length of the history it carries.

Stateless requests of 100 … 20,000 short messages (the request limits lifted so that they are
read, not refused) go over loopback to the app with a real tokenizer's prompt counting (the tiny
random Llama's, chat template and all) and a 768-token prompt budget, so every request is fitted:
its oldest exchanges dropped until the view fits. Generation is scripted (no model): what is
timed is reading, fitting and answering. Each size is timed ``--repeats`` times (the minimum is
kept); the ratios are against the smallest size, measured in the same process.

    python benchmarks/serve_long_history.py
    python benchmarks/serve_long_history.py --sizes 100,1000 --repeats 2

Prints one Markdown row per size (messages, ms per request, µs per message, ratio to the first
size) and, with ``--out``, writes the figures as JSON. Linear time: µs per message stays flat;
re-counting the whole history once per dropped exchange made it grow with the size.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import httpx

BUDGET = 768
REPLY = "<think>still about the trip</think>\nAnd the price with a bag?"


def history(n: int) -> list[dict]:
    """``n`` short messages, alternating, ending with an agent (assistant) message."""
    return [{"role": "user" if (n - k) % 2 == 0 else "assistant",
             "content": f"message number {k} of this long chat"} for k in range(n)]


def make_app(max_messages: int):
    """The served app: tiny Llama tokenizer counts, scripted replies, limits lifted."""
    from mimesis.models.base import load_base
    from mimesis.serve.app import create_app
    from mimesis.serve.backends import FunctionBackend, _TokenizerCounts
    from mimesis.serve.batching import BatchingSimulator
    from mimesis.serve.config import ServeConfig

    _, tokenizer = load_base("tiny-llama")

    class ScriptedTokenizerBackend(_TokenizerCounts, FunctionBackend):
        pass

    backend = ScriptedTokenizerBackend(lambda batch: [REPLY] * len(batch),
                                       max_prompt_tokens=BUDGET)
    backend.tokenizer = tokenizer
    config = ServeConfig(max_messages=max_messages, max_total_chars=10**8,
                         max_body_bytes=10**8, deadline_s=600)
    return create_app(BatchingSimulator(backend, max_turns=10**6, window_ms=0), config)


def measure(sizes: list[int], repeats: int) -> list[dict]:
    """Seconds per request (minimum of ``repeats``) for each history size."""
    from mimesis.serve.local import serve_in_thread

    rows = []
    with serve_in_thread(make_app(max(sizes))) as base, httpx.Client(base_url=base,
                                                                     timeout=600) as http:
        http.post("/v1/chat/completions", json={"messages": history(10),
                                                "scenario": {"goal": "warm up"}})
        for n in sizes:
            body = {"messages": history(n), "max_tokens": 4,
                    "scenario": {"goal": "Book a cheap flight to Lisbon in May"}}
            times = []
            for _ in range(repeats):
                started = time.perf_counter()
                r = http.post("/v1/chat/completions", json=body)
                times.append(time.perf_counter() - started)
                assert r.status_code == 200, r.text
            rows.append({"messages": n, "seconds": min(times)})
    for row in rows:
        row["us_per_message"] = round(row["seconds"] / row["messages"] * 1e6, 1)
        row["ratio"] = round(row["seconds"] / rows[0]["seconds"], 2)
        row["seconds"] = round(row["seconds"], 4)
    return rows


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="100,1000,5000,20000")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    rows = measure([int(s) for s in args.sizes.split(",")], args.repeats)
    lines = ["| messages | ms per request | µs per message | vs first size |",
             "|---|---|---|---|"]
    lines += [f"| {r['messages']} | {r['seconds'] * 1000:.0f} | {r['us_per_message']} | "
              f"{r['ratio']}x |" for r in rows]
    figures = {"rows": rows, "budget_tokens": BUDGET, "markdown": "\n".join(lines)}
    print(figures["markdown"])
    if args.out:
        args.out.write_text(json.dumps(figures, indent=1))
    return figures


if __name__ == "__main__":
    main()
