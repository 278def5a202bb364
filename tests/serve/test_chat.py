"""``mimesis chat``: the terminal loop, scenario picking, ``--show-thoughts``, piped stdin."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from mimesis.cli import app
from mimesis.io import write_jsonl
from mimesis.schemas import LabeledConversation, Scenario, Turn, TurnLabel
from mimesis.serve import chat as chat_mod
from mimesis.simulator.runtime import UserSimulator


def scripted(batch: list[list[dict[str, str]]]) -> list[str]:
    """Turn n: ``<think>private plan n</think>\\nmessage n``; ends after the agent says bye."""
    out = []
    for view in batch:
        n = sum(m["role"] == "assistant" for m in view)
        said_bye = view[-1]["role"] == "user" and "bye" in view[-1]["content"].lower()
        out.append("<think>all set</think>\n<|end_conversation|>" if said_bye
                   else f"<think>private plan {n}</think>\nmessage {n}")
    return out


def record_console() -> Console:
    return Console(record=True, width=200, force_terminal=False)


def test_run_chat_shows_thoughts_only_when_asked() -> None:
    scenario = Scenario(goal="renew my passport", behaviors=["B3"], annotator="t")
    for show in (False, True):
        lines = iter(["what do you need?", "ok, bye"])
        console = record_console()
        state = chat_mod.run_chat(UserSimulator(scripted), scenario, lines.__next__,
                                  console, show_thoughts=show)
        text = console.export_text()
        assert "message 0" in text and "message 1" in text and "<|end_conversation|>" in text
        assert state.ended and state.end_reason == "end_signal" and state.turns == 2
        assert ("private plan 0" in text) is show and ("renew my passport" in text) is show
        assert ("all set" in text) is show


def test_run_chat_stops_on_quit_or_end_of_input() -> None:
    scenario = Scenario(goal="g", annotator="t")
    for reader in (iter(["/quit"]).__next__, lambda: None):
        console = record_console()
        state = chat_mod.run_chat(UserSimulator(scripted), scenario, reader, console)
        assert not state.ended and state.turns == 1
        assert "you left the conversation" in console.export_text()


def write_test_split(path: Path) -> Path:
    convs = []
    for k, goal in enumerate(["plan a birthday party", "debug my python script"]):
        convs.append(LabeledConversation(
            id=f"conv{k}", turns=[Turn(role="user", text="hi"), Turn(role="assistant", text="hey")],
            split="test", scenario=Scenario(goal=goal, annotator="t"),
            labels=[TurnLabel(turn_index=0, reasoning="", reasoning_annotator="none")],
            end_reasoning="", end_reasoning_annotator="none"))
    write_jsonl(path, convs)
    return path


@pytest.fixture
def fake_model(monkeypatch) -> list:
    loads: list = []

    def load(sim_dir, max_tokens, temperature, top_p, seed, trust_folder=False):
        loads.append((Path(sim_dir), max_tokens, temperature, seed))
        return scripted

    monkeypatch.setattr(chat_mod, "load_generate_fn", load)
    return loads


def test_cli_chat_with_a_test_scenario_and_piped_stdin(fake_model, tmp_path) -> None:
    split = write_test_split(tmp_path / "test.jsonl")
    save = tmp_path / "episode.json"
    result = CliRunner().invoke(app, [
        "chat", "--simulator", "sim", "--scenarios", str(split), "--conversation", "conv1",
        "--show-thoughts", "--max-tokens", "32", "--seed", "5", "--save", str(save)],
        input="What is the error?\nThanks, bye!\n")
    assert result.exit_code == 0, result.output
    assert "debug my python script" in result.output and "private plan 1" in result.output
    assert "message 0" in result.output and "<|end_conversation|>" in result.output
    assert fake_model == [(Path("sim"), 32, 0.8, 5)]
    state = json.loads(save.read_text())
    assert state["scenario"]["goal"] == "debug my python script" and state["ended"]
    assert [t["text"] for t in state["history"] if t["role"] == "assistant"] == [
        "What is the error?", "Thanks, bye!"]


def test_cli_chat_typed_goal_hides_thoughts_by_default(fake_model) -> None:
    result = CliRunner().invoke(app, ["chat", "--goal", "buy running shoes", "--behaviors", "B3"],
                                input="Which size?\n")  # then end of input
    assert result.exit_code == 0, result.output
    assert "message 1" in result.output and "private plan" not in result.output
    assert "buy running shoes" not in result.output
    assert "you left the conversation" in result.output


def test_cli_chat_bad_scenario_choice_exits_2(fake_model, tmp_path) -> None:
    split = write_test_split(tmp_path / "test.jsonl")
    missing = CliRunner().invoke(app, ["chat", "--scenarios", str(tmp_path / "none.jsonl")])
    assert missing.exit_code == 2 and "--goal" in missing.output
    beyond = CliRunner().invoke(app, ["chat", "--scenarios", str(split), "--index", "7"])
    assert beyond.exit_code == 2
    unknown = CliRunner().invoke(app, ["chat", "--goal", "g", "--behaviors", "B3,B77"])
    assert unknown.exit_code == 2 and "B77" in unknown.output
    assert fake_model == []


@pytest.mark.slow
def test_cli_chat_with_a_frozen_tiny_simulator(tmp_path) -> None:
    spec = importlib.util.spec_from_file_location(
        "serve_frozen", Path(__file__).with_name("test_serve_frozen.py"))
    helpers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(helpers)
    sim_dir = helpers.build_frozen_tiny(tmp_path / "simulator")
    result = CliRunner().invoke(app, [
        "chat", "--simulator", str(sim_dir), "--goal", "find a vegan recipe", "--show-thoughts",
        "--max-turns", "2", "--max-tokens", "16", "--seed", "0"], input="Sure, which cuisine?\n")
    assert result.exit_code == 0, result.output
    assert "hidden goal: find a vegan recipe" in result.output
    assert "user turns; ended:" in result.output
