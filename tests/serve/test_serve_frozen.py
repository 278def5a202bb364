"""``mimesis serve`` as a process, on a frozen simulator folder (tiny random Llama), with the
``openai`` client: the same CLI, hash check, backend and batching a user runs.

The tiny model writes random text, so the checks are invariants: what the agent receives is the
parsed utterance of a raw generation recorded at the private endpoint, never its reasoning.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from mimesis.io import write_json
from mimesis.serve.schemas import END_FINISH_REASON
from mimesis.simulator.parsing import parse_turn

BIN = Path(sys.executable).parent
pytestmark = pytest.mark.slow


def build_frozen_tiny(sim_dir: Path) -> Path:
    """A frozen-simulator folder the way ``freeze_user`` writes one: plain HF files plus
    ``meta.json`` with the sha256 of each (tiny random Llama; no training)."""
    from mimesis.models.base import load_base
    from mimesis.simulator.frozen import hash_files

    model, tokenizer = load_base("tiny-llama")
    model.save_pretrained(sim_dir)
    tokenizer.save_pretrained(sim_dir)
    # random weights never close a <think> block: prefilled, every turn would be private, so
    # the folder declares no private channel (freeze_user records "<think>")
    write_json(sim_dir / "meta.json", {"stage": "test-fixture", "base_model": "tiny-llama",
                                       "finetune": "none", "turn_prefill": "",
                                       "files": hash_files(sim_dir)})
    return sim_dir


@pytest.fixture(scope="module")
def frozen_dir(tmp_path_factory) -> Path:
    return build_frozen_tiny(tmp_path_factory.mktemp("frozen") / "simulator")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def served_with_banner(frozen_dir) -> Iterator[tuple[str, list[str]]]:
    """The base URL of a running ``mimesis serve`` and the lines it printed on starting."""
    port = _free_port()
    cmd = [str(BIN / "mimesis"), "serve", "--simulator", str(frozen_dir), "--port", str(port),
           "--max-turns", "3", "--max-tokens", "24", "--temperature", "1.0",
           "--goal", "find a cheap hotel in Lisbon", "--batch-window-ms", "20"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={k: v for k, v in os.environ.items() if k != "MIMESIS_API_KEY"})
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    banner: list[str] = []
    try:
        while len(banner) < 20 and not any("/ep/<episode_id>/v1" in b for b in banner):
            line = proc.stdout.readline()  # printed once the weights are loaded
            if not line:
                break
            banner.append(line.rstrip("\n"))
        while True:
            assert proc.poll() is None, proc.stdout.read()
            assert time.monotonic() < deadline, "mimesis serve did not come up"
            try:
                if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.5)
        yield base, banner
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def served(served_with_banner) -> str:
    return served_with_banner[0]


def test_serve_prints_its_addresses_as_whole_lines(served_with_banner, frozen_dir) -> None:
    base, banner = served_with_banner
    assert f"serving {frozen_dir} (transformers) on {base}" in banner, banner
    assert f"episode API: {base}/ep/<episode_id>/v1" in banner, banner
    assert not any(line.rstrip().endswith(("—", "-")) for line in banner), banner


def test_served_frozen_simulator_sends_only_parsed_utterances(served) -> None:
    client = openai.OpenAI(base_url=f"{served}/ep/lisbon/v1", api_key="x", max_retries=0)
    messages: list[dict] = []
    responses = []
    for agent_reply in ["Hello! Where would you like to stay?", "I found three hotels.",
                        "Shall I book the first?", "Done."]:
        r = client.chat.completions.create(model="sim", messages=messages, seed=7)
        responses.append(r)
        if r.choices[0].finish_reason == END_FINISH_REASON:
            break
        messages += [{"role": "user", "content": r.choices[0].message.content},
                     {"role": "assistant", "content": agent_reply}]
    assert responses[-1].choices[0].finish_reason == END_FINISH_REASON  # max_turns=3 at most
    private = httpx.get(f"{served}/ep/lisbon/private").json()
    sent = [r.choices[0].message.content for r in responses[:-1]]
    assert [t["utterance"] for t in private["turns"]] == sent
    parsed = [parse_turn(raw) for raw in private["raw"]]
    for turn in private["turns"]:
        assert "<think>" not in turn["utterance"] and "</think>" not in turn["utterance"]
        assert any(p.utterance == turn["utterance"] and p.reasoning == turn["reasoning"]
                   for p in parsed)
    assert responses[0].usage.completion_tokens > 0


def test_served_frozen_simulator_batches_concurrent_stateless_calls(served) -> None:
    from concurrent.futures import ThreadPoolExecutor

    client = openai.OpenAI(base_url=f"{served}/v1", api_key="x", max_retries=0)

    def call(k: int):
        return client.chat.completions.create(model="sim", messages=[
            {"role": "assistant", "content": f"Hi, I am agent {k}. How can I help?"}])

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(call, range(4)))
    assert all(r.choices[0].finish_reason in ("stop", END_FINISH_REASON) for r in results)
    assert httpx.get(f"{served}/stats").json()["batching"]["largest_batch"] >= 2


def test_serve_refuses_a_tampered_simulator(frozen_dir, tmp_path) -> None:
    copy = tmp_path / "simulator"
    shutil.copytree(frozen_dir, copy)
    with open(copy / "config.json", "a") as f:
        f.write("\n")
    proc = subprocess.run([str(BIN / "mimesis"), "serve", "--simulator", str(copy)],
                          capture_output=True, text=True, timeout=120, check=False)
    out = proc.stdout.replace("\n", "")  # rich wraps long lines
    assert proc.returncode == 2, out
    assert "frozen simulator file changed" in out and "config.json" in out
