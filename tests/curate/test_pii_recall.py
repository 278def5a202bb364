"""PII/secret recall on the seeded set ``tests/data/pii_cases.jsonl`` and on the hand-written dev
set ``tests/data/pii_cases_dev.jsonl`` (other phrasings and national formats: UK/DE/FR/IN/AU
phones, single-digit IPv4, compressed IPv6, short passwords in .env/YAML/JSON/CLI, names without
a cue word, CA/UK/AU/DE addresses), and false positives on ordinary text (secrets must not
survive the scrubber).

``tests/data/pii_cases_blind.jsonl`` (132 cases, 22 types x 6) and
``tests/data/pii_ordinary_blind.jsonl`` (60 texts without personal data) were written by a
separate author who did not read the scrubber. Its first pass, on commit 6072ec0, scored 0.955
overall (street_address, person_name and passport 0.67 each, every other type 1.0) with 1 false
positive (a decimal number after "number" read as a phone). The misses were then fixed, as classes
(address tails with unit / locality / postcode, hyphenated names, relation cue words, "passport
(No. ...)" and ID-named CSV columns, decimals are never phones), so the set is no longer blind:
it is a regression test now, not an unbiased estimate of recall."""

from __future__ import annotations

import importlib.util
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from mimesis.data.pii import scrub

DATA_DIR = Path(__file__).parents[1] / "data"
# Parts of a secret that are not identifying on their own (street types, PEM armour).
_GENERIC = {"street", "st", "avenue", "ave", "road", "rd", "boulevard", "blvd", "lane", "drive",
            "dr", "ct", "terrace", "parkway", "way", "close", "grove", "hill", "mount", "main",
            "begin", "end", "rsa", "private", "key", "jr"}  # fmt: skip
ORDINARY = [  # chat and code without personal data: nothing may be replaced
    "Can you explain the difference between TCP and UDP in simple terms?",
    "Write a haiku about autumn leaves falling on a quiet pond.",
    "git commit -m 'fix' && git push origin main  # sha 3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39",
    "import torch\nmodel = AutoModel.from_pretrained('bert-base-uncased')\ntokens = tokenizer(text)",
    "uuid 123e4567-e89b-12d3-a456-426614174000 and version 2.14.4 released 2023-03-15",
    "The Treaty of Versailles was signed in 1919 after the First World War ended.",
    "for i in range(10):\n    print(f'step {i}: loss={loss:.4f}')",
    "Our revenue grew 12.5% to $4,300,000 in Q3; EBITDA was 1,250,000.",
    "Use the Python requests library: response = requests.get(url, timeout=30)",
    "max_tokens = 4096\ntemperature = 0.7\nsecret_sauce = compute_recipe(ingredients, steps)",
    "token = tokenizer.batch_decode(outputs, skip_special_tokens=True)",
    "password = request.form['password']\napi_key = os.environ['OPENAI_API_KEY']",
    "The base64 of 'hello' is aGVsbG8= and its sha256 starts with 2cf24dba5fb0a30e.",
    "Set the key to YOUR_API_KEY_HERE_REPLACE_ME_1234 in config.yaml before running.",
    "Dear Sir or Madam, I am writing to apply for the position of data analyst.",
    "Hi there! Could you translate this paragraph into Spanish for me?",
    "Thanks for your help yesterday, the script works now.",
    "The meeting is on Monday at 10:30 in room 4B, building 7.",
    "My order #A1234567 arrived damaged; the tracking code was 1Z999AA10123456784.",
    "Explain sk-learn pipelines and the difference between fit and fit_transform.",
]

# Ordinary text that looks like personal data: public figures (kept by choice, see
# mimesis.data.pii_words), places and brands shaped like names, versions, hashes, code that reads
# secrets from the environment, placeholders, and prose about passwords and phone numbers.
ORDINARY_DEV = [
    "Who was Abraham Lincoln and why is he famous?",
    "Explain Marie Curie's contribution to the study of radioactivity.",
    "In 1969 Neil Armstrong walked on the moon; Buzz Aldrin followed him.",
    "Martin Luther King Jr. gave the I Have a Dream speech in Washington.",
    "Grace Hopper and Ada Lovelace are pioneers of programming.",
    "What's the weather like in San Francisco and Santa Clara in May?",
    "The Jordan River flows into the Dead Sea.",
    "Victoria Station is a short walk from Buckingham Palace.",
    "Morgan Stanley and Goldman Sachs reported earnings this week.",
    "Is Ruby on Rails still relevant in 2024, or should I learn Julia?",
    "Will Python 3.12 support this syntax?",
    "Mark the task as done and move on to the next one.",
    "Compare the iPhone 15 Pro with the Samsung Galaxy S24 Ultra.",
    "Python 3.11.4 and Node 18.17.1 are installed; pip 23.2.1 too.",
    "Windows build 10.0.19045.3693 breaks the driver; see section 4.1.2.3 of the manual.",
    "Pin requests==2.31.0.1 and bump the version 4.2.10.1 in setup.cfg.",
    "Use color #1e90ff for links and #FFF for the background.",
    "The commit a94a8fe5ccb19ba61c4c0873d391e987982fbbd3 broke the build.",
    "UUID: 550e8400-e29b-41d4-a716-446655440000",
    "It costs $1,299.99 or 1.199,00 EUR in Germany; the meeting is on 12/03/2024 at 14:30.",
    "api_key = os.getenv('STRIPE_API_KEY')",
    "password = getpass.getpass('Password: ')",
    "const token = process.env.GITHUB_TOKEN;",
    "Replace YOUR_API_KEY with the key: curl -H 'Authorization: Bearer YOUR_API_KEY' $URL",
    "export OPENAI_API_KEY=<your-key-here>",
    "db:\n  password: ${DB_PASSWORD}\n  user: app",
    "Set PASSWORD=changeme for local dev only.",
    "password = models.CharField(max_length=128)\nhashed = sha256(password)",
    'form = {"username": user, "password": pw}',
    "docker run -p 8080:80 -p 443:443 nginx && ssh -p 2222 deploy@host",
    "My password is too weak, how do I make a stronger one?",
    "The password must be at least 12 characters long.",
    "Enter your password: ********",
    "UK mobile numbers start with 07 and have 11 digits.",
    "numpy slicing a[1::2] and std::vector<int> in C++",
    "Order 1Z999AA10123456784 shipped; ISBN 978-3-16-148410-0.",
    "The population grew from 1,234,567 to 2,345,678 between 2010 and 2020.",
    "Listen on 0.0.0.0:8000 and proxy to 127.0.0.1:5000.",
    "train_test_split(X, y, test_size=0.2, random_state=42)",
    "The key insight is that the token embedding is shared.",
    "Set max_tokens: 2048 and secret_name: prod-db-credentials in the YAML.",
    "ISO date 2024-03-15T10:30:00Z and unix time 1710498600",
    "Dear Hiring Manager,\nI am excited to apply for the role.",
    "Regards,\nThe Support Team",
    "Visit New York, Los Angeles and Rio de Janeiro this summer.",
    "Jack Russell terriers and Harley Davidson motorcycles are both loud.",
    "Claude Sonnet and Gemini Pro were compared on coding tasks.",
    "Step 3.2.1.4: restart the service and check the logs.",
]
# False positives of the cue-less name rule on real ShareGPT turns (branch pii3; the rules and
# their measured precision are in mimesis.data.pii_names).
ORDINARY_SHAREGPT = [
    'ser.write(b"Hello from Raspberry Pi")',
    "Here is how you could use Sonic Pi to generate a more structured melody.",
    "how to become an Alpha Male 2.0, the superior man who is strong",
    "Rome | Visit the Roman Forum | Explore the Piazza Navona",
    "1. Email marketing platforms such as Mailchimp, Constant Contact, and ConvertKit",
    '4. "A Golden Hedge: Examining Its Potential to Reduce Portfolio Risk"',
    "* Hydrogen Bond Acceptor Count: 8\n* Rotatable Bond Count: 5",
    "agrees to pay a referral fee of [Referral Fee Amount] for each referral",
    "1. Concert Grand: The largest and most powerful piano.",
    "Genre and Tone | Genre: Comedy-drama | Tone: Quirky",
    "| Grace | 30 | Austin | Artistic | They add visual appeal |",
    "Maude's here\n\nChorus | Maude | Chorus",
    "14. Obama Obama | 15. comma llama",
    "5. Lady Bird (2017) - This film follows a high school senior.",
    "the striking German Shepherd in the natural sunlight",
    "Religious Training: Training for Reverend (Pastor), Deacon, Evangelist, and Lay Leaders",
    "| Jack | 29 | Atlanta | Easygoing | They're versatile |",
    "Conclusion:\nAs John walked off the course, he was beaming.",
    "Plan a trip to Halifax, Nova Scotia, and then to the Berlin Wall.",
    "The Urban Planning Department approved the Golden Pavilion Convention Center.",
]


def _cases(name: str = "pii_cases.jsonl") -> list[dict]:
    return [json.loads(line) for line in (DATA_DIR / name).open()]


def _leaks(case: dict, out: str) -> list[str]:
    """Identifying parts of the secret still in ``out`` (and not elsewhere in the sentence)."""
    if case["secret"] in out:
        return [case["secret"]]
    rest = case["text"].replace(case["secret"], " ")
    pieces = [
        p for p in re.findall(r"[A-Za-z0-9]{3,}", case["secret"]) if p.lower() not in _GENERIC
    ]

    def has(text: str, piece: str) -> bool:
        return re.search(rf"(?<![A-Za-z0-9]){re.escape(piece)}(?![A-Za-z0-9])", text) is not None

    return [p for p in pieces if has(out, p) and not has(rest, p)]


def test_seeded_set_is_reproducible_and_wide() -> None:
    spec = importlib.util.spec_from_file_location("make_pii_cases", DATA_DIR / "make_pii_cases.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.cases() == _cases()
    types = Counter(c["type"] for c in _cases())
    assert sum(types.values()) >= 200 and len(types) >= 15


def _recall(name: str) -> tuple[Counter, Counter, list]:
    """Caught cases per type, cases per type and the misses (type, output, leaked parts)."""
    hit, total = Counter(), Counter()
    misses = []
    for case in _cases(name):
        total[case["type"]] += 1
        out = scrub(case["text"])[0]
        if leaks := _leaks(case, out):
            misses.append((case["type"], out, leaks))
        else:
            hit[case["type"]] += 1
    return hit, total, misses


@pytest.mark.parametrize("name", ["pii_cases.jsonl", "pii_cases_dev.jsonl"])
def test_recall_overall_and_per_type(name: str) -> None:
    hit, total, misses = _recall(name)
    recall = {t: hit[t] / n for t, n in total.items()}
    assert sum(hit.values()) / sum(total.values()) >= 0.95, misses
    assert min(recall.values()) >= 0.9, (recall, misses)


def test_blind_set_recall_and_false_positives() -> None:
    """The held-out set of a separate author (provenance in the module docstring)."""
    hit, total, misses = _recall("pii_cases_blind.jsonl")
    recall = {t: hit[t] / n for t, n in total.items()}
    assert sum(total.values()) == 132 and len(total) == 22
    assert sum(hit.values()) / sum(total.values()) >= 0.95, misses
    assert min(recall.values()) >= 0.9, (recall, misses)
    ordinary = [case["text"] for case in _cases("pii_ordinary_blind.jsonl")]
    assert len(ordinary) == 60
    assert [scrub(text)[0] for text in ordinary if scrub(text)[1]] == []


def test_dev_set_is_wide() -> None:
    types = Counter(c["type"] for c in _cases("pii_cases_dev.jsonl"))
    assert set(types) == {c["type"] for c in _cases()} and min(types.values()) >= 4


@pytest.mark.parametrize("text", ORDINARY + ORDINARY_DEV + ORDINARY_SHAREGPT)
def test_no_false_positive_on_ordinary_text(text: str) -> None:
    assert scrub(text) == (text, Counter())


# Still replaced: an unknown capitalised word that is rarely written in lower case ("Palatine",
# "Earth") before a known surname, and a list of items sharing a surname-shaped word.
ORDINARY_SHAREGPT_OPEN = [
    "Visit the Colosseum, Visit the Forum Romanum, Visit the Palatine Hill",
    "There are four Classes: Fire Bard, Wind Cleric, Earth Knight, and Water Rogue.",
    "* Alpha Fox\n* Beta Fox\n* Delta Fox",
]


@pytest.mark.xfail(reason="open false positives of the cue-less name rule", strict=True)
@pytest.mark.parametrize("text", ORDINARY_SHAREGPT_OPEN)
def test_open_false_positives(text: str) -> None:
    assert scrub(text) == (text, Counter())


@pytest.mark.parametrize(
    "text, name",
    [
        ("validated by Patrick Nadeau and confirmed by the team", "Patrick Nadeau"),
        ("write an internship offer to Rushabh Gandhi for the role", "Rushabh Gandhi"),
        ("a live virtual event with Pedro LaTorre, where he will share", "Pedro LaTorre"),
        ("her son Brandon Johnny was diagnosed", "Brandon Johnny"),
    ],
)
def test_cueless_names_in_real_text_are_kept_scrubbed(text: str, name: str) -> None:
    assert name not in scrub(text)[0]


def test_issue_examples_are_scrubbed() -> None:
    text = (
        "key AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY, token xoxb-263594206564-2343594206574-"
        "FGqddMF8t08v8N7Oq4i57vs1, IBAN GB82 WEST 1234 5698 7654 32, "
        "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
        " and api_token = 'Zx9Qw8Er7Ty6Ui5Op4As3Df2Gh1Jk0'"
    )
    out, counts = scrub(text)
    assert counts == Counter({"SECRET": 4, "IBAN": 1}), out
    assert "api_token = '[SECRET]'" in out
