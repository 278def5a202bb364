"""``mimesis evaluate-simulator`` and its API: any simulator scored on a JSONL of conversations,
here an OpenAI-compatible loopback stub (tests/conftest.py) and the tiny test model."""

from __future__ import annotations

import json
import random
import socket

import pytest
from typer.testing import CliRunner

from mimesis.cli import app
from mimesis.eval.realism.evaluate_simulator import evaluate_simulator, load_conversations
from mimesis.eval.realism.run import RealismParams
from mimesis.io import read_jsonl
from mimesis.users.spec import UserSpec
from tests.conftest import REPO_ROOT

WORDS = ["hey", "need", "help", "fix", "my", "code", "why", "not", "working", "thanks", "ok",
         "so", "what", "about", "the", "list"]


def _write_plain(path, n=8):
    """Conversations in the README's plain format (``content`` keys on some, as OpenAI's)."""
    rng = random.Random(0)
    lines = []
    for i in range(n):
        turns = []
        for k in range(3):
            user = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 9)))
            key = "content" if i % 2 else "text"
            turns += [{"role": "user", key: user},
                      {"role": "assistant", key: f"Here is step {k}. " * 3}]
        lines.append(json.dumps({"id": f"u{i}", "goal": f"fix list bug number {i}",
                                 "turns": turns, "ended": i % 3 != 0}))
    path.write_text("\n".join(lines) + "\n")
    return path


def _casual_reply(body: dict) -> str:
    last = body["messages"][-1]["content"].split()
    # "list" is a goal word: the opening stays on topic (no off-topic redraw to count)
    return "ok so my list " + " ".join(last[:3]).lower() + " why not working"


def _invoke(args, env):
    return CliRunner().invoke(app, ["evaluate-simulator", *args,
                                    "--params", str(REPO_ROOT / "params.yaml"),
                                    "--profile", "smoke"], env={"COLUMNS": "200", **env})


def test_plain_conversations_load_and_bad_lines_are_named(tmp_path):
    convs = load_conversations(_write_plain(tmp_path / "c.jsonl", 3))
    assert [c.id for c in convs] == ["u0", "u1", "u2"] and convs[1].turns[0].text
    assert convs[0].ended is False and len(convs[0].labels) == 3
    (tmp_path / "bad.jsonl").write_text('{"turns": []}\n')
    with pytest.raises(ValueError, match="bad.jsonl:1"):
        load_conversations(tmp_path / "bad.jsonl")


def test_cli_scores_an_openai_compatible_endpoint(tmp_path, openai_stub):
    import mlflow

    stub, url = openai_stub
    stub.reply = _casual_reply
    conv_path, out = _write_plain(tmp_path / "convs.jsonl"), tmp_path / "out"
    result = _invoke(["--endpoint", url, "--model", "stub-user", "--api-key-env", "STUB_KEY",
                      "--conversations", str(conv_path), "--out", str(out), "--name", "stub"],
                     {"STUB_KEY": "k"})
    assert result.exit_code == 0, result.output
    metrics = json.loads((out / "metrics.json").read_text())
    row, counts = metrics["stub"], metrics["counts"]
    assert len(stub.requests) == counts["positions"] + 1  # + the reachability check
    assert stub.headers[-1]["authorization"] == "Bearer k"
    assert row["turn_loss_rate"] == 0.0 and 0 <= row["realism_index"] <= 1
    assert 0 < row["c2st"]["p_value"] <= 1 and row["c2st"]["ci_low"] <= row["c2st"]["ci_high"]
    assert row["goal"]["n"] == counts["evaluated_conversations"] and "opening" in row
    assert "c2st" in metrics["real"] and metrics["real"]["turn_loss_rate"] == 0.0
    table = (out / "table.md").read_text()
    assert "| stub |" in table and "realism index" in table and "goal top-1" in table
    assert (out / "plots" / "lengths.png").stat().st_size > 1000
    assert {r["model"] for r in read_jsonl(out / "generations.jsonl")} == {"openai:stub-user"}
    runs = mlflow.search_runs(experiment_names=["mimesis"],
                              filter_string="run_name = 'evaluate_simulator'")
    assert len(runs) >= 1 and "metrics.stub.turn_loss_rate" in runs.columns


def test_an_endpoint_that_always_ends_loses_every_turn(tmp_path, openai_stub, monkeypatch):
    stub, url = openai_stub
    stub.reply = "<|end_conversation|>"
    monkeypatch.setenv("STUB_KEY", "k")
    params = RealismParams(max_conversations=8, min_support=2, c2st_min_support=3,
                           c2st_folds=2, c2st_permutations=5, n_bootstrap=50)
    source = UserSpec("simulator", "openai", model="stub-user", base_url=url,
                      api_key_env="STUB_KEY")
    m = evaluate_simulator(source, _write_plain(tmp_path / "c.jsonl"), tmp_path / "o", params)
    row = m["simulator"]
    assert row["turn_loss_rate"] == 1.0 and row["realism_index"] == 0.0
    assert row["opening"]["empty"] == 1.0 and "c2st" not in row and row["n_turns"] == 0


def test_an_unreachable_endpoint_is_a_clear_error(tmp_path):
    with socket.socket() as s:  # a free port that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = _invoke(["--endpoint", f"http://127.0.0.1:{port}/v1", "--model", "m",
                      "--api-key-env", "STUB_KEY", "--conversations",
                      str(_write_plain(tmp_path / "c.jsonl")), "--out", str(tmp_path / "o")],
                     {"STUB_KEY": "k"})
    assert result.exit_code == 2
    assert "cannot reach the simulator" in result.output and f"127.0.0.1:{port}" in result.output
    assert not (tmp_path / "o").exists()


def test_cli_refuses_zero_or_two_simulators(tmp_path):
    result = _invoke(["--hf", "tiny-llama", "--simulator", str(tmp_path)], {})
    assert result.exit_code == 2 and "exactly one of" in result.output


@pytest.mark.slow
def test_cli_scores_a_local_hf_model_with_a_prompt_style(tmp_path):
    out = tmp_path / "out"
    result = _invoke(["--hf", "tiny-llama", "--prompt-style", "user_simulator",
                      "--conversations", str(_write_plain(tmp_path / "c.jsonl")),
                      "--out", str(out)], {})
    assert result.exit_code == 0, result.output
    m = json.loads((out / "metrics.json").read_text())
    assert "reasoning_rate" in m["simulator"] and "turn_loss_rate" in m["simulator"]
    assert (out / "table.md").is_file()


@pytest.mark.slow
def test_cli_scores_a_frozen_folder(tmp_path):
    from mimesis.io import write_json
    from mimesis.models.base import load_base
    from mimesis.simulator.frozen import hash_files

    folder = tmp_path / "simulator"
    model, tokenizer = load_base("tiny-llama")
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    write_json(folder / "meta.json", {"base_model": "tiny-llama", "files": hash_files(folder)})
    out = tmp_path / "out"
    result = _invoke(["--simulator", str(folder), "--name", "frozen-tiny", "--conversations",
                      str(_write_plain(tmp_path / "c.jsonl")), "--out", str(out)], {})
    assert result.exit_code == 0, result.output
    rows = list(read_jsonl(out / "generations.jsonl"))
    assert {r["model"] for r in rows} == {f"frozen:{folder}"} and rows
    assert "| frozen-tiny |" in (out / "table.md").read_text()


def test_cli_scores_a_live_mimesis_serve_on_loopback(tmp_path):
    """`mimesis evaluate-simulator --endpoint http://127.0.0.1:PORT/sim/v1 --model NAME` against
    a real `mimesis serve` app (uvicorn in a thread; a scripted model behind the server's own
    runtime, batcher and parser), end to end through the CLI."""
    from mimesis.serve.app import create_app
    from mimesis.serve.backends import FunctionBackend
    from mimesis.serve.batching import BatchingSimulator
    from mimesis.serve.config import ServeConfig
    from mimesis.serve.local import serve_in_thread

    seen: list[int] = []

    def model(batch):
        seen.append(len(batch))
        return ["<think>my list code fails</think>\nmy list append still fails, why"] * len(batch)

    sim = BatchingSimulator(FunctionBackend(model), max_turns=8, window_ms=0)
    conv_path, out = _write_plain(tmp_path / "convs.jsonl"), tmp_path / "out"
    with serve_in_thread(create_app(sim, ServeConfig())) as url:
        result = _invoke(["--endpoint", f"{url}/sim/v1", "--model", ServeConfig().model_name,
                          "--api-key-env", "NO_KEY", "--prompt-style", "user_simulator",
                          "--conversations", str(conv_path), "--out", str(out),
                          "--name", "served"], {"NO_KEY": "none"})
    assert result.exit_code == 0, result.output
    metrics = json.loads((out / "metrics.json").read_text())
    row, counts = metrics["served"], metrics["counts"]
    assert sum(seen) >= counts["positions"]  # every position reached the served model
    assert row["turn_loss_rate"] == 0.0 and 0 < row["c2st"]["p_value"] <= 1
    assert "| served |" in (out / "table.md").read_text()


def test_endpoint_timeout_option_reaches_the_client(monkeypatch, tmp_path) -> None:
    """Bug: a CPU server with 8 requests in flight answers after the client's fixed 60 s."""
    import mimesis.eval.realism.evaluate_simulator as module

    seen = {}

    def fake(source, conversations, out, settings):
        seen["timeout_s"] = source.timeout_s

    monkeypatch.setattr(module, "evaluate_simulator", fake)
    monkeypatch.setenv("OPENAI_API_KEY", "local")  # the client refuses an unset key variable
    result = CliRunner().invoke(app, ["evaluate-simulator", "--endpoint", "http://127.0.0.1:9/v1",
                                      "--model", "m", "--timeout-s", "600",
                                      "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert seen == {"timeout_s": 600.0}


def test_the_reachability_check_is_a_valid_simulator_view_request(monkeypatch):
    """``mimesis serve``'s simulator view has no default goal: a check without a system message
    (the scenario there) was refused with 400 scenario_required before every evaluation."""
    from mimesis.eval.realism.evaluate_simulator import endpoint_user
    from tests.serve.test_serve_api import ScriptedUser, live_server

    monkeypatch.setenv("STUB_KEY", "k")
    script = ScriptedUser()
    with live_server(script) as base:
        source = UserSpec("simulator", "openai", model="mimesis-user-simulator",
                          base_url=f"{base}/sim/v1", api_key_env="STUB_KEY")
        endpoint_user(source).check()
    assert script.batches == [["You want help writing a short birthday message."]]


def test_an_endpoint_that_refuses_the_check_is_a_clear_error(tmp_path, openai_stub):
    stub, url = openai_stub
    stub.status = 400
    out = tmp_path / "o"
    result = _invoke(["--endpoint", url, "--model", "m", "--api-key-env", "STUB_KEY",
                      "--conversations", str(_write_plain(tmp_path / "c.jsonl")),
                      "--out", str(out)], {"STUB_KEY": "k"})
    assert result.exit_code == 2 and "refused a minimal request" in result.output
    assert len(stub.requests) == 1 and not out.exists()


def test_an_endpoint_without_a_model_says_so(tmp_path):
    result = _invoke(["--endpoint", "http://127.0.0.1:1/v1", "--conversations",
                      str(_write_plain(tmp_path / "c.jsonl")), "--out", str(tmp_path / "o")], {})
    assert result.exit_code == 2 and "--endpoint needs --model" in result.output
