"""The README's copy-paste commands and examples work on a fresh clone: every ``make`` target,
``mimesis`` subcommand and option, ``python -m`` module and option exists, the JSON examples are
read by the code they document, and the README stays a short guide."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
import typer

from mimesis.cli import app
from mimesis.data.normalize import normalize_group
from mimesis.data.sharegpt import RawRecord

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
SHELL = ("source", "cat", "export", "dvc")  # shell built-ins and third-party CLIs


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.DOTALL)


def _commands() -> list[str]:
    """Each command line of the README's bash blocks: continuations joined, comments cut."""
    lines = []
    for block in _blocks("bash"):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.split(r"\s+#\s", line)[0].strip()
            if line:
                lines.append(line)
    return lines


def _options(line: str) -> set[str]:
    return set(re.findall(r"(?<!\S)(--[a-z][a-z-]*)", line))


def test_the_readme_is_a_short_guide_without_development_labels() -> None:
    assert len(README.splitlines()) <= 250
    assert not re.search(r"[Ss]ession \d+|[Tt]urn \d+ (run|profile)|[Ii]ssue \d+", README)


def test_every_command_exists() -> None:
    group = typer.main.get_command(app)
    makefile = (ROOT / "Makefile").read_text()
    commands = _commands()
    assert any(c.startswith("make run") for c in commands)
    for line in commands:
        words = line.split()
        if words[0] in SHELL:
            continue
        if words[0] == "make":
            target = words[1]
            assert re.search(rf"^{re.escape(target)}:", makefile, re.MULTILINE), line
        elif words[0] == "mimesis":
            command = group.commands.get(words[1])
            assert command is not None, f"no `mimesis {words[1]}`: {line}"
            known = {o for p in command.params for o in p.opts}
            assert _options(line) <= known, f"unknown options {_options(line) - known}: {line}"
        elif words[0].endswith("python") and words[1] == "-m":
            spec = importlib.util.find_spec(words[2])
            assert spec is not None and spec.origin, line
            source = Path(spec.origin).read_text()
            missing = {o for o in _options(line) if f'"{o}"' not in source}
            assert not missing, f"{words[2]} has no {missing}: {line}"
        else:
            pytest.fail(f"a README command this test does not know how to check: {line}")


def test_the_curate_example_is_curated_as_is() -> None:
    (sharegpt,) = [json.loads(b) for b in _blocks("json") if b.lstrip().startswith("[")]
    for i, element in enumerate(sharegpt):
        record = RawRecord(key=element["id"], id=element["id"], index=i, data=element)
        result = normalize_group(element["id"], [record])
        assert result.conversation is not None and not result.rejects, result.rejects


def test_the_evaluate_simulator_example_is_read(tmp_path: Path) -> None:
    from mimesis.eval.realism.evaluate_simulator import load_conversations

    (plain,) = [json.loads(b) for b in _blocks("json") if b.lstrip().startswith("{")]
    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps(plain) + "\n")
    (conversation,) = load_conversations(path)
    assert conversation.scenario.goal == plain["goal"] and conversation.ended
