"""params.yaml is the one source of the pipeline's values: no params dataclass may hold a default
that disagrees with what the base params.yaml sets for the same field.

Every stage section of params.yaml is walked against the dataclass its stage's ``load_params``
builds, nested dataclasses included (wherever they are defined: ``mimesis/eval``, ``mimesis/rl``,
...). A field params.yaml leaves out keeps its default (nothing to disagree with).
"""

from __future__ import annotations

import dataclasses
import importlib
import typing
from pathlib import Path
from typing import Any

import pytest

from mimesis.params import _dataclass_type, read_params, stage_params
from mimesis.users.spec import OLD_KIND_NAMES

PARAMS_PATH = Path(__file__).resolve().parents[2] / "params.yaml"
STAGES = [k for k in read_params(PARAMS_PATH) if k not in ("profile", "seed", "profiles")]


def stage_class(stage: str) -> type:
    """The params dataclass ``mimesis.stages.<stage>.load_params`` returns."""
    module = importlib.import_module(f"mimesis.stages.{stage}")
    return typing.get_type_hints(module.load_params)["return"]


def _plain(value: Any) -> Any:
    """``value`` as params.yaml would spell it: dataclasses as dicts, tuples as lists, a user
    entry's old kind spelling (``hf``) as the kind it is read as."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain(dataclasses.asdict(value))
    if isinstance(value, dict):
        plain = {k: _plain(v) for k, v in value.items()}
        if "kind" in plain:
            plain["kind"] = OLD_KIND_NAMES.get(plain["kind"], plain["kind"])
        return plain
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def disagreements(cls: type, values: dict, where: str, instance: Any = None
                  ) -> set[tuple[str, str, str]]:
    """``(path, default, yaml value)`` of every default of ``cls`` that differs from ``values``,
    the params.yaml section ``cls`` is built from.

    A field whose type is a dataclass and whose yaml value is a dict is walked field by field:
    against its default instance (a ``default_factory`` such as ``lambda: LoraParams(dropout=0)``
    is the literal default there), or, without one, against the nested class's own defaults
    (what :func:`mimesis.params.build` fills in). ``instance`` is the default being walked.
    """
    found: set[tuple[str, str, str]] = set()
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.name not in values:
            continue
        path, value = f"{where}.{f.name}", values[f.name]
        default = _default(f) if instance is None else getattr(instance, f.name)
        nested = _dataclass_type(hints[f.name])
        if nested is not None and isinstance(value, dict):
            found |= disagreements(nested, value, path,
                                   default if dataclasses.is_dataclass(default) else None)
        elif default is not dataclasses.MISSING and _plain(default) != _plain(value):
            found.add((path, repr(_plain(default)), repr(_plain(value))))
    return found


@pytest.mark.parametrize("stage", STAGES)
def test_no_default_disagrees_with_params_yaml(stage: str) -> None:
    values = stage_params(stage, PARAMS_PATH, profile="default")
    found = disagreements(stage_class(stage), values, stage)
    lines = [f"{path}: default {default} != params.yaml {value}"
             for path, default, value in sorted(found)]
    assert not lines, "\n".join(lines)


@dataclasses.dataclass(frozen=True)
class _Inner:
    r: int = 4
    dropout: float = 0.05


@dataclasses.dataclass(frozen=True)
class _Outer:
    max_turns: int = 3
    inner: _Inner = dataclasses.field(default_factory=lambda: _Inner(dropout=0.0))
    envs: tuple[str, ...] = ("A", "B")


def test_the_walk_sees_nested_and_factory_defaults() -> None:
    found = disagreements(_Outer, {"max_turns": 5, "inner": {"r": 4, "dropout": 0.1},
                                   "envs": ["A", "B"]}, "demo")
    assert found == {("demo.max_turns", "3", "5"), ("demo.inner.dropout", "0.0", "0.1")}
    assert disagreements(_Outer, {"inner": {"dropout": 0.0}, "envs": ("A", "B")}, "demo") == set()
