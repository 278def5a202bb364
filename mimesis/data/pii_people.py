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
- without a cue, a first name and a surname from faker's name lists, or a CSV row with both
  (rules and their precision on real chat text in :mod:`mimesis.data.pii_names`).

Addresses: a house number, 0-4 capitalised words and a street type ("221B Baker Street", "1600
Amphitheatre Pkwy, Mountain View, CA 94043"), with a unit before ("Flat 3, ...", "Unit 4/27 ...")
and a direction ("Queen St W", "Queen Street West") after it, then a run of up to five trailing
parts: units ("Apt 5B", "Level 3"), localities ("Didsbury, Manchester"), a state or province and a
US ZIP, UK postcode, Canadian postal code or Australian state + postcode; "PO Box 123" with its
city; German-style "Hauptstraße 12, 10115 Berlin". Other national formats are not covered.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from mimesis.data.pii_words import NOT_NAMES

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


def find_names(text: str) -> Iterator[Span]:
    """Yield spans of person names (rules in the module docstring)."""
    from mimesis.data.pii_names import cueless_names  # it imports this module

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
    yield from cueless_names(text)


def find_addresses(text: str) -> Iterator[Span]:
    """Yield spans of street addresses and PO boxes."""
    for pattern in (_ADDRESS, _PO_BOX, _DE_ADDRESS):
        for m in pattern.finditer(text):
            yield m.start(), len(m[0].rstrip(" ,")) + m.start()
