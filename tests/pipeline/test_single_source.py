"""One source of truth: each shared piece is defined in one module of the package, so a copy that
comes back fails here (static checks over ``mimesis/``; nothing is imported or run)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "mimesis"


def _trees() -> dict[str, ast.Module]:
    return {p.relative_to(PACKAGE.parent).as_posix(): ast.parse(p.read_text(encoding="utf-8"))
            for p in sorted(PACKAGE.rglob("*.py"))}


TREES = _trees()


def _called_name(node: ast.Call) -> str:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _where(match) -> dict[str, list[int]]:
    """Module path -> line numbers of the nodes for which ``match(node)`` holds."""
    found: dict[str, list[int]] = defaultdict(list)
    for path, tree in TREES.items():
        for node in ast.walk(tree):
            if match(node):
                found[path].append(node.lineno)
    return dict(found)


def _calls(*names: str) -> dict[str, list[int]]:
    return _where(lambda n: isinstance(n, ast.Call) and _called_name(n) in names)


def _assigned(name: str) -> dict[str, list[int]]:
    def targets(n: ast.AST) -> list[ast.expr]:
        if isinstance(n, ast.Assign):
            return n.targets
        if isinstance(n, ast.AnnAssign):
            return [n.target]
        return [n.name] if isinstance(n, getattr(ast, "TypeAlias", ())) else []  # 3.12+

    return _where(lambda n: any(isinstance(t, ast.Name) and t.id == name for t in targets(n)))


@pytest.mark.parametrize(("what", "found", "home"), [
    ("an OpenAI client is constructed", lambda: _calls("OpenAI", "AsyncOpenAI"),
     "mimesis/openai_chat.py"),
    ("a chat completion is requested", lambda: _where(
        lambda n: isinstance(n, ast.Attribute) and n.attr == "completions"),
     "mimesis/openai_chat.py"),
    ("a peft LoraConfig is built", lambda: _calls("LoraConfig"), "mimesis/models/lora.py"),
    ("the Messages alias is defined", lambda: _assigned("Messages"), "mimesis/schemas.py"),
    ("a rollout_func factory is defined", lambda: _where(
        lambda n: isinstance(n, ast.FunctionDef) and n.name.startswith("make_")
        and n.name.endswith("rollout_func")), "mimesis/rl/grpo.py"),
])
def test_defined_in_one_module(what, found, home) -> None:
    where = found()
    assert list(where) == [home], f"{what} outside {home}: {where}"


def test_every_userrl_loader_uses_the_one_locator() -> None:
    loaders = {path: node for path, tree in TREES.items() for node in ast.walk(tree)
               if isinstance(node, ast.FunctionDef) and node.name == "load_userrl_tasks"}
    assert len(loaders) >= 8  # one per env; TravelGym's lives in travel/gym.py
    for path, node in loaders.items():
        calls = {_called_name(n) for n in ast.walk(node) if isinstance(n, ast.Call)}
        assert "userrl_files" in calls, f"{path}: load_userrl_tasks locates files itself"
        assert not calls & {"is_file", "is_dir", "glob"}, f"{path}: a second locating loop"
