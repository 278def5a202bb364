"""Person names without a cue word: "Chidi Okonkwo", "Rajesh Kumar Sharma", ``17,Chiamaka,Eze``.

What: a first word and a surname word (an optional middle initial, up to two more surname words),
using the person-name lists of the ``faker`` package (all locales, Latin script), or a CSV / TSV /
table row with a first-name field next to a surname field.

Why so strict: on real ShareGPT text the looser rule of the ``pii2`` branch replaced 78 spans per
1000 turns, and a judged sample of 80 held 30 that were no people ("Raspberry Pi", "Alpha Male",
"Roman Forum", "Constant Contact", "Palatine Hill", "Tone | Genre", title-case headings). So:

- "English word" means a word ShareGPT writes mostly in lower case (``english_words.txt.gz``,
  provenance in :mod:`mimesis.data.make_english_words`), plus faker's lorem words, US states,
  countries and :data:`~mimesis.data.pii_words.NOT_NAMES`;
- a known first name that is not an English word ("Chiamaka") may precede any surname-shaped
  word that is not an English word, or an English-language surname that is ("Emma Stone");
- a first name that is an English word is no name ("Alpha Male", "Earth Knight", "As John"),
  except those in ``AMBIGUOUS_FIRST`` ("Grace", "Will"): they need an English-language surname
  (faker en_*) and no sentence start;
- in a CSV / table row the surname field must be a known surname ("Atlanta | Easygoing" is no
  name);
- an unknown first word needs a known surname that is no English word ("Chidi Okonkwo", not
  "Palatine Hill");
- never inside a run of capitalised words on one line ("Urban Planning Department", "Visit The
  Golden Pavilion"): a capitalised word right before (not at a sentence start) or right after the
  name means a heading, a title or a product; nor a repeated word ("Obama Obama");
- public figures and brands shaped like names (:func:`~mimesis.data.pii_words.public_figures`)
  are kept: questions about them are ordinary content.
"""

from __future__ import annotations

import gzip
import importlib
import pkgutil
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from mimesis.data.pii_people import _LOW, _PART, _STOP, _UP, _WORD, Span
from mimesis.data.pii_words import AMBIGUOUS_FIRST, NAME_WORDS, NOT_NAMES, public_figures

_PAIR = re.compile(
    rf"(?<![{_UP}{_LOW}0-9_'.-])(?P<first>{_WORD})[ \t]+(?:[A-Z]\.[ \t]+)?(?P<last>{_WORD})"
    rf"(?P<more>(?:[ \t]+{_WORD}){{0,2}})"
)
# CSV / TSV / table rows: first-name field, surname field.
_CSV_PAIR = re.compile(
    rf"(?m)(?:^|(?<=[,\t|;]))[ \t]*(?P<first>{_WORD})[ \t]*[,\t|;][ \t]*(?P<last>{_WORD})"
    r"[ \t]*(?=[,\t|;]|$)"
)
_SENTENCE_START = re.compile(r"(?:^|[.!?:;\n]\s*|[\"'(\[*#>-]\s*)$")
_CAP_BEFORE = re.compile(rf"(?:^|[ \t])([{_UP}][\w'-]*)[ \t]+$")
_CAP_AFTER = re.compile(rf"[ \t]+[{_UP}][{_LOW}]")


@cache
def english_words() -> frozenset[str]:
    """Lowercased English words (see the module docstring), less the names in NAME_WORDS."""
    from faker.providers.address.en import Provider as Address
    from faker.providers.address.en_US import Provider as UsAddress
    from faker.providers.lorem.en_US import Provider as Lorem

    path = Path(__file__).with_name("english_words.txt.gz")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        words = set(f.read().split())
    words |= set(NOT_NAMES) | _STOP | {w.lower() for w in Lorem.word_list}
    for place in (*Address.countries, *UsAddress.states):
        words.update(place.lower().split())
    return frozenset(words - NAME_WORDS)


@cache
def _faker_names() -> tuple[frozenset[str], frozenset[str]]:
    """(first names, last names) of all of faker's person providers, Latin script."""
    from faker.providers import person

    first: set[str] = set()
    last: set[str] = set()
    for info in pkgutil.iter_modules(person.__path__):
        provider = importlib.import_module(f"{person.__name__}.{info.name}").Provider
        for attr, out in (
            ("first_names", first),
            ("first_names_male", first),
            ("first_names_female", first),
            ("last_names", last),
        ):
            names = getattr(provider, attr, None)
            if isinstance(names, (list, tuple, dict, set, frozenset)):
                out.update(n for n in names if isinstance(n, str) and _plain(n))
    return frozenset(first), frozenset(last)


@cache
def name_lists() -> tuple[frozenset[str], frozenset[str]]:
    """(first names, last names) that are not English words."""
    first, last = _faker_names()
    common = english_words()
    return (
        frozenset(n for n in first if n.lower() not in common and len(n) > 2),
        frozenset(n for n in last if n.lower() not in common),
    )


def _plain(name: str) -> bool:
    return re.fullmatch(_PART, name) is not None


@cache
def _core_last() -> frozenset[str]:
    """English-language surnames (faker en_*), the ones that may also be everyday words."""
    out: set[str] = set()
    for locale in ("en_US", "en_GB", "en_IE", "en_NZ", "en"):
        try:
            provider = importlib.import_module(f"faker.providers.person.{locale}").Provider
        except ModuleNotFoundError:
            continue
        out.update(n for n in getattr(provider, "last_names", ()) if _plain(n))
    return frozenset(n for n in out if n.lower() not in NOT_NAMES)


def _is_word(word: str) -> bool:
    """``word`` or one of its parts is an English word, or the plural of one ("Rockets")."""
    common = english_words()
    parts = word.replace("'", "-").split("-")
    return any(p.lower() in common or (len(p) > 3 and p.lower()[:-1] in common) for p in parts)


def _surname(word: str, first_known: bool) -> bool:
    """``word`` can be a surname: an English-language surname, or (after a known first name)
    any non-word, or a known non-word surname; a double-barrelled one when each part can be."""
    if "-" in word:
        return all(_surname(part, first_known) for part in word.split("-"))
    if _is_word(word):
        return word in _core_last()
    return first_known or word in name_lists()[1]


def _strict_last(word: str) -> bool:
    """A known surname that is no English word (after an unknown first word)."""
    return not _is_word(word) and all(p in name_lists()[1] for p in word.split("-"))


def _csv_last(word: str) -> bool:
    """A surname field: a known surname, English-language or not ("Eze", "Brown"), not
    "Atlanta | Easygoing" or "Deacon, Evangelist" (table cells, lists of titles)."""
    return word in _core_last() or (not _is_word(word) and word in name_lists()[1])


def _in_title_run(text: str, start: int, end: int) -> bool:
    """A capitalised word right before (not starting a sentence) or right after the span."""
    line_end = text.find("\n", end)
    if _CAP_AFTER.match(text, end, len(text) if line_end < 0 else line_end):
        return True
    before = _CAP_BEFORE.search(text, max(0, start - 40), start)
    if before is None or before[1].lower().rstrip(".") in _STOP:
        return False
    return _SENTENCE_START.search(text, max(0, before.start(1) - 3), before.start(1)) is None


def _pair_span(text: str, m: re.Match) -> Span | None:
    """The span of a cue-less "First Last" match, or None (rules in the module docstring)."""
    first, last = m["first"], m["last"]
    if first == last or first.lower() in NOT_NAMES or f"{first} {last}" in public_figures():
        return None
    if first.lower() in AMBIGUOUS_FIRST or _is_word(first):
        if first.lower() not in AMBIGUOUS_FIRST:  # "Earth Knight", "Delta Fox", "As John"
            return None
        at_start = _SENTENCE_START.search(text, max(0, m.start() - 12), m.start())
        if last not in _core_last() or at_start:
            return None
        known = False
    else:
        known = any(p in name_lists()[0] for p in first.split("-"))
        if not (_surname(last, True) if known else _strict_last(last)):
            return None
    end = m.end("last")
    for extra in re.finditer(r"\S+", m["more"]):  # "Rajesh Kumar Sharma"
        if not _surname(extra[0], known) or extra[0] in (first, last):
            break
        end = m.start("more") + extra.end()
    if _in_title_run(text, m.start(), end):
        return None
    return m.start(), end


def cueless_names(text: str) -> Iterator[Span]:
    """Yield spans of person names found without a cue word (rules in the module docstring)."""
    for m in _PAIR.finditer(text):
        if (span := _pair_span(text, m)) is not None:
            yield span
    if "," in text or "\t" in text or "|" in text:
        first_names = name_lists()[0]
        for m in _CSV_PAIR.finditer(text):
            first, last = m["first"], m["last"]
            if first in first_names and first != last and _csv_last(last):
                yield m.span("first")
                yield m.span("last")
