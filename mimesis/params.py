"""Load a stage's parameters from ``params.yaml`` with the active profile applied.

``params.yaml`` holds the default profile at top level, the active profile name in ``profile``,
and per-profile overrides under ``profiles.<name>.<stage>`` (deep-merged over the defaults).
Every stage declares ``profile``, ``seed``, its own section and its overrides in ``dvc.yaml``, so a
change to any of them re-runs the stage under ``dvc repro`` and under the Prefect flow alike.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

import yaml

PROFILES = ("default", "smoke", "full", "claim", "gpu")
T = TypeVar("T")


class ParamsError(ValueError):
    """params.yaml is missing a key, names an unknown profile or holds an invalid value."""


def deep_merge(base: dict, override: dict) -> dict:
    """Return ``base`` with ``override`` merged in recursively (override wins on leaves)."""
    out = dict(base)
    for key, value in (override or {}).items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def read_params(params_path: Path = Path("params.yaml")) -> dict:
    if not params_path.exists():
        raise ParamsError(f"{params_path} not found: run from the project root or pass --params")
    return yaml.safe_load(params_path.read_text()) or {}


def stage_params(stage: str, params_path: Path = Path("params.yaml"), profile: str | None = None) -> dict:
    """Merged params for ``stage``: defaults ⊕ ``profiles.<profile>.<stage>``, plus ``seed`` and
    ``profile``.

    Raises:
        ParamsError: unknown stage section or profile.
    """
    raw = read_params(params_path)
    profile = profile or raw.get("profile", "default")
    if profile not in PROFILES:
        raise ParamsError(f"unknown profile {profile!r}; choose one of {PROFILES}")
    if stage not in raw:
        raise ParamsError(f"params.yaml has no section {stage!r}")
    section = raw[stage] or {}
    if profile != "default":
        section = deep_merge(section, ((raw.get("profiles") or {}).get(profile) or {}).get(stage) or {})
    return {**section, "seed": raw.get("seed", 0), "profile": profile}


def build(cls: type[T], values: dict[str, Any], section: str = "") -> T:
    """Instantiate the frozen dataclass ``cls`` from ``values``; unknown keys are an error.

    Nested dataclass fields (``Inner`` or ``Inner | None``) are built from nested dicts; field
    types are resolved with :func:`typing.get_type_hints`, each in the module of the class that
    declares it, so an inherited field's type needs no import in the subclass's module.

    Args:
        section: Where ``values`` sit in params.yaml (e.g. ``distill_agent``), for messages.

    Raises:
        ParamsError: an unknown key, or a value the dataclass refuses (its ``ValueError`` /
            ``TypeError`` message, prefixed with the section path).
    """
    where = section or cls.__name__
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = set(values) - names
    if unknown:
        raise ParamsError(f"{where}: unknown params {sorted(unknown)}")
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for key, value in values.items():
        sub = _dataclass_type(hints[key])
        kwargs[key] = build(sub, value, f"{where}.{key}") if sub and isinstance(value, dict) \
            else value
    try:
        return cls(**kwargs)
    except ParamsError:
        raise
    except (ValueError, TypeError) as e:
        raise ParamsError(f"params.yaml {where}: {e}") from e


def _dataclass_type(hint: Any) -> type | None:
    """The dataclass of a field hint ``X`` or ``X | None`` (``Optional[X]``), else None."""
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return hint
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        found = [a for a in typing.get_args(hint) if dataclasses.is_dataclass(a)]
        return found[0] if len(found) == 1 else None
    return None


def set_profile(params_path: Path, profile: str) -> bool:
    """Set the top-level ``profile:`` line of params.yaml in place (comments kept).

    Returns True when the file changed.
    """
    if profile not in PROFILES:
        raise ParamsError(f"unknown profile {profile!r}; choose one of {PROFILES}")
    text = params_path.read_text()
    new, n = re.subn(r"(?m)^profile:\s*\S+", f"profile: {profile}", text, count=1)
    if n == 0:
        raise ParamsError(f"{params_path} has no top-level 'profile:' line")
    if new != text:
        params_path.write_text(new)
    return new != text
