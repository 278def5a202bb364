"""Replace personal data in text by typed placeholders, counting replacements by type.

Placeholders, applied in this order (earlier patterns consume text later ones would misread; a
later rule sees the placeholders of earlier ones, e.g. a name before ``<[EMAIL]>``):

- ``[SECRET]``: API keys, tokens, JWTs, private keys and ``api_key = <value>`` assignments
  (:mod:`mimesis.data.pii_secrets`: detect-secrets' patterns plus ours).
- ``[URL_WITH_TOKEN]``: a URL of any scheme (``postgresql://``, ``https://``, ...) with
  ``user:password@`` credentials, or an http(s) URL whose query string has a secret-like key
  (token, key, api_key, secret, password, sig, auth, session, sid, code, ...) with a real-looking
  value (≥ 8 characters with a digit, or ≥ 16; not a template such as
  ``{api_key}``, ``${KEY}``, ``YOUR_API_KEY``); the whole URL is replaced.
- ``[EMAIL]``: ``local@domain.tld`` (not ``name@2x.png``-style file names).
- ``[IBAN]``: an IBAN, plain or in groups of 4, with a valid country length and mod-97 checksum
  (``python-stdnum``; the national check digits inside some BBANs are not required).
- ``[CARD]``: 13–19 digits, ungrouped or in 4-4-4-4(-3) / Amex 4-6-5 groups, with a card-network
  prefix (Visa, Mastercard, Amex, Discover, Diners, JCB) and a valid Luhn checksum.
- ``[ID_NUMBER]``: US SSN ``ddd-dd-dddd`` / ``ddd dd dddd`` with a possible area/group/serial
  (area not 000/666/9xx), or a number after an ID keyword (SSN, passport, driver's licence,
  national ID, tax ID); the keyword is kept.
- ``[PHONE]``: ``+<country> …`` with separators (groups of up to 4 digits, or 1-3 groups of up
  to 10) and 8–15 digits, E.164 ``+`` and 11–15 digits,
  or North-American ``(ddd) ddd-dddd`` / ``ddd-ddd-dddd`` / ``ddd.ddd.dddd``.
- ``[IP]``: IPv4 (octets ≤ 255) and IPv6 (≥ 4 groups), validated by ``ipaddress``. Kept:
  loopback/unspecified addresses (127.0.0.1, 0.0.0.0, ::1) and dotted quads of single digits
  (``1.2.1.3`` is far more often an outline number than a host).
- ``[ADDRESS]``, ``[NAME]``: street addresses and person names (:mod:`mimesis.data.pii_people`).

The checks (network prefix + Luhn, SSN ranges, placeholder values) favour precision, so numbers in
code and prose survive. Recall on free-form personal data is not perfect; say so in the data card.
Measured on the seeded set ``tests/data/pii_cases.jsonl`` by ``tests/test_pii_recall.py``.
"""

from __future__ import annotations

import ipaddress
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator

from stdnum import iban

from mimesis.data.pii_people import find_addresses, find_names
from mimesis.data.pii_secrets import find_secrets
from mimesis.schemas import Conversation

PLACEHOLDERS = (
    "URL_WITH_TOKEN",
    "SECRET",
    "EMAIL",
    "IBAN",
    "CARD",
    "ID_NUMBER",
    "PHONE",
    "IP",
    "ADDRESS",
    "NAME",
)
Span = tuple[int, int]

_SECRET_KEY = (
    r"(?:access_?|auth_?|api_?|id_?|refresh_?|bearer_?|session_?|private_?|client_?)?"
    r"(?:token|key|apikey|secret|password|passwd|pwd|sig|signature|auth|session|sid"
    r"|credential|code)"
)
_URL_WITH_TOKEN = re.compile(
    rf"https?://[^\s\"'<>()\[\]]+?\?[^\s\"'<>]*?\b{_SECRET_KEY}=(?P<val>[^&\s\"'<>]+)"
    r"[^\s\"'<>)\]]*(?<![.,;:!?])",
    re.IGNORECASE,
)
_URL_WITH_CREDENTIALS = re.compile(
    r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/:@\"'<>]+:[^\s/@\"'<>]+@[^\s\"'<>)\]]*(?<![.,;:!?])"
)
_TEMPLATE_VALUE = re.compile(r"^(?:[{$<\[]|(?i:%7b|your|xxx|\*\*\*))|^[A-Z_\\]+$")
_FILE_TLDS = {
    "png",
    "jpg",
    "jpeg",
    "gif",
    "svg",
    "webp",
    "ico",
    "js",
    "ts",
    "css",
    "py",
    "json",
    "html",
    "md",
    "txt",
    "pdf",
}
_EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9._%+-]+@(?:[A-Za-z0-9-]+\.)+(?P<tld>[A-Za-z]{2,})\b")
_CARD = re.compile(
    r"(?<![\d.-])(?:\d{13,19}|\d{4}([ -])\d{4}\1\d{4}\1\d{1,4}(?:\1\d{3})?"
    r"|\d{4}([ -])\d{6}\2\d{5})(?![\d-])"
)
# Issuer prefixes: Visa 4; Mastercard 51-55, 2221-2720; Amex 34, 37; Discover 6011, 644-649, 65;
# Diners 300-305, 36, 38; JCB 3528-3589.
_CARD_PREFIX = re.compile(
    r"4|5[1-5]|2(?:22[1-9]|2[3-9]\d|[3-6]\d\d|7[01]\d|720)|3[47]|6011"
    r"|64[4-9]|65|30[0-5]|3[68]|35(?:2[89]|[3-8]\d)"
)
_SSN = re.compile(r"(?<![\d-])(?!000|666|9\d\d)\d{3}([- ])(?!00)\d{2}\1(?!0000)\d{4}(?![\d-])")
_ID_KEYWORD = re.compile(
    r"(?i)\b(?:ssn|social security(?: number| no\.?)?|passport(?: number| no\.?)?|driver'?s "
    r"licen[cs]e(?: number| no\.?)?|national id(?: number)?|tax id)\s*(?:is\s*)?[:#]?\s*"
    r"(?P<pii>[A-Z0-9][A-Z0-9-]{5,})"
)
_IBAN = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b")
_PHONE = re.compile(
    r"(?<![\w+])(?:\+\d{1,3}(?:[ .-]\(?\d{1,4}\)?){2,5}|\+\d{1,3}(?:\s?\(0\)\s?\d{2,10}|(?:[ .-]\d{2,10}){1,3})|\+\d{11,15}"
    r"|\(\d{3}\) ?\d{3}[ .-]\d{4}|\d{3}([.-])\d{3}\1\d{4})(?![\w-])"
)
_IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w]|\.\d)")
_IPV6 = re.compile(r"(?<![\w:])(?:[0-9A-Fa-f]{0,4}:){3,7}[0-9A-Fa-f]{1,4}(?![\w:])")


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


def _email(m: re.Match) -> bool:
    return m["tld"].lower() not in _FILE_TLDS


def _card(m: re.Match) -> bool:
    digits = re.sub(r"\D", "", m[0])
    return bool(_CARD_PREFIX.match(digits)) and luhn_ok(digits)


def _phone(m: re.Match) -> bool:
    return 8 <= sum(c.isdigit() for c in m[0]) <= 15


def _ip(m: re.Match) -> bool:
    try:
        ip = ipaddress.ip_address(m[0])
    except ValueError:
        return False
    outline = ip.version == 4 and all(len(part) == 1 for part in m[0].split("."))
    return not (ip.is_loopback or ip.is_unspecified or outline)


def _id_number(m: re.Match) -> bool:
    return any(c.isdigit() for c in m["pii"])


def _regex(pattern: re.Pattern, accept: Callable[[re.Match], bool] | None = None):
    """A span finder for ``pattern``: its ``pii`` group if it has one, else the whole match."""
    group = "pii" if "pii" in pattern.groupindex else 0

    def find(text: str) -> Iterator[Span]:
        for m in pattern.finditer(text):
            if accept is None or accept(m):
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
    ("SECRET", find_secrets),
    ("EMAIL", _regex(_EMAIL, _email)),
    ("IBAN", _find_ibans),
    ("CARD", _regex(_CARD, _card)),
    ("ID_NUMBER", _regex(_SSN)),
    ("ID_NUMBER", _regex(_ID_KEYWORD, _id_number)),
    ("PHONE", _regex(_PHONE, _phone)),
    ("IP", _regex(_IPV4, _ip)),
    ("IP", _regex(_IPV6, _ip)),
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
