"""Replace personal data in text by typed placeholders, counting replacements by type.

Placeholders, applied in this order (earlier patterns consume text later ones would misread; a
later rule sees the placeholders of earlier ones, e.g. a name before ``<[EMAIL]>``):

- ``[SECRET]``: API keys, tokens, JWTs, private keys and ``api_key = <value>`` assignments
  (:mod:`mimesis.data.pii_secrets`: detect-secrets' patterns plus ours).
- ``[URL_WITH_TOKEN]``: a URL of any scheme (``postgresql://``, ``https://``, ...) with
  ``user:password@`` credentials (``redis://:pw@`` too), a Slack / Discord / Teams / Telegram
  webhook URL, or an http(s) / ws(s) / ftp URL whose query string has a secret-like key
  (token, key, api_key / api-key / apiKey, secret, password, sig, X-Amz-Signature, auth, session,
  sid, code, ...) with a real-looking
  value (≥ 8 characters with a digit, or ≥ 16; not a template such as
  ``{api_key}``, ``${KEY}``, ``YOUR_API_KEY``); the whole URL is replaced.
- ``[EMAIL]``: ``local@domain.tld`` in any script (``josé@bücher.de``, punycode, a full-width
  ``＠``; not ``name@2x.png``-style file names), and obfuscated forms (``name [at] domain [dot]
  com``, ``john dot smith at gmail dot com``; :mod:`mimesis.data.pii_contact`).
- ``[IBAN]``: an IBAN, plain or in groups of 4, with a valid country length and mod-97 checksum
  (``python-stdnum``; the national check digits inside some BBANs are not required).
- ``[CARD]``: 13–19 digits by pattern, ungrouped or in 4-4-4-4(-3) / Amex 4-6-5 / Diners 4-6-4
  groups of spaces, dashes or dots. Luhn is a confidence signal, not a filter: two of {card
  grouping, issuer prefix (Visa, Mastercard, Amex, Discover, Diners, JCB, UnionPay, Maestro, Mir,
  RuPay), a card word before it, a valid Luhn digit} replace it; an ungrouped run needs its prefix.
- ``[DATE_OF_BIRTH]``: a date after a birth cue word ("date of birth", "DOB", "born on",
  "Geburtsdatum", ...); the cue is kept (:mod:`mimesis.data.pii_contact`).
- ``[ID_NUMBER]``: US SSN ``ddd-dd-dddd`` / ``ddd dd dddd`` with a possible area/group/serial
  (area not 000/666/9xx), or a number after an ID keyword (SSN, passport, driver's licence,
  national ID, tax ID, NHS, Aadhaar, NI, SIN, TFN; ``:``, ``#``, ``=``, ``-`` separators), or a
  passport-shaped token later in a sentence about a passport ("passport (No. GK482913)"), or a
  value in a CSV / TSV / Markdown column whose header names an identity document
  (``passport_no``, ``SSN``, ``National ID``; not ``order_id``); the keyword is kept.
- ``[PHONE]``: ``+<country>`` or ``00<country>`` with separators (``+44 (0)161 …``) and 8–15
  digits, E.164 ``+`` and 11–15 digits, North-American ``(ddd) ddd-dddd`` / ``1-ddd-ddd-dddd`` /
  ``ddd.ddd.dddd``, national numbers with a trunk 0 and 10-11 digits (UK ``020 7946 0958``, DE
  ``030 12345678``, FR ``06 12 34 56 78``, AU ``0412 345 678``), and after a phone word ("call",
  "mobile", "tel", "WhatsApp", ...) any 9-15 digits (IN ``98765 43210``, ``4155550132``); an
  extension (``x204``, ``ext. 42``) is part of the number. A decimal (``1234567.891``,
  ``1234,56``) or a number with thousands separators (``1,234,567``) is never a phone.
- ``[IP]``: IPv4 (octets ≤ 255, any length, with its ``:port`` or ``/cidr``) and IPv6 (full,
  compressed, with an IPv4 tail or a ``%zone``), validated by ``ipaddress``. Kept: loopback /
  unspecified addresses (127.0.0.1, 0.0.0.0, ::1), dotted quads after an outline or version
  word ("section 1.2.1.3", "version 4.2.10.1", ``==``), and short IPv6-shaped slices (``a[1::2]``).
  Three-part versions (3.11.4) never match.
- ``[ADDRESS]``, ``[NAME]``: street addresses and person names (:mod:`mimesis.data.pii_people`).

The checks (network prefix + Luhn, SSN ranges, placeholder values) favour precision, so numbers in
code and prose survive. Recall on free-form personal data is not perfect; say so in the data card.
Measured on the seeded set ``tests/data/pii_cases.jsonl`` by ``tests/curate/test_pii_recall.py``.
"""

from __future__ import annotations

import ipaddress
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator

from stdnum import iban

from mimesis.data.pii_contact import dates_of_birth, emails, spelled_emails
from mimesis.data.pii_ids import find_id_columns
from mimesis.data.pii_people import find_addresses, find_names
from mimesis.data.pii_secrets import find_secrets
from mimesis.schemas import Conversation

PLACEHOLDERS = (
    "URL_WITH_TOKEN",
    "SECRET",
    "EMAIL",
    "IBAN",
    "CARD",
    "DATE_OF_BIRTH",
    "ID_NUMBER",
    "PHONE",
    "IP",
    "ADDRESS",
    "NAME",
)
Span = tuple[int, int]

_SECRET_KEY = (
    r"(?:access[_-]?|auth[_-]?|api[_-]?|id[_-]?|refresh[_-]?|bearer[_-]?|session[_-]?|private[_-]?"
    r"|client[_-]?|oauth[_-]?|app[_-]?|secret[_-]?|x-amz-|x-goog-)?"
    r"(?:token|key|apikey|secret|password|passwd|pwd|sig|signature|auth|session|sid"
    r"|credential|code)"
)
_URL_WITH_TOKEN = re.compile(
    rf"\b(?:https?|wss?|ftp)://[^\s\"'<>()\[\]]+?\?[^\s\"'<>]*?\b{_SECRET_KEY}=(?P<val>[^&\s\"'<>]+)"
    r"[^\s\"'<>)\]]*(?<![.,;:!?])",
    re.IGNORECASE,
)
_URL_WITH_CREDENTIALS = re.compile(
    r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/:@\"'<>]*:[^\s/@\"'<>]+@[^\s\"'<>)\]]*(?<![.,;:!?])"
)
# Webhook URLs carry their secret in the path (Slack, Discord, Teams / Office 365, Telegram bots).
_WEBHOOK_URL = re.compile(
    r"\bhttps?://(?:hooks\.slack\.com/(?:services|workflows)/[\w/-]{20,}"
    r"|(?:\w+\.)?discord(?:app)?\.com/api/webhooks/\d+/[\w-]{20,}"
    r"|[\w.-]+\.webhook\.office\.com/[\w@/-]{30,}"
    r"|api\.telegram\.org/bot\d+:[\w-]{30,}[^\s\"'<>]*)"
)
_TEMPLATE_VALUE = re.compile(r"^(?:[{$<\[]|(?i:%7b|your|xxx|\*\*\*))|^[A-Z_\\]+$")
# Card numbers by pattern: 13-19 digits, ungrouped or in 4-4-4-4(-3) / Amex 4-6-5 / Diners 4-6-4
# groups of spaces, dashes or dots; _card weighs the signals.
_CARD = re.compile(
    r"(?<![\d.-])(?:\d{13,19}|\d{4}([ .-])\d{4}\1\d{4}\1\d{1,4}(?:\1\d{3})?"
    r"|\d{4}([ .-])\d{6}\2\d{4,5})(?![\d-]|\.\d)"
)
# Issuer prefixes: Visa 4; Mastercard 51-55, 2221-2720; Amex 34, 37; Discover 6011, 644-649, 65;
# Diners 300-305, 36, 38; JCB 3528-3589; UnionPay 62, 81; Maestro 50, 56-58, 67; Mir 2200-2204;
# RuPay 60, 82.
_CARD_PREFIX = re.compile(
    r"4|5[1-5]|2(?:22[1-9]|2[3-9]\d|[3-6]\d\d|7[01]\d|720)|3[47]|6011"
    r"|64[4-9]|65|30[0-5]|3[68]|35(?:2[89]|[3-8]\d)|62|81|82|50|5[6-8]|67|220[0-4]|60"
)
# A card word shortly before the number ("Visa ending", "card no.", "CC#", "charge it to").
_CARD_CUE = re.compile(
    r"(?i:\b(?:cards?|credit|debit|visa|master\s?card|amex|american express|discover|maestro|jcb"
    r"|unionpay|cc|ccn|pan|cvv|cvc|payment|pay|charged?|billing)\b)"
)
_SSN = re.compile(r"(?<![\d-])(?!000|666|9\d\d)\d{3}([- ])(?!00)\d{2}\1(?!0000)\d{4}(?![\d-])")
_ID_KEYWORD = re.compile(
    r"(?i)\b(?:ssn|social security(?: number| no\.?)?|passport(?:[ _-]?(?:number|no\.?|num|#))?"
    r"|driver'?s licen[cs]e(?: number| no\.?)?|national id(?: number)?|tax id|nhs number|aadhaar"
    r"|national insurance(?: number)?|ni number|sin|tfn)\s*(?:is\s*)?[:#=-]?\s*[:#]?\s*"
    r"(?P<pii>[A-Z0-9][A-Z0-9-]{5,})"
)
# A passport-shaped token (1-3 letters and 6-9 digits, or 8-9 letters and digits with 5+ digits)
# after "passport" in the same sentence: "the passport number on the scan reads K8369854".
# The sentence may hold "No." / "Nr." / "Num." ("my Canadian passport (No. GK482913)").
_PASSPORT_NEAR = re.compile(
    r"(?i:passport)(?:[^.!?\n]|(?<=\b(?i:no|nr))\.|(?<=\b(?i:num))\.){0,40}?(?<![\w-])"
    r"(?P<pii>[A-Z]{0,3}\d{6,9}[A-Z]?|(?=(?:[A-Z]*\d){5})[A-Z0-9]{8,9})(?![\w-])"
)
_IBAN = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b")
_EXTENSION = r"(?:\s*(?:x|ext\.?|extension)\s*\d{1,5}\b)?"
_PHONE = re.compile(
    r"(?<![\w+])(?:(?:\+|00(?=[1-9]))\d{1,3}(?:\s?\(0\)\s?\d{1,5})?(?:[ .-]\(?\d{1,4}\)?){2,5}"
    r"|(?:\+|00(?=[1-9]))\d{1,3}(?:\s?\(0\)\s?\d{2,10}|\s?\(\d{1,4}\))?(?:[ .-]\d{2,10}){1,3}|\+\d{11,15}"
    r"|(?:1[ .-])?\(\d{3}\) ?\d{3}[ .-]\d{4}|(?:1([.-]))?\d{3}([.-])\d{3}\2\d{4}"
    # national numbers with a trunk 0: UK 020 7946 0958 / 07700 900123, DE 030 12345678,
    # FR 06 12 34 56 78, AU 0412 345 678 (10-11 digits, checked in _phone)
    r"|(?<!\d )0[1-9]\d{0,4}(?:[ .-]\d{2,8}){1,4}(?! \d))"
    rf"{_EXTENSION}(?![\w-])"
)
# After a phone word, any 9-15 digits with separators ("call 98765 43210", "cell 4155550132").
_PHONE_CUED = re.compile(
    r"(?i:\b(?:call|phone|tel|telephone|mobile|cell|cellphone|text|whatsapp|sms|fax|ring|dial"
    r"|number|contact|reach me|landline|handy|num[eé]ro|nummer))\b[^\d\n+]{0,15}"
    rf"(?P<pii>\+?\d[\d .()-]{{7,18}}\d{_EXTENSION})(?![\w-])"
)
# A port or CIDR suffix is part of the address ("10.0.0.5:8080", "203.0.113.7/32").
_IPV4 = re.compile(
    r"(?<![\w.])(?P<ip>(?:\d{1,3}\.){3}\d{1,3})(?![\w]|\.\d)(?::\d{1,5}\b|/\d{1,2}\b)?"
)
# Outline and version numbers look like dotted quads: "section 1.2.1.3", "version 4.2.10.1".
_NOT_IP_CUE = re.compile(
    r"(?i:\b(?:section|sections|sec|chapter|ch|step|steps|part|clause|article|art|para"
    r"|paragraph|rule|item|figure|fig|table|appendix|annex|version|ver|release|build|v|rev"
    r"|revision|assemblyversion|fileversion|§)\.?\s*|>=|<=|~=|==|\bv)$"
)
# Full and compressed IPv6, an embedded IPv4 tail and a zone ("fe80::1%eth0"), validated below.
_IPV6 = re.compile(
    r"(?<![\w:.])(?P<ip>(?=[0-9A-Fa-f]*:[0-9A-Fa-f]*:)[0-9A-Fa-f:]{2,39}"
    r"(?:\d{1,3}(?:\.\d{1,3}){3})?)(?:%[\w.-]+)?(?![\w:]|\.\w)"
)


def luhn_ok(digits: str) -> bool:
    """Luhn (mod 10) checksum of a digit string, as used by payment card numbers.

    >>> luhn_ok("4111111111111111"), luhn_ok("4111111111111112")
    (True, False)
    """
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _url_secret(m: re.Match) -> bool:
    value = m["val"]
    real = len(value) >= 8 and (any(c.isdigit() for c in value) or len(value) >= 16)
    return real and not _TEMPLATE_VALUE.search(value)


def _card(m: re.Match, text: str = "") -> bool:
    """Score a card-shaped number; Luhn adds confidence but is not required (a typo or a made-up
    number in a real request is still a card number the user meant to share).

    Signals: grouping like a card (4-4-4-4, 4-6-5), an issuer prefix, a card word in the 40
    characters before, a valid Luhn digit. Two signals, or grouping with a prefix, replace it;
    an ungrouped digit run needs its prefix (order and tracking numbers are long digit runs too).
    """
    digits = re.sub(r"\D", "", m[0])
    grouped = len(digits) != len(m[0])
    if grouped and not 13 <= len(digits) <= 19:
        return False
    prefix = bool(_CARD_PREFIX.match(digits))
    cue = bool(_CARD_CUE.search(text, max(0, m.start() - 40), m.start()))
    score = grouped + prefix + cue + luhn_ok(digits)
    if not grouped:
        return prefix and score >= 2
    return score >= 2 and (cue or prefix or digits[0] in "23456")


def _numeric_amount(text: str, start: int, end: int) -> bool:
    """The digits at ``text[start:end]`` are (part of) a decimal or a number with thousands
    separators ("1234567.891", "1234,56", "1,234,567", or plain digits next to a decimal point):
    never a phone. A comma after a number is a CSV separator as often as a thousands one."""
    number = text[start:end]
    if re.fullmatch(r"\d+\.\d+|\d+,\d{1,2}|\d{1,3}(?:,\d{3})+(?:\.\d+)?", number):
        return True
    glued = re.match(r"\.\d", text[end : end + 2]) or re.search(r"\d\.$", text[:start])
    return bool(glued) and number.isdigit()


def _phone(m: re.Match, text: str = "") -> bool:
    if _numeric_amount(text, *m.span()):
        return False
    number = re.sub(r"\s*(?:x|ext\.?|extension)\s*\d+$", "", m[0])
    digits = sum(c.isdigit() for c in number)
    if number.startswith("0") and not number.startswith("00"):
        return 10 <= digits <= 11  # a national number with its trunk 0
    return 8 <= digits <= 15


def _phone_cued(m: re.Match, text: str = "") -> bool:
    if _numeric_amount(text, *m.span("pii")):
        return False
    digits = re.sub(r"\D", "", re.sub(r"(?:x|ext\.?|extension)\s*\d+$", "", m["pii"]))
    return 9 <= len(digits) <= 15


def _ip(m: re.Match, text: str = "") -> bool:
    address = m["ip"].split("%")[0]
    if "." in address and ":" not in address:  # leading zeros ("010.001.002.003") are still IPv4
        address = ".".join(str(int(part)) for part in address.split("."))
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    if ip.is_loopback or ip.is_unspecified:
        return False
    if ip.version == 6:  # "1::2" (a numpy slice) is valid: want a 3+ digit group or 3+ groups
        groups = [g for g in re.split(r"[:.]", m["ip"].split("%")[0]) if g]
        return any(c.isdigit() for c in m["ip"]) and (
            len(groups) >= 3 or max(map(len, groups)) >= 3
        )
    return not _NOT_IP_CUE.search(text, max(0, m.start() - 16), m.start())


def _id_number(m: re.Match) -> bool:
    return any(c.isdigit() for c in m["pii"])


def _regex(pattern: re.Pattern, accept: Callable[..., bool] | None = None, context: bool = False):
    """A span finder for ``pattern``: its ``pii`` group if it has one, else the whole match.
    With ``context``, ``accept`` also gets the text (to look around the match)."""
    group = "pii" if "pii" in pattern.groupindex else 0

    def find(text: str) -> Iterator[Span]:
        for m in pattern.finditer(text):
            if accept is None or (accept(m, text) if context else accept(m)):
                yield m.span(group)

    return find


def _find_ibans(text: str) -> Iterator[Span]:
    """IBAN candidates, shortened group by group until one validates (a word may follow)."""
    for m in _IBAN.finditer(text):
        candidate = m[0]
        while len(candidate.replace(" ", "")) >= 15:
            if iban.is_valid(candidate, check_country=False):
                yield m.start(), m.start() + len(candidate)
                break
            candidate = candidate[:-1].rstrip()


_RULES: list[tuple[str, Callable[[str], Iterable[Span]]]] = [
    ("URL_WITH_TOKEN", _regex(_URL_WITH_CREDENTIALS)),
    ("URL_WITH_TOKEN", _regex(_URL_WITH_TOKEN, _url_secret)),
    ("URL_WITH_TOKEN", _regex(_WEBHOOK_URL)),
    ("SECRET", find_secrets),
    ("EMAIL", emails),
    ("EMAIL", spelled_emails),
    ("IBAN", _find_ibans),
    ("CARD", _regex(_CARD, _card, context=True)),
    ("DATE_OF_BIRTH", dates_of_birth),
    ("ID_NUMBER", _regex(_SSN)),
    ("ID_NUMBER", _regex(_ID_KEYWORD, _id_number)),
    ("ID_NUMBER", _regex(_PASSPORT_NEAR)),
    ("ID_NUMBER", find_id_columns),
    ("IP", _regex(_IPV6, _ip, context=True)),  # before phones: "2001:db8::42" has digit runs
    ("IP", _regex(_IPV4, _ip, context=True)),
    ("PHONE", _regex(_PHONE, _phone, context=True)),
    ("PHONE", _regex(_PHONE_CUED, _phone_cued, context=True)),
    ("ADDRESS", find_addresses),
    ("NAME", find_names),
]


def scrub(text: str) -> tuple[str, Counter]:
    """Replace personal data in ``text`` by ``[TYPE]`` placeholders.

    Returns:
        The scrubbed text and a Counter of replacements by type (keys from ``PLACEHOLDERS``).

    >>> scrub("mail me: ann.lee@example.org or call +1 415 555 0132")[0]
    'mail me: [EMAIL] or call [PHONE]'
    """
    counts: Counter = Counter()
    for name, find in _RULES:
        spans = _merge(find(text))
        if spans:
            text = _replace(text, spans, f"[{name}]")
            counts[name] += len(spans)
    return text, counts


def _merge(spans: Iterable[Span]) -> list[Span]:
    """Sorted, non-overlapping spans (overlapping or touching ones joined), empty ones dropped."""
    out: list[list[int]] = []
    for start, end in sorted(s for s in spans if s[1] > s[0]):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return [(a, b) for a, b in out]


def _replace(text: str, spans: list[Span], placeholder: str) -> str:
    parts, pos = [], 0
    for start, end in spans:
        parts += [text[pos:start], placeholder]
        pos = end
    parts.append(text[pos:])
    return "".join(parts)


def scrub_conversation(conv: Conversation) -> tuple[Conversation, Counter]:
    """Scrub every turn (user and assistant) of ``conv``; return a new conversation and counts."""
    counts: Counter = Counter()
    turns = []
    for turn in conv.turns:
        text, c = scrub(turn.text)
        counts.update(c)
        turns.append(turn.model_copy(update={"text": text}))
    return conv.model_copy(update={"turns": turns}), counts
