"""Emails in any script and spelled-out form, and dates of birth, for :mod:`mimesis.data.pii`.

- Emails: a Unicode local part and domain (``josé.núñez@correo.es``, ``用户@例子.中国``,
  ``info@xn--bcher-kva.de``, a full-width ``＠``), and the obfuscated forms
  ``john dot smith at gmail dot com``, ``j.smith (at) example (dot) org``,
  ``jane_doe AT yahoo DOT co DOT uk``, ``ann @ mail . com``. A bare lower-case " at " is an everyday
  word ("I work at google.com"), so that form needs one more sign: a spelled " dot " in the
  domain, a ``.``/``_``/digit/" dot " in the local part, or a webmail domain with a local part
  that is not an English word ("sign in at gmail.com" is kept).
- Dates of birth: a date after a cue word ("date of birth", "DOB", "born on", "birthday",
  "Geburtsdatum", "né le", "fecha de nacimiento", ...) in the same clause, in numeric
  (``14/03/1987``, ``1987-03-14``, ``14.03.87``) or written form (``14 March 1987``,
  ``March 14th, 1987``, ``14th of March 1987``); the cue word is kept. The looser cues
  ("born on", "birthday") need a full date with a 2-digit year or one from 1900 on, so history
  ("Lincoln was born on February 12, 1809") and "my birthday is on 3 May" survive.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache

Span = tuple[int, int]
# Extensions of files that look like domains in "icon@2x.png" or "pkg@1.2.js".
_FILE_EXTENSIONS = "png jpg jpeg gif svg webp ico js ts css py json html md txt pdf"
_WEBMAIL_DOMAINS = """
gmail googlemail yahoo hotmail outlook live msn aol icloud me mac protonmail proton pm gmx web
mail yandex qq 163 126 naver zoho fastmail tutanota hey orange wanadoo free libero rediffmail
seznam
"""
# TLDs that a spelled-out address ends with; a 2-letter word after " dot " is a country code.
_SPELLED_TLDS = "com org net edu gov mil int io co info biz ai dev app me us uk"
FILE_TLDS = frozenset(_FILE_EXTENSIONS.split())
_WEBMAIL = frozenset(_WEBMAIL_DOMAINS.split())
_TLDS = frozenset(_SPELLED_TLDS.split())

_EMAIL = re.compile(
    r"(?<![\w.+-])[\w.%+-]+[@＠](?:[^\W_](?:[\w-]*[^\W_])?\.)+"
    r"(?P<tld>xn--[A-Za-z0-9-]+|[^\W\d_]{2,})(?![\w-])"
)
_AT = r"(?P<at>\s*[\[(<{]\s*at\s*[\])>}]\s*|\s+(?i:at)\s+|\s+[@＠]\s+)"
_DOT = r"(?:\s*[\[(<{]\s*(?:dot|\.)\s*[\])>}]\s*|\s+(?i:dot)\s+|\s?\.\s?)"
_EMAIL_SPELLED = re.compile(
    rf"(?<![\w.+-])(?P<local>[\w%+-]+(?:{_DOT}[\w%+-]+)*){_AT}"
    rf"(?P<domain>[^\W_][\w-]*(?:{_DOT}[^\W_][\w-]*)*){_DOT}(?P<tld>[^\W\d_]{{2,6}})(?![\w-])"
)
_DOT_WORD = re.compile(r"(?i)[\[(<{]\s*(?:dot|\.)\s*[\])>}]|\sdot\s")


def emails(text: str) -> Iterator[Span]:
    """Spans of plain emails in any script (``local@domain.tld``, not ``name@2x.png``)."""
    for m in _EMAIL.finditer(text):
        if m["tld"].lower() not in FILE_TLDS:
            yield m.span()


def spelled_emails(text: str) -> Iterator[Span]:
    """Spans of obfuscated emails ("john dot smith at gmail dot com"); rules: module docstring."""
    for m in _EMAIL_SPELLED.finditer(text):
        if _spelled_email_ok(m):
            yield m.span()


def _spelled_email_ok(m: re.Match) -> bool:
    at, local, tld = m["at"].strip(), m["local"], m["tld"]
    domain_first = re.split(r"[\s.\[(<{]", m["domain"])[0].lower()
    if at != "at":  # bracketed, "AT" or a spaced "@": meant as an address
        return tld.lower() not in FILE_TLDS
    spelled_domain = bool(_DOT_WORD.search(m["domain"] + m[0][m.end("domain") - m.start() :]))
    signs = spelled_domain or bool(re.search(r"[._\d]|\sdot\s", local, re.IGNORECASE))
    if tld.lower() not in _TLDS and not (len(tld) == 2 and signs):
        return False
    return signs or domain_first in _WEBMAIL and local.lower() not in _english_words()


@cache
def _english_words() -> frozenset[str]:
    from mimesis.data.pii_names import english_words

    return english_words()


_MONTHS = (
    r"jan(?:uary|\.)?|feb(?:ruary|\.)?|mar(?:ch|\.)?|apr(?:il|\.)?|may|june?|july?|aug(?:ust|\.)?"
    r"|sep(?:t(?:ember)?)?\.?|oct(?:ober|\.)?|nov(?:ember|\.)?|dec(?:ember|\.)?"
    r"|janvier|février|mars|avril|mai|juin|juillet|août|septembre|octobre|novembre|décembre"
    r"|januar|februar|märz|juni|juli|oktober|dezember|enero|febrero|marzo|abril|mayo|junio"
    r"|julio|agosto|septiembre|octubre|noviembre|diciembre"
)
_DAY = r"(?:[0-2]?\d|3[01])(?:st|nd|rd|th|er)?"
_DATE = (
    r"(?P<date>\d{4}[-/.]\d{1,2}[-/.]\d{1,2}"  # ISO 1987-03-14
    r"|\d{1,2}[-/.]\d{1,2}[-/.](?:\d{4}|\d{2})"  # 14/03/1987, 3-14-87, 14.03.87
    rf"|{_DAY}\.?\s+(?:of\s+|de\s+)?(?:{_MONTHS})\.?,?\s+(?:de\s+)?\d{{4}}"  # 14 March 1987
    rf"|(?:{_MONTHS})\.?\s+{_DAY},?\s+\d{{4}}"  # March 14th, 1987
    rf"|{_DAY}\.?\s+(?:of\s+|de\s+)?(?:{_MONTHS})|(?:{_MONTHS})\.?\s+{_DAY}(?!\d))"  # no year
)
_DOB_CUE = re.compile(
    r"(?i:\b(?P<strong>date\s+of\s+birth|birth\s*date|d\.o\.b\.?|dob"
    r"|geburtsdatum|geboren\s+am|date\s+de\s+naissance|n[ée]e?\s+le|fecha\s+de\s+nacimiento"
    r"|nacid[oa]\s+el|data\s+di\s+nascita|nat[oa]\s+il)(?![a-z])"
    r"|\b(?P<loose>born(?:\s+on(?:\s+the)?)?|birthday|bday|b-day)\b)"
)
_DOB = re.compile(
    rf"{_DOB_CUE.pattern}(?P<gap>[^.!?\n\d]{{0,30}}?|[^\n]{{0,3}}?)(?<![\w/.-]){_DATE}(?![\w/-])",
    re.IGNORECASE,
)


def dates_of_birth(text: str) -> Iterator[Span]:
    """Spans of dates after a birth cue word (the date only; rules: module docstring)."""
    for m in _DOB.finditer(text):
        year = re.search(r"\d{4}", m["date"])
        short_year = re.fullmatch(r"\d{1,2}[-/.]\d{1,2}[-/.]\d{2}", m["date"])
        if m["strong"] or short_year or year and year[0] >= "1900":
            yield m.span("date")
