"""Write ``pii_cases.jsonl``: seeded PII/secret strings embedded in realistic chat sentences.

Run from the repo root: ``python tests/data/make_pii_cases.py`` (seed 13; the output is
committed and ``tests/curate/test_pii_recall.py`` checks that this script reproduces it). Each line is
``{"type", "text", "secret"}``; ``secret`` is the exact substring that must not survive
``mimesis.data.pii.scrub``. Names and addresses are written here by hand (not drawn from the
``faker`` lists the scrubber uses), so recall on them is not circular.
"""

from __future__ import annotations

import json
import random
import string
from pathlib import Path

from stdnum import iban as stdnum_iban

OUT_PATH = Path(__file__).with_name("pii_cases.jsonl")
B62 = string.ascii_letters + string.digits
NAMES = [
    "Priya Raman",
    "Marcus Whitfield",
    "Oluwaseun Adeyemi",
    "Hannah Kowalski",
    "Diego Alvarez",
    "Mei-Ling Chen",
    "Tomasz Nowak",
    "Aisha Rahman",
    "Liam O'Connor",
    "Sofia Rossi",
    "Kenji Watanabe",
    "Fatima Zahra Benali",
    "Ethan McAllister",
    "Ingrid Johansson",
    "Rahul Mehta",
    "Chloe Dubois",
    "Nguyen Van Minh",
    "Amara Okafor",
    "Lucas Fernandes",
    "Grace Thompson",
    "Omar Haddad",
    "Elena Petrova",
    "Jamal Washington",
    "Yuki Tanaka",
]
STREETS = [
    "742 Evergreen Terrace",
    "221B Baker Street",
    "1600 Amphitheatre Parkway",
    "17 Elm St",
    "4059 Mount Lee Drive",
    "88 Colin P Kelly Jr Street",
    "350 Fifth Avenue",
    "12 Rue Lane",
    "9 Maple Ave",
    "1208 N Main St",
    "55 Water Street",
    "301 Cedar Grove Rd",
    "76 Oak Hill Ct",
    "2100 W 3rd Avenue",
    "14 Willow Way",
    "640 Kingsbridge Blvd",
    "3 Harbour Close",
    "1012 Sunset Boulevard",
    "47 Old Mill Lane",
    "890 Pine Ridge Dr",
]
CITIES = [", Springfield, IL 62704", ", London", ", Mountain View, CA 94043", "", ", Austin, TX"]
TEMPLATES = {
    "email": [
        "Please email me at {s} if anything changes.",
        "My work address is {s}, use that.",
        "Send the signed contract to {s} by Friday.",
    ],
    "phone": [
        "You can call me on {s} after 6pm.",
        "My cell is {s}.",
        "Text {s} when you arrive at the gate.",
    ],
    "credit_card": [
        "My card number is {s}, expiry 09/27.",
        "Charge {s} for the deposit please.",
        "I paid with {s} and it was declined.",
    ],
    "ssn": [
        "My SSN is {s}, is it safe to put on the form?",
        "The form shows {s} as my number.",
        "Social security: {s}.",
    ],
    "passport": [
        "My passport number: {s}, issued last year.",
        "passport no. {s} expires soon.",
        "Here is my passport number {s} for the booking.",
    ],
    "ipv4": [
        "Our server at {s} keeps timing out.",
        "I can't ssh into {s} since yesterday.",
        "The firewall blocks {s} on port 443.",
    ],
    "ipv6": ["The host {s} does not answer pings.", "Whitelist {s} in the config please."],
    "iban": [
        "My IBAN is {s}, please wire the refund there.",
        "Bank details: {s} (Deutsche Bank).",
        "Transfer the rent to {s} before the 1st.",
    ],
    "url_credentials": [
        "The connection string is {s} but it fails.",
        "I set DATABASE_URL={s} in my .env file.",
        "Clone from {s} please.",
    ],
    "url_token": ["The callback is {s} and it returns 401.", "Open {s} to see the report."],
    "openai_key": [
        "Here is my OpenAI key {s}, why does it say quota exceeded?",
        'openai.api_key = "{s}"',
        "I exported OPENAI_API_KEY={s} but it fails.",
    ],
    "openai_project_key": [
        "My new key is {s} and the SDK rejects it.",
        'client = OpenAI(api_key="{s}")',
        "Using {s} gives 401 errors.",
    ],
    "github_token": [
        "git push fails with token {s}, what scope do I need?",
        "I put {s} in the Authorization header.",
        "export GITHUB_TOKEN={s}",
    ],
    "aws_access_key": [
        "My access key id is {s} and the secret is in a file.",
        "aws configure set aws_access_key_id {s}",
        "Is {s} a root key?",
    ],
    "google_api_key": [
        "The Maps key {s} stopped working today.",
        "Embed it with libraries=places and key {s} in the script tag.",
        "GOOGLE_API_KEY = '{s}'",
    ],
    "slack_token": [
        "Our bot token is {s}, the bot can't post.",
        "SLACK_BOT_TOKEN={s}",
        "curl -H 'Authorization: {s}' slack.com/api",
    ],
    "stripe_key": ["stripe.api_key = '{s}'", "Is it safe to share {s} with my developer?"],
    "jwt": [
        "The API returns 403 for this token: {s}",
        "Authorization: Bearer {s}",
        "Decode {s} for me please.",
    ],
    "private_key": [
        "Here is my deploy key, why is it rejected?\n{s}\nThanks.",
        "id_rsa contents:\n{s}",
    ],
    "secret_assignment": [
        "In settings.py I have SECRET_KEY = '{s}' is that ok?",
        "config: api_key: {s}",
        'const token = "{s}";',
        "client_secret={s} in the request body",
    ],
    "street_address": [
        "I live at {s}, can you find a pharmacy nearby?",
        "Ship the parcel to {s} please.",
        "Our office moved to {s} last month.",
        "The venue is {s}; parking is behind it.",
    ],
    "person_name": [
        "Hi, my name is {s} and I need help with my visa.",
        "Dear {s},\nThank you for your patience.",
        "Please write a reference for my colleague {s}.",
        "Best regards,\n{s}",
        "Can you draft an email to {s} <[EMAIL]> about the invoice?",
        "My landlord {s} won't return the deposit.",
        "I'm {s}, a nurse from Leeds.",
        "Name: {s}\nRole: analyst",
        "Meeting with Dr. {s} moved to Thursday.",
        "Write a birthday poem for {s}.",
    ],
}


def _rand(rng: random.Random, n: int, alphabet: str = B62) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _luhn_complete(prefix: str, length: int, rng: random.Random) -> str:
    body = prefix + "".join(rng.choice(string.digits) for _ in range(length - len(prefix) - 1))
    for check in string.digits:
        digits = body + check
        total = sum(
            (int(d) * 2 - 9 if int(d) * 2 > 9 else int(d) * 2) if i % 2 else int(d)
            for i, d in enumerate(reversed(digits))
        )
        if total % 10 == 0:
            return digits
    raise AssertionError("unreachable")


def _b64url(rng: random.Random, n: int) -> str:
    return _rand(rng, n, B62 + "-_")


def _value(kind: str, i: int, rng: random.Random) -> str:
    if kind == "email":
        user = rng.choice(["ann.lee", "m.whitfield", "priya_r", "jdoe1987", "oluwa+shop"])
        return f"{user}@{rng.choice(['gmail.com', 'example.org', 'uni-leeds.ac.uk', 'corp.io'])}"
    if kind == "phone":
        fmt = rng.choice(
            [
                "+1 415 555 {a}",
                "(212) 555-{a}",
                "+44 20 7946 {a}",
                "617-555-{a}",
                "+49 30 1234{a}",
                "+91 98765 4{a}",
            ]
        )
        return fmt.format(a=f"{rng.randrange(10000):04d}")
    if kind == "credit_card":
        prefix, n = rng.choice([("4", 16), ("51", 16), ("37", 15), ("6011", 16), ("2221", 16)])
        digits = _luhn_complete(prefix + str(rng.randrange(10)), n, rng)
        if n == 16 and i % 2:
            return " ".join(digits[k : k + 4] for k in range(0, 16, 4))
        return digits
    if kind == "ssn":
        return f"{rng.randrange(100, 665):03d}-{rng.randrange(10, 99)}-{rng.randrange(1000, 9999)}"
    if kind == "passport":
        return rng.choice(string.ascii_uppercase) + f"{rng.randrange(10**7, 10**8)}"
    if kind == "ipv4":
        return (
            f"{rng.choice([34, 52, 81, 91, 145, 185, 203])}.{rng.randrange(256)}."
            f"{rng.randrange(256)}.{rng.randrange(1, 255)}"
        )
    if kind == "ipv6":
        return "2001:db8:" + ":".join(f"{rng.randrange(65536):x}" for _ in range(4)) + "::1"
    if kind == "iban":
        country, bban = rng.choice([("DE", 18), ("GB", 18), ("FR", 23), ("NL", 14), ("ES", 20)])
        body = (
            _rand(rng, 4, string.ascii_uppercase) + _rand(rng, bban - 4, string.digits)
            if country in ("GB", "NL")
            else _rand(rng, bban, string.digits)
        )
        number = country + stdnum_iban.calc_check_digits(country + "00" + body) + body
        return stdnum_iban.format(number) if i % 2 else number
    if kind == "url_credentials":
        scheme = rng.choice(["postgresql", "mysql", "mongodb+srv", "https", "redis"])
        return f"{scheme}://admin:{_rand(rng, 12)}@db{i}.example.com:5432/app"
    if kind == "url_token":
        key = rng.choice(["access_token", "api_key", "token", "sig", "key"])
        return f"https://api.example.com/v2/reports?id={i}&{key}={_rand(rng, 24)}"
    if kind == "openai_key":
        return (
            "sk-" + _rand(rng, 20) + "T3BlbkFJ" + _rand(rng, 20)
            if i % 2
            else "sk-" + _rand(rng, 48)
        )
    if kind == "openai_project_key":
        return "sk-proj-" + _b64url(rng, 74) + "T3BlbkFJ" + _b64url(rng, 74)
    if kind == "github_token":
        return (
            rng.choice(["ghp_", "gho_", "ghs_"]) + _rand(rng, 36)
            if i % 3
            else "github_pat_11" + _rand(rng, 20) + "_" + _rand(rng, 59)
        )
    if kind == "aws_access_key":
        return rng.choice(["AKIA", "ASIA"]) + _rand(rng, 16, string.ascii_uppercase + "234567")
    if kind == "google_api_key":
        return "AIza" + _b64url(rng, 35)
    if kind == "slack_token":
        mid = f"{rng.randrange(10**11, 10**12)}-{rng.randrange(10**11, 10**12)}"
        return f"{rng.choice(['xoxb', 'xoxp', 'xoxa'])}-{mid}-{_rand(rng, 24)}"
    if kind == "stripe_key":
        return rng.choice(["sk_live_", "rk_live_", "sk_test_"]) + _rand(rng, 24)
    if kind == "jwt":
        payload = _b64url(rng, 40)
        return f"eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ{payload}.{_b64url(rng, 43)}"
    if kind == "private_key":
        lines = "\n".join(_rand(rng, 64, B62 + "+/") for _ in range(4))
        return f"-----BEGIN RSA PRIVATE KEY-----\n{lines}\n-----END RSA PRIVATE KEY-----"
    if kind == "secret_assignment":
        return _rand(rng, rng.randrange(24, 41), B62 + "_-")
    if kind == "street_address":
        return STREETS[i % len(STREETS)] + CITIES[i % len(CITIES)]
    if kind == "person_name":
        return NAMES[i % len(NAMES)]
    raise ValueError(kind)


COUNTS = {"person_name": 20, "street_address": 20}  # the hardest types get more cases


def cases(seed: int = 13) -> list[dict]:
    """The seeded cases: 10 per type (20 for names and addresses), templates in rotation."""
    rng = random.Random(seed)
    out = []
    for kind, templates in TEMPLATES.items():
        for i in range(COUNTS.get(kind, 10)):
            secret = _value(kind, i, rng)
            out.append(
                {
                    "type": kind,
                    "text": templates[i % len(templates)].format(s=secret),
                    "secret": secret,
                }
            )
    return out


if __name__ == "__main__":
    rows = cases()
    OUT_PATH.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    print(f"{len(rows)} cases, {len({r['type'] for r in rows})} types -> {OUT_PATH}")
