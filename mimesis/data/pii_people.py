"""Find person names and street addresses in free text (our recognisers; no NER model).

Names, three ways (a name is 1-4 capitalised words, ``O'Brien``, ``McAdams``, ``Jean-Luc``,
``Delacroix-Martin``, ``Min-jun``,
Latin accents (``José Martínez``), ``van``/``de``/``bin`` particles and middle initials allowed; a
stoplist keeps "Dear Sir", "Hi There", weekdays, months, "ChatGPT", ...):

- after a personal cue: "my name is", "I'm", "call me", "Dear", "Hi", a sign-off line
  ("Regards,"), a title (Mr, Mrs, Ms, Dr, Prof), a relation ("my wife", "my former intern", "our
  landlord"; without a possessive, "the intern Nguyen Thi Lan", 2-4 words in either order), a field
  ("Name:", "Patient:"), "named", or before ``<[EMAIL]>`` / ``'s phone`` ("called" is not a cue:
  on ShareGPT it names books, bars and brands more often than people);
- without a cue, a first name followed by a surname-shaped word, using the person-name lists of
  the ``faker`` package (all its locales, Latin script): a known first name before a capitalised
  word that is not an English word, place or product (:mod:`mimesis.data.pii_words`), or an
  unknown capitalised word before a known surname ("Chidi Okonkwo"); up to two more surname
  words follow ("Rajesh Kumar Sharma"). First names that are everyday words ("Will", "Mark",
  "Ruby") need a known surname and no sentence start. Public figures, brands and places shaped
  like names ("Abraham Lincoln", "Morgan Stanley", "Santa Clara") are kept: questions about them
  are ordinary content, and the rule exists to catch private people;
- in CSV / TSV rows, a known first name field next to a surname field (``17,Chiamaka,Eze``).

Addresses: a house number, 0-4 capitalised words and a street type ("221B Baker Street", "1600
Amphitheatre Pkwy, Mountain View, CA 94043"), with a unit before ("Flat 3, ...", "Unit 4/27 ...")
and a direction ("Queen St W", "Queen Street West") after it, then a run of up to five trailing
parts: units ("Apt 5B", "Level 3"), localities ("Didsbury, Manchester"), a state or province and a
US ZIP, UK postcode, Canadian postal code or Australian state + postcode; "PO Box 123" with its
city; German-style "Hauptstraße 12, 10115 Berlin". Other national formats are not covered.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Iterator
from functools import cache

from mimesis.data.pii_words import AMBIGUOUS_FIRST, NOT_NAMES, public_figures

Span = tuple[int, int]
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
support sales marketing staff department office family crew service services admin administrator
"""
_STOP = frozenset(_STOP_WORDS.split())
# Latin letters with accents (Latin-1 and Latin Extended-A), so "José Martínez" is one name.
_UP = "A-ZÀ-ÖØ-ÞĀ-ž"
_LOW = "a-zß-öø-ÿĀ-ž"
_PART = rf"[{_UP}][{_LOW}]+"
_WORD = (
    # "Jean-Luc", "Delacroix-Martin", "Min-jun" (a Korean given name)
    rf"(?:(?:Mc|Mac|O'|D'|De|Di|La|Le)?{_PART}(?:-(?:O'|Mc)?{_PART}){{0,2}}(?:-[{_LOW}]{{2,}})?"
    rf"(?![{_UP}{_LOW}0-9_'-]))"
)
_PARTICLE = r"(?:(?:van|von|de|da|del|der|di|du|le|la|bin|ibn|al|dos|das)\s+)"
_TITLE = r"(?:Mr|Mrs|Ms|Miss|Mx|Dr|Prof|Sir|Madam)\.?"
_NAME = rf"(?P<pii>{_WORD}(?:\s+(?:[A-Z]\.\s+)?{_PARTICLE}?{_WORD}){{0,3}})"
_RELATIONS = (
    "wife|husband|partner|son|daughter|mom|mum|mother|dad|father|brother|sister|friend|boss|"
    "manager|colleague|coworker|co-worker|client|customer|tenant|landlord|landlady|neighbou?r|"
    "teacher|student|doctor|lawyer|boyfriend|girlfriend|fianc[ée]e?|grandma|grandmother|grandpa|"
    "grandfather|aunt|uncle|cousin|niece|nephew|roommate|flatmate|assistant|supervisor|employee|"
    "patient|mentor|coach|therapist|dentist|accountant|realtor|agent|contact|classmate|new hire|"
    "intern|recruiter|tutor|nanny|caregiver|guest|son-in-law|daughter-in-law|ex"
)
_FIELDS = (
    "name|full name|first name|last name|surname|patient|customer|client|employee|applicant|"
    "tenant|recipient|sender|cardholder|account holder|contact|candidate|guest|passenger|"
    "student|author|attn|attention|from|to|cc|bcc|signed|owner|assignee|reviewer|requester"
)
_CUES = re.compile(
    r"(?:\b(?:(?i:my name is|my name's|name is|i am called|call me|i'm|i am|im"
    r"|this is|dear|hi|hello|hey|named|meet with|meeting with"
    r"|speak (?:to|with)|ask for|assigned to|report to|signed by|c/o)"
    rf"|{_TITLE}"
    # "my former intern", "our new lead tenant": up to two words before the relation
    rf"|(?i:(?:my|our|his|her|their|your)\s+(?:[a-z]+\s+){{0,2}}?(?:{_RELATIONS})\b)"
    r"(?:,| is| named| called)?)"
    rf"|(?im:^\s*(?:{_FIELDS})\s*[:=]\s*[\"']?))"
    rf"[ \t]*(?:{_TITLE}[ \t]+)?{_NAME}"
)
# A relation word without a possessive, before two to four capitalised words: "the intern Nguyen
# Thi Lan", "client Maria Lopez Garcia", "colleague Okafor Chinedu" (either name order).
_RELATION_BARE = re.compile(
    rf"\b(?:{_RELATIONS})\b[,:]?[ \t]+"
    rf"(?P<pii>{_WORD}(?:\s+(?:[A-Z]\.\s+)?{_PARTICLE}?{_WORD}){{1,3}})"
)
_SIGNOFF = re.compile(  # the sign-off cue ends in a newline, so no blank is needed before the name
    r"(?im:^\s*(?:best|kind|warm)?\s*(?:regards|sincerely|thanks|thank you|cheers|best|warmly"
    rf"|yours(?: truly)?|respectfully)[,.!]?[ \t]*\n\s*(?:-\s*)?){_NAME}"
)
_BEFORE_CONTACT = re.compile(
    rf"{_NAME}(?=\s*(?:<\s*\[EMAIL\]|\(\s*\[(?:EMAIL|PHONE)\]|,?\s*\[(?:EMAIL|PHONE)\]"
    r"|'s (?:phone|email|e-mail|address|number|ssn|account|card|passport|birthday|date of birth)))"
)
# A first word, an optional middle initial, and one to three surname words.
_PAIR = re.compile(
    rf"(?<![{_UP}{_LOW}0-9_'.-])(?P<first>{_WORD})\s+(?:[A-Z]\.\s+)?(?P<last>{_WORD})"
    rf"(?P<more>(?:\s+{_WORD}){{0,2}})"
)
# CSV / TSV / table rows: first-name field, surname field.
_CSV_PAIR = re.compile(
    rf"(?m)(?:^|(?<=[,\t|;]))[ \t]*(?P<first>{_WORD})[ \t]*[,\t|;][ \t]*(?P<last>{_WORD})"
    r"[ \t]*(?=[,\t|;]|$)"
)
_SENTENCE_START = re.compile(r"(?:^|[.!?:;\n]\s*|[\"'(\[]\s*)$")

_STREET = (
    r"Street|St|Avenue|Ave|Road|Rd|Boulevard|Blvd|Lane|Ln|Drive|Dr|Court|Ct|Place|Pl|Terrace|"
    r"Way|Parkway|Pkwy|Circle|Cir|Highway|Hwy|Square|Sq|Trail|Trl|Crescent|Cres|Close|Alley|"
    r"Plaza|Loop|Pike|Walk|Gardens|Grove|Hill|Mews|Broadway|Row|Parade|Esplanade|Quay|Rise|"
    r"Heights|Ridge|Run|Path|Crossing|Landing|Green|Commons|Promenade|Wharf|Expressway|Fwy|Freeway"
)
_UNIT = (
    r"(?:Apt|Apartment|Suite|Ste|Unit|Flat|Floor|Fl|Level|Lvl|Room|Rm|Bldg|Building|Block|#)"
    r"\.?\s*#?[A-Za-z0-9-]{1,6}"
)
_CITY = r"[A-Z][a-zé'.-]+(?:\s[A-Z][a-zé'.-]+){0,2}"
_REGION = (
    r"(?:[A-Z]{2}\s+\d{5}(?:-\d{4})?"  # US state + ZIP
    r"|(?:[A-Z]{2}\s+)?[A-Z]\d[A-Z]\s?\d[A-Z]\d"  # Canadian (province +) postal code
    r"|(?:VIC|NSW|QLD|WA|SA|TAS|ACT|NT)\s+\d{4}"  # Australian state + postcode
    r"|[A-Z]{1,2}\d[A-Z\d]?\s\d[A-Z]{2}"  # UK postcode
    r"|\d{5}(?:-\d{4})?"  # a bare ZIP
    r"|[A-Z]{2})\b"
)
# After the street, any run of trailing parts: a unit, localities, a region or postcode, each
# after a comma or (a unit, a postcode, one first locality) a blank: "88 Queen Street West, Unit
# 1204, Toronto, ON M5H 2N2", "27 Hawthorn Road, Didsbury, Manchester M20 6RT".
_ADDRESS_TAIL = (
    rf"(?:,?\s*{_UNIT})?(?:,?\s*{_CITY})?"
    rf"(?:(?:,\s*|\s+)(?:{_UNIT}|{_REGION})|,\s*{_CITY}){{0,5}}"
)
_ADDRESS = re.compile(
    rf"(?<![\w.,/-])(?:{_UNIT}(?:,\s*|\s*/\s*|\s+))?"  # "Flat 3, 14 ...", "Unit 4/27 ..."
    r"\d{1,6}[A-Za-z]?(?:-\d{1,4})?,?\s+"
    r"(?:(?:[NSEW]\.?|North|South|East|West)\s+)?"
    rf"(?:(?:[A-Z][A-Za-z'.-]*|\d{{1,3}}(?:st|nd|rd|th))\s+){{0,4}}(?:{_STREET})\b\.?"
    r"(?:\s+(?:[NS][EW]?|[EW]|(?:North|South)(?:east|west)?|East|West)\b\.?)?"
    rf"{_ADDRESS_TAIL}"
)
_PO_BOX = re.compile(
    rf"\b(?:P\.?\s?O\.?\s+Box|Post Office Box)\s+\d{{1,6}}\b(?:,\s*{_CITY})?"
    r"(?:,?\s*[A-Z]{2}\s+\d{5}(?:-\d{4})?)?",
    re.IGNORECASE,
)
# German, Austrian, Swiss: "Hauptstraße 12, 10115 Berlin", "Lindenweg 3a".
_DE_ADDRESS = re.compile(
    r"\b[A-ZÄÖÜ][a-zäöüß]+(?:straße|strasse|str\.|weg|allee|platz|gasse|ring|damm)"
    r"\s+\d{1,4}[a-z]?(?:,\s*\d{4,5}\s+[A-ZÄÖÜ][a-zäöüß]+)?"
)


@cache
def name_lists() -> tuple[frozenset[str], frozenset[str]]:
    """(first names, last names) from all of faker's person providers, Latin script."""
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
    common = _common_words()
    return (
        frozenset(n for n in first if n.lower() not in common and len(n) > 2),
        frozenset(n for n in last if n.lower() not in common),
    )


def _plain(name: str) -> bool:
    return re.fullmatch(_PART, name) is not None


@cache
def _common_words() -> frozenset[str]:
    """Lowercased words that are not surnames: ours, faker's English words, states, countries."""
    from faker.providers.address.en import Provider as Address
    from faker.providers.address.en_US import Provider as UsAddress
    from faker.providers.lorem.en_US import Provider as Lorem

    words = set(NOT_NAMES) | _STOP | {w.lower() for w in Lorem.word_list}
    for place in (*Address.countries, *UsAddress.states):
        words.update(place.lower().split())
    return frozenset(words)


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
    return frozenset(out)


def _trim(text: str, start: int, end: int) -> Span | None:
    """Drop stopwords at either end of a name span; None when nothing is left."""
    words = list(re.finditer(r"\S+", text[start:end]))
    if words and words[0][0] == "The":  # "The Support Team": an organisation, not a person
        return None
    while words and words[0][0].lower().strip(".") in _STOP:
        words.pop(0)
    while words and words[-1][0].lower().strip(".") in _STOP:
        words.pop()
    if not words:
        return None
    return start + words[0].start(), start + words[-1].end()


def _surname(word: str, first_known: bool) -> bool:
    """``word`` can be a surname: a known one, or (after a known first name) any non-word; a
    double-barrelled one ("Delacroix-Martin") when each part can be."""
    if "-" in word:
        return all(_surname(part, first_known) for part in word.split("-"))
    parts = word.replace("'", "-").split("-")
    common = _common_words()
    # plurals too: "Mountains", "Rockets"
    if any(p.lower() in common or p.lower()[:-1] in common for p in parts if len(p) > 2):
        return word in _core_last() and word.lower() not in NOT_NAMES
    return first_known or word in name_lists()[1]


def _known_last(word: str) -> bool:
    """A surname in faker's lists, or a double-barrelled one whose parts all are."""
    last_names = name_lists()[1]
    return word in last_names or ("-" in word and all(p in last_names for p in word.split("-")))


def _pair_span(text: str, m: re.Match) -> Span | None:
    """The span of a cue-less "First Last" match, or None (rules in the module docstring)."""
    first_names = name_lists()[0]
    first, last = m["first"], m["last"]
    ambiguous = first.lower() in AMBIGUOUS_FIRST
    known = not ambiguous and any(p in first_names for p in first.split("-"))
    if first.lower() in _common_words() and not ambiguous:
        return None
    if ambiguous:
        at_start = _SENTENCE_START.search(text, 0, m.start()) is not None
        if at_start or last not in _core_last():
            return None
    elif not known and not (_known_last(last) and _surname(last, False)):
        return None
    if not _surname(last, known) or f"{first} {last}" in public_figures():
        return None
    end = m.end("last")
    for extra in re.finditer(r"\S+", m["more"]):  # "Rajesh Kumar Sharma"
        if not _surname(extra[0], known):
            break
        end = m.start("more") + extra.end()
    return m.start(), end


def find_names(text: str) -> Iterator[Span]:
    """Yield spans of person names (rules in the module docstring)."""
    patterns = [_CUES, _SIGNOFF]
    if "[EMAIL]" in text or "[PHONE]" in text or "'s " in text:
        patterns.append(_BEFORE_CONTACT)
    for pattern in patterns:
        for m in pattern.finditer(text):
            if (span := _trim(text, *m.span("pii"))) is not None:
                yield span
    for m in _RELATION_BARE.finditer(text):
        words = m["pii"].split()
        if not any(w.lower().strip(".") in _STOP or w.lower() in NOT_NAMES for w in words):
            yield m.span("pii")
    for m in _PAIR.finditer(text):
        if (span := _pair_span(text, m)) is not None:
            yield span
    if "," in text or "\t" in text or "|" in text:
        first_names = name_lists()[0]
        for m in _CSV_PAIR.finditer(text):
            if m["first"] in first_names and _surname(m["last"], True):
                yield m.span("first")
                yield m.span("last")


def find_addresses(text: str) -> Iterator[Span]:
    """Yield spans of street addresses and PO boxes."""
    for pattern in (_ADDRESS, _PO_BOX, _DE_ADDRESS):
        for m in pattern.finditer(text):
            yield m.start(), len(m[0].rstrip(" ,")) + m.start()
