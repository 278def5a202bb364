"""The hand-labelled set of real user turns shipped with the package (``data/gold.jsonl``).

Each row is one user turn of the curated *train* split with its context (the previous user turn
and the agent reply before it), its behaviours and traits labelled by hand, an ``uncertain`` flag
and a one-line reason per positive label. ``data/README.md`` gives the labelling rules and how
the turns were drawn (``mimesis.behaviors.goldselect``).

The learned labeller is fitted on the **development data** (:func:`load_development`): that set
plus the extra development files (:data:`DEV_EXTRA_FILES`, each with a ``{"meta": ...}``
provenance header first): ``data/gold_dev_extra.jsonl`` and ``data/gold_dev_extra2.jsonl``,
further hand-labelled turns from other ShareGPT conversations drawn with cues for the rare
behaviours (``mimesis.behaviors.devselect``), and ``data/gold_dev_extra3.jsonl``, the first
independent set, drawn without cues and labelled for behaviours only, which became development
data once its figures had steered choices. The independent set (``gold_independent.jsonl``) is
never part of it.
"""

from __future__ import annotations

import json
from collections import Counter
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ValidationError, model_validator

from mimesis.behaviors.catalog import BEHAVIOR_IDS, TRAIT_IDS
from mimesis.schemas import Turn

GOLD_FILE = "gold.jsonl"
# extra development files, in the order they were drawn (devselect seeds 37 and 38; the third is
# the first independent set, indepselect seed 36, development data once spent)
DEV_EXTRA_FILES = ("gold_dev_extra.jsonl", "gold_dev_extra2.jsonl", "gold_dev_extra3.jsonl")
POPULATION_DRAWS = ("random", "later")  # draws without keyword cues: closest to population rates
DEV_EXTRA_FILE = DEV_EXTRA_FILES[0]


class GoldError(ValueError):
    """The labelled set is missing or holds an invalid row (its line number is in the message)."""


class GoldTurn(BaseModel):
    """One hand-labelled user turn.

    Attributes:
        id: Conversation id in the curated train split.
        turn_index: Index of the user turn in the conversation's ``turns``.
        draw: ``random``, ``later`` (a random turn among user turns 2-8, ``indepselect``) or
            ``enriched`` (drawn by keyword or context cues, ``goldselect`` and ``devselect``).
        cue: For an enriched turn of the extra development set, the ``devselect`` cue family
            that chose it ("" otherwise).
        prev_user, prev_agent: The context ("" when the turn opens the conversation).
        text: The user turn (clipped at 6,000 characters).
        behaviors, traits: Hand labels, catalogue ids.
        traits_labelled: False for turns labelled for behaviours only (``traits`` is then
            empty and says nothing): trait models neither fit nor score them.
        uncertain: The labeller was not sure about at least one label of this turn.
        reasons: One line per positive label.
    """

    id: str
    turn_index: int
    draw: str
    cue: str = ""
    prev_user: str
    prev_agent: str
    text: str
    behaviors: list[str]
    traits: list[str]
    traits_labelled: bool = True
    uncertain: bool
    reasons: dict[str, str]

    @model_validator(mode="after")
    def _check(self) -> GoldTurn:
        if unknown := set(self.behaviors) - set(BEHAVIOR_IDS) | set(self.traits) - set(TRAIT_IDS):
            raise ValueError(f"unknown labels {sorted(unknown)}")
        if set(self.reasons) != set(self.behaviors) | set(self.traits):
            raise ValueError("every positive label needs one reason, and only those")
        if self.draw not in (*POPULATION_DRAWS, "enriched"):
            raise ValueError(f"draw {self.draw!r} is not random|later|enriched")
        if self.traits and not self.traits_labelled:
            raise ValueError("traits given on a turn whose traits were not labelled")
        return self

    @property
    def labels(self) -> frozenset[str]:
        return frozenset(self.behaviors) | frozenset(self.traits)

    def turns(self) -> list[Turn]:
        """The turn with its context as alternating turns, user first (for the rules)."""
        turns = [Turn(role="user", text=self.prev_user)] if self.prev_user else []
        if self.prev_agent:
            turns.append(Turn(role="assistant", text=self.prev_agent))
        return [*turns, Turn(role="user", text=self.text)]


def default_path() -> Path:
    """Path of the labelled set inside the installed package."""
    return Path(str(resources.files("mimesis.behaviors") / "data" / GOLD_FILE))


def default_extra_path(name: str = DEV_EXTRA_FILE) -> Path:
    """Path of an extra development file (default: the first) inside the installed package."""
    return Path(str(resources.files("mimesis.behaviors") / "data" / name))


def load_gold(path: Path | None = None) -> list[GoldTurn]:
    """The labelled turns of ``path`` (default: the packaged set), in file order.

    Raises:
        GoldError: the file is missing, a line is not JSON or a row is invalid, or an
            ``(id, turn_index)`` pair repeats.
    """
    path = path or default_path()
    if not path.is_file():
        raise GoldError(f"labelled set {path} not found (is package data installed?)")
    rows, seen = [], set()
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = GoldTurn.model_validate(json.loads(line))
        except (json.JSONDecodeError, ValidationError) as exc:
            raise GoldError(f"{path}:{n}: {str(exc)[:300]}") from exc
        if (row.id, row.turn_index) in seen:
            raise GoldError(f"{path}:{n}: turn {row.id}#{row.turn_index} labelled twice")
        seen.add((row.id, row.turn_index))
        rows.append(row)
    return rows


def load_dev_extra(path: Path | None = None) -> tuple[dict, list[GoldTurn]]:
    """The provenance header and the rows of the extra development turns (default: packaged).

    Raises:
        GoldError: missing file or header, an invalid row (with its line number), or a
            conversation that gives a second turn.
    """
    path = path or default_extra_path()
    if not path.is_file():
        raise GoldError(f"extra development set {path} not found (is package data installed?)")
    return read_headed_set(path, GoldTurn)


def load_dev_extras() -> list[GoldTurn]:
    """The rows of every packaged extra development file (:data:`DEV_EXTRA_FILES`), in order.

    Raises:
        GoldError: as :func:`load_dev_extra`, for any of them.
    """
    return [row for name in DEV_EXTRA_FILES for row in load_dev_extra(default_extra_path(name))[1]]


def load_development(gold: list[GoldTurn] | None = None,
                     extra: list[GoldTurn] | None = None) -> list[GoldTurn]:
    """The learned labeller's training data: the packaged set's turns, then the extra
    development turns (defaults: the packaged files, :func:`load_dev_extras`).

    Raises:
        GoldError: an extra turn comes from a conversation of the packaged set or of another
            extra turn (the files were drawn apart, so the split into dev/test parts and the
            grouped folds stay by conversation).
    """
    gold = load_gold() if gold is None else gold
    extra = load_dev_extras() if extra is None else extra
    if shared := {g.id for g in gold} & {e.id for e in extra}:
        raise GoldError(f"extra development turns share conversations with the packaged set: "
                        f"{sorted(shared)[:5]}")
    if len({e.id for e in extra}) < len(extra):
        twice = sorted(i for i, n in Counter(e.id for e in extra).items() if n > 1)
        raise GoldError(f"extra development turns share conversations: {twice[:5]}")
    return [*gold, *extra]


def read_headed_set(path: Path, model: type[BaseModel]) -> tuple[dict, list]:
    """A labelled set file: a ``{"meta": {...}}`` provenance line, then one ``model`` row per
    line, one turn per conversation (the bootstrap resamples turns as conversations).

    Raises:
        GoldError: no header, an invalid row (with its line number), or a conversation that
            gives a second turn.
    """
    lines = [(n, ln) for n, ln in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if ln.strip()]  # physical line numbers, blank lines skipped
    try:
        meta = json.loads(lines[0][1])["meta"] if lines else None
    except (json.JSONDecodeError, KeyError, TypeError):
        meta = None
    if not isinstance(meta, dict):
        raise GoldError(f"{path}:{lines[0][0] if lines else 1}: the first line must be "
                        "{\"meta\": {...}}")
    rows, seen = [], set()
    for n, line in lines[1:]:
        try:
            row = model.model_validate(json.loads(line))
        except (json.JSONDecodeError, ValidationError) as exc:
            raise GoldError(f"{path}:{n}: {str(exc)[:300]}") from exc
        if row.id in seen:
            raise GoldError(f"{path}:{n}: conversation {row.id} gives a second turn")
        seen.add(row.id)
        rows.append(row)
    return meta, rows
