"""Write ``pii_cases_intl.jsonl``: four PII forms (international and obfuscated emails,
dates of birth, cards) in chat sentences.

Run from the repo root: ``python tests/data/make_pii_cases_intl.py`` (seed 36; the output is
committed and ``tests/curate/test_pii_intl.py`` checks that this script reproduces it). Each line is
``{"type", "text", "secret"}``. Types: ``email_intl`` (non-ASCII local part, IDN or punycode
domain, full-width ``＠``), ``email_obfuscated`` (spelled " at " / " dot ", brackets, capitals,
spaced ``@``), ``date_of_birth`` (cue word + numeric or written date, several languages) and
``card`` (grouped or plain, Luhn-valid or not, with or without a card word). Values and templates
are written here from the types, not taken from the scrubber's own examples.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

OUT_PATH = Path(__file__).with_name("pii_cases_intl.jsonl")
LOCALS = [
    "josé.núñez",
    "zoë",
    "françois.lefèvre",
    "müller.jürgen",
    "søren",
    "łukasz.wójcik",
    "ana-maría",
    "björn_k",
    "дмитрий",
    "用户",
    "たなか",
    "δημήτρης",
    "çağla.yılmaz",
    "anaïs",
]
DOMAINS = [
    "bücher.de",
    "correo.es",
    "münchen-mail.de",
    "почта.рф",
    "例子.中国",
    "xn--bcher-kva.de",
    "exämple.com",
    "ñandú.com.ar",
    "mail.co.jp",
    "gmail.com",
    "posteo.de",
    "εταιρεία.gr",
]
EMAIL_TEMPLATES = [
    "Please send the invoice to {s} before Friday.",
    "my email is {s}",
    "Contact: {s}",
    "You can reach my sister at {s}, she speaks Spanish.",
    "Write a cover letter and sign it with {s} at the bottom.",
    "Email {s} and cc me.",
    "The client ({s}) asked for a refund.",
    "Reply-To: {s}\nSubject: meeting",
]
SPELL_LOCALS = [
    ["john", "smith"],
    ["maria", "garcia"],
    ["t", "okafor"],
    ["jdoe84"],
    ["k", "lindqvist"],
    ["sam", "reyes"],
    ["nguyen", "an"],
    ["rob_b"],
    ["ella", "m", "price"],
    ["dev", "ops7"],
]
SPELL_DOMAINS = [
    ["gmail", "com"],
    ["yahoo", "co", "uk"],
    ["outlook", "com"],
    ["acme-corp", "io"],
    ["uni-bonn", "de"],
    ["protonmail", "com"],
    ["hotmail", "fr"],
    ["startup", "ai"],
]
SPELL_STYLES = [  # (join in local part, at, join in domain)
    (" dot ", " at ", " dot "),
    (".", " (at) ", " (dot) "),
    (".", " [at] ", " [dot] "),
    ("_", " AT ", " DOT "),
    (" dot ", " at ", "."),
    (".", " at ", " dot "),
    (".", " @ ", " . "),
    (".", " {at} ", " {dot} "),
    (" DOT ", " AT ", " DOT "),
    (".", " <at> ", "."),
]
SPELL_TEMPLATES = [
    "drop me a line: {s}",
    "My address is {s} if you need the files.",
    "email {s} (no spam please)",
    "Send it to {s} and I'll review it tonight.",
    "contact {s} for the booking",
]
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
DOB_TEMPLATES = [
    "My date of birth is {s}.",
    "DOB: {s}",
    "Name: [NAME], D.O.B. {s}, nationality: Irish",
    "I was born on {s} in a small town.",
    "Fill in the form: birth date {s}, gender female.",
    "My son was born {s} and weighs 4 kg now.",
    "Her birthday is {s}, can you plan a surprise?",
    "Geburtsdatum: {s}",
    "Date of birth (DD/MM/YYYY): {s}",
    "patient DOB {s}, admitted yesterday",
    "birthdate = {s}",
    "my bday is {s} lol",
]
CARD_TEMPLATES = [
    "My card number is {s}, expiry 09/27.",
    "Charge it to {s} please.",
    "Visa {s} was declined twice.",
    "here is my credit card {s} cvv 123",
    "Payment failed for {s} - what do I do?",
    "card: {s}",
    "I typed {s} into the checkout and it says invalid.",
    "debit card no. {s}",
]
PREFIXES = ["4", "51", "55", "2221", "34", "37", "6011", "65", "36", "3530", "62", "4"]


def _luhn_digit(body: str) -> str:
    total = 0
    for i, ch in enumerate(reversed(body)):
        d = int(ch)
        if i % 2 == 0:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return str(-total % 10)


def _card(rng: random.Random, i: int) -> str:
    prefix = PREFIXES[i % len(PREFIXES)]
    amex = prefix in {"34", "37"}
    length = 15 if amex else 14 if prefix == "36" else 16
    body = prefix + "".join(rng.choice("0123456789") for _ in range(length - len(prefix) - 1))
    check = _luhn_digit(body)
    if i % 3 == 2:  # a typo or a made-up number: the Luhn digit is wrong
        check = str((int(check) + 1 + rng.randrange(9)) % 10)
    number = body + check
    sep = ["", " ", "-", ".", " "][i % 5]
    if not sep:
        return number
    if amex:
        return sep.join([number[:4], number[4:10], number[10:]])
    if length == 14:
        return sep.join([number[:4], number[4:10], number[10:]])
    return sep.join(number[j : j + 4] for j in range(0, 16, 4))


def _date(rng: random.Random, i: int) -> str:
    year, month, day = rng.randrange(1935, 2015), rng.randrange(1, 13), rng.randrange(1, 29)
    forms = [
        f"{day:02d}/{month:02d}/{year}",
        f"{year}-{month:02d}-{day:02d}",
        f"{month}/{day}/{year}",
        f"{day}.{month:02d}.{year}",
        f"{day} {MONTHS[month - 1]} {year}",
        f"{MONTHS[month - 1]} {day}, {year}",
        f"{day}th of {MONTHS[month - 1]} {year}",
        f"{MONTHS[month - 1][:3]} {day} {year}",
        f"{day:02d}-{month:02d}-{year % 100:02d}",
    ]
    return forms[i % len(forms)]


def _spelled(i: int) -> str:
    local_join, at, domain_join = SPELL_STYLES[i % len(SPELL_STYLES)]
    local = local_join.join(SPELL_LOCALS[i % len(SPELL_LOCALS)])
    return local + at + domain_join.join(SPELL_DOMAINS[(i // 2) % len(SPELL_DOMAINS)])


def cases() -> list[dict]:
    rng = random.Random(36)
    out = []
    for i in range(52):
        at = "＠" if i % 13 == 5 else "@"
        secret = LOCALS[i % len(LOCALS)] + at + DOMAINS[(i * 5) % len(DOMAINS)]
        out.append(
            {
                "type": "email_intl",
                "secret": secret,
                "text": EMAIL_TEMPLATES[i % len(EMAIL_TEMPLATES)].format(s=secret),
            }
        )
    for i in range(50):
        secret = _spelled(i)
        out.append(
            {
                "type": "email_obfuscated",
                "secret": secret,
                "text": SPELL_TEMPLATES[i % len(SPELL_TEMPLATES)].format(s=secret),
            }
        )
    for i in range(54):
        secret = _date(rng, i)
        out.append(
            {
                "type": "date_of_birth",
                "secret": secret,
                "text": DOB_TEMPLATES[i % len(DOB_TEMPLATES)].format(s=secret),
            }
        )
    for i in range(60):
        secret = _card(rng, i)
        out.append(
            {
                "type": "card",
                "secret": secret,
                "text": CARD_TEMPLATES[i % len(CARD_TEMPLATES)].format(s=secret),
            }
        )
    return out


if __name__ == "__main__":
    with OUT_PATH.open("w") as f:
        for case in cases():
            f.write(json.dumps(case, ensure_ascii=False) + "\n")
