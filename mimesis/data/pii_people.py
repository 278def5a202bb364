"""Find person names and street addresses in free text (our recognisers; no NER model).

Names, two ways (a name is 1-4 capitalised words, ``O'Brien``, ``McAdams``, ``Jean-Luc``,
``van``/``de``/``bin`` particles and middle initials allowed; a stoplist keeps "Dear Sir", "Hi
There", weekdays, months, "ChatGPT", ...):

- after a personal cue: "my name is", "I'm", "call me", "Dear", "Hi", a sign-off line
  ("Regards,"), a title (Mr, Mrs, Ms, Dr, Prof), a relation ("my wife", "our landlord"), a field
  ("Name:", "Patient:"), "named", or before ``<[EMAIL]>`` / ``'s phone`` ("called" is not a cue:
  on ShareGPT it names books, bars and brands more often than people);
- a known first name followed by a known last name (the person-name lists of the ``faker``
  package, 29 locales, ASCII only), which also catches public figures: replacing them is the
  price of catching private people without a cue (as an NER-based scrubber would).

Addresses: a house number, 0-4 capitalised words and a street type ("221B Baker Street", "1600
Amphitheatre Pkwy, Mountain View, CA 94043"), with an optional unit, city, state and ZIP; and
"PO Box 123". Non-English address formats are not covered.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator
from functools import cache

Span = tuple[int, int]
_LOCALE_NAMES = (
    "en_US en_GB en_IN en_IE en_NZ es_ES es_MX fr_FR de_DE it_IT pt_BR nl_NL pl_PL tr_TR sv_SE "
    "ru_RU zh_CN ja_JP ko_KR vi_VN hi_IN ar_AA fa_IR yo_NG tw_GH zu_ZA da_DK fi_FI no_NO"
)
_LOCALES = _LOCALE_NAMES.split()
_STOP_WORDS = """
mr mrs ms miss mx dr prof sir madam madame team all everyone there world guys folks friend friends customer customers
user users god lord mom dad chat gpt bot assistant ai hiring manager committee members
monday tuesday wednesday thursday friday saturday sunday january february march april may june
july august september october november december today tomorrow yesterday
the this that these those it he she they we you i my your our his her their a an and or but
so yes no not please thanks thank hello hi hey dear good great ok okay sure well here now then
english spanish french german chinese python java javascript google microsoft apple amazon
sorry glad happy new just also very really still trying looking working writing going
name names are is was were fan fans string int integer boolean float number date text true false none null object array list
"""
_STOP = frozenset(_STOP_WORDS.split())
_WORD = r"(?:(?:Mc|Mac|O'|D')?[A-Z][a-z]+(?:-[A-Z][a-z]+)?(?![A-Za-z0-9_'-]))"
_PARTICLE = r"(?:(?:van|von|de|da|del|der|di|du|le|la|bin|ibn|al)\s+)"
_TITLE = r"(?:Mr|Mrs|Ms|Miss|Mx|Dr|Prof|Sir|Madam)\.?"
_NAME = rf"(?P<pii>{_WORD}(?:\s+(?:[A-Z]\.\s+)?{_PARTICLE}?{_WORD}){{0,3}})"
_RELATIONS = (
    "wife|husband|partner|son|daughter|mom|mum|mother|dad|father|brother|sister|friend|boss|"
    "manager|colleague|coworker|co-worker|client|customer|tenant|landlord|landlady|neighbou?r|"
    "teacher|student|doctor|lawyer|boyfriend|girlfriend|fianc[ée]e?|grandma|grandmother|grandpa|"
    "grandfather|aunt|uncle|cousin|niece|nephew|roommate|flatmate|assistant|supervisor|employee|"
    "patient|mentor|coach|therapist|dentist|accountant|realtor|agent|contact|classmate"
)
_FIELDS = (
    "name|full name|first name|last name|surname|patient|customer|client|employee|applicant|"
    "tenant|recipient|sender|cardholder|account holder|contact|candidate|guest|passenger|"
    "student|author|attn|attention|from|to|cc|signed"
)
_CUES = re.compile(
    r"(?:\b(?:(?i:my name is|my name's|name is|i am called|call me|i'm|i am|im"
    r"|this is|dear|hi|hello|hey|named|meet with|meeting with"
    r"|speak (?:to|with)|ask for|assigned to|report to|signed by|c/o)"
    rf"|{_TITLE}"
    rf"|(?i:(?:my|our|his|her|their|your) (?:{_RELATIONS}))(?:,| is| named| called)?)"
    rf"|(?im:^\s*(?:{_FIELDS})\s*[:=]\s*[\"']?))"
    rf"[ \t]*(?:{_TITLE}[ \t]+)?{_NAME}"
)
_SIGNOFF = re.compile(  # the sign-off cue ends in a newline, so no blank is needed before the name
    r"(?im:^\s*(?:best|kind|warm)?\s*(?:regards|sincerely|thanks|thank you|cheers|best|warmly"
    rf"|yours(?: truly)?|respectfully)[,.!]?[ \t]*\n\s*(?:-\s*)?){_NAME}"
)
_BEFORE_CONTACT = re.compile(
    rf"{_NAME}(?=\s*(?:<\s*\[EMAIL\]|\(\s*\[(?:EMAIL|PHONE)\]|,?\s*\[(?:EMAIL|PHONE)\]"
    r"|'s (?:phone|email|e-mail|address|number|ssn|account|card|passport|birthday|date of birth)))"
)
_PAIR = re.compile(rf"(?<![A-Za-z0-9_'-])(?P<first>{_WORD})\s+(?:[A-Z]\.\s+)?(?P<last>{_WORD})")

_STREET = (
    r"Street|St|Avenue|Ave|Road|Rd|Boulevard|Blvd|Lane|Ln|Drive|Dr|Ct|Place|Pl|Terrace|"
    r"Way|Parkway|Pkwy|Circle|Cir|Highway|Hwy|Square|Sq|Trail|Crescent|Close|Alley|Plaza|"
    r"Loop|Pike|Walk|Gardens|Grove|Hill|Mews|Broadway"
)
_ADDRESS = re.compile(
    r"(?<![\w.,-])\d{1,6}[A-Za-z]?(?:-\d{1,4})?,?\s+"
    r"(?:(?:[NSEW]\.?|North|South|East|West)\s+)?"
    rf"(?:(?:[A-Z][A-Za-z'.-]*|\d{{1,3}}(?:st|nd|rd|th))\s+){{0,4}}(?:{_STREET})\b\.?"
    r"(?:,?\s*(?:Apt|Apartment|Suite|Ste|Unit|Flat|Floor|Fl|#)\.?\s*#?[A-Za-z0-9-]{1,6})?"
    r"(?:,\s*[A-Z][a-z]+(?:\s[A-Z][a-z]+){0,2})?"
    r"(?:,?\s*[A-Z]{2}\s+\d{5}(?:-\d{4})?|,\s*[A-Z]{2}\b|\s+[A-Z]{1,2}\d[A-Z\d]?\s\d[A-Z]{2})?"
)
_PO_BOX = re.compile(r"\b(?:P\.?\s?O\.?\s+Box|Post Office Box)\s+\d{1,6}\b", re.IGNORECASE)


@cache
def name_lists() -> tuple[frozenset[str], frozenset[str]]:
    """(first names, last names) from faker's person providers: ASCII, capitalised."""
    first: set[str] = set()
    last: set[str] = set()
    for locale in _LOCALES:
        try:
            provider = importlib.import_module(f"faker.providers.person.{locale}").Provider
        except ModuleNotFoundError:
            continue
        for attr in ("first_names", "first_names_male", "first_names_female"):
            first.update(n for n in getattr(provider, attr, ()) if _plain(n))
        last.update(n for n in getattr(provider, "last_names", ()) if _plain(n))
    return frozenset(first - _title_stop()), frozenset(last - _title_stop())


def _plain(name: str) -> bool:
    return name.isascii() and name.isalpha() and name[:1].isupper() and len(name) > 1


@cache
def _title_stop() -> frozenset[str]:
    return frozenset(w.title() for w in _STOP)


def _trim(text: str, start: int, end: int) -> Span | None:
    """Drop stopwords at either end of a name span; None when nothing is left."""
    words = list(re.finditer(r"\S+", text[start:end]))
    while words and words[0][0].lower().strip(".") in _STOP:
        words.pop(0)
    while words and words[-1][0].lower().strip(".") in _STOP:
        words.pop()
    if not words:
        return None
    return start + words[0].start(), start + words[-1].end()


def find_names(text: str) -> Iterator[Span]:
    """Yield spans of person names (rules in the module docstring)."""
    patterns = [_CUES, _SIGNOFF]
    if "[EMAIL]" in text or "[PHONE]" in text or "'s " in text:
        patterns.append(_BEFORE_CONTACT)
    for pattern in patterns:
        for m in pattern.finditer(text):
            if (span := _trim(text, *m.span("pii"))) is not None:
                yield span
    first, last = name_lists()
    for m in _PAIR.finditer(text):
        if m["first"] in first and m["last"] in last:
            yield m.span()


def find_addresses(text: str) -> Iterator[Span]:
    """Yield spans of street addresses and PO boxes."""
    for pattern in (_ADDRESS, _PO_BOX):
        for m in pattern.finditer(text):
            yield m.start(), len(m[0].rstrip(" ,")) + m.start()
