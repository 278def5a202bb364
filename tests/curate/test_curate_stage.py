"""The curate stage end to end on a hand-made, truncated ShareGPT file (no network, no package)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mimesis.io import read_jsonl
from mimesis.schemas import Conversation, Reject
from mimesis.stages.curate import CurateParams, run

PII = {  # original string -> placeholder it must become
    "jane.roe@example.org": "[EMAIL]",
    "(415) 555-0132": "[PHONE]",
    "203.0.113.42": "[IP]",
    "4111 1111 1111 1111": "[CARD]",
    "123-45-6789": "[ID_NUMBER]",
    "https://api.example.com/v1/items?user=jr&api_key=sk9f8e7d6c5b4a": "[URL_WITH_TOKEN]",
}
TOPICS = [
    "how to keep sourdough starter alive while I travel for two weeks in the summer",
    "the difference between a Roth account and a traditional retirement account for a teacher",
    "a polite email asking my landlord to repair the broken heating before the winter starts",
    "ideas for a birthday party for a seven year old who loves dinosaurs and volcanoes",
    "why my tomato plants have yellow leaves at the bottom even though I water them daily",
    "a workout plan for someone who can only exercise twenty minutes each morning at home",
    "how the French revolution changed the way ordinary people thought about kings and power",
    "tips for learning to play the guitar as an adult with small hands and little free time",
]
NEAR_DUP_BASE = (
    "Please write a detailed packing list for a four day hiking trip in the Scottish "
    "Highlands in late September, including clothing layers for rain and wind, food "
    "that does not need cooking, a basic first aid kit, navigation tools, and a few "
    "comfort items that are light enough to carry all day without trouble"
)


def _turn(role: str, text: str) -> dict:
    return {"from": role, "value": text}


def _exchange(question: str, n: int = 1) -> list[dict]:
    turns = []
    for i in range(n):
        turns += [
            _turn("human", f"{question} (part {i + 1}), can you explain it simply please?"),
            _turn("gpt", f"Sure. Here is a clear answer about {question}, step {i + 1}."),
        ]
    return turns


def _elements() -> list[dict]:
    pii_text = (
        "My email is jane.roe@example.org, call me at (415) 555-0132, my server is "
        "203.0.113.42, my card is 4111 1111 1111 1111, my SSN is 123-45-6789 and the feed "
        "is https://api.example.com/v1/items?user=jr&api_key=sk9f8e7d6c5b4a ok?"
    )
    return [
        {"id": "chunked_0", "conversations": _exchange(TOPICS[0], 2)},
        # a later chunk that starts with the assistant: merged into the previous assistant turn
        {
            "id": "chunked_4",
            "conversations": [
                _turn("gpt", "One more detail about starters."),
                *_exchange(TOPICS[0] + " again", 1),
            ],
        },
        {
            "id": "pii_0",
            "conversations": [
                _turn("human", pii_text),
                _turn("gpt", "Never share jane.roe@example.org online."),
            ],
        },
        {
            "id": "trailing_0",
            "conversations": [
                *_exchange(TOPICS[1]),
                _turn("human", "and one more question, thanks"),
            ],
        },
        *[{"id": f"good{i}_0", "conversations": _exchange(t)} for i, t in enumerate(TOPICS[2:])],
        {"id": "exactdup_0", "conversations": [_exchange(TOPICS[2])[0], _turn("gpt", "Other.")]},
        {"id": "nearbase_0", "conversations": [_turn("human", NEAR_DUP_BASE), _turn("gpt", "Ok.")]},
        {
            "id": "neardup_0",
            "conversations": [
                _turn("human", NEAR_DUP_BASE + " please"),
                _turn("gpt", "A different answer."),
            ],
        },
        {
            "id": "asstfirst_0",
            "conversations": [
                _turn("gpt", "Hello, how can I help?"),
                *_exchange(TOPICS[3] + " later"),
            ],
        },
        {
            "id": "emptyturn_0",
            "conversations": [_turn("human", TOPICS[4] + " twice"), _turn("gpt", "   ")],
        },
        {
            "id": "french_0",
            "conversations": [
                _turn(
                    "human",
                    "Bonjour, pouvez-vous m'expliquer comment préparer une tarte aux "
                    "pommes traditionnelle avec une pâte brisée maison et du beurre salé?",
                ),
                _turn("gpt", "Bien sûr, voici la recette."),
            ],
        },
        {
            "id": "narrator_0",
            "conversations": [
                *_exchange(TOPICS[5] + " nope"),
                _turn("narrator", "And then they left."),
            ],
        },
        {
            "id": "system_0",
            "conversations": [
                _turn("system", "Shared from an app"),
                *_exchange(TOPICS[6] + " now"),
            ],
        },
        {
            "id": "twousers_0",
            "conversations": [
                _turn("human", TOPICS[7] + " first"),
                _turn("human", "hello?"),
                _turn("gpt", "Hi."),
            ],
        },
        {
            "id": "toolong_0",
            "conversations": [
                _turn("human", "Summarise: " + "word " * 700),
                _turn("gpt", "Summary."),
            ],
        },
        {"id": "broken_0", "conversations": _exchange("a question about broken chunks")},
        {"id": "broken_2", "conversations": "not a list"},
        {"id": "dupid_0", "conversations": []},
        {"id": "dupid_0", "conversations": _exchange("why the sky looks blue in the afternoon")},
    ]


def write_truncated_sharegpt(path: Path) -> int:
    """Write the elements as a JSON array cut inside one more element; return element count."""
    elements = _elements()
    text = json.dumps(elements, indent=2)[:-2]  # drop "\n]"
    tail = json.dumps({"id": "cut_0", "conversations": [_turn("human", "this text is cut off")]})
    path.write_text(text + ",\n  " + tail[:-10], encoding="utf-8")  # cut mid-string
    return len(elements)


def params(**overrides: object) -> CurateParams:
    values = {
        "max_records": 0,
        "max_turns": 12,
        "max_turn_chars": 2000,
        "max_conversation_chars": 6000,
        "min_english_prob": 0.5,
        "near_dup_threshold": 0.8,
        "num_perm": 64,
        "val_fraction": 0.2,
        "test_fraction": 0.2,
        "seed": 13,
        "profile": "smoke",
    }
    return CurateParams(**(values | overrides))


@pytest.fixture(scope="module")
def curated(tmp_path_factory: pytest.TempPathFactory, empty_mlflow_store) -> dict:
    root = tmp_path_factory.mktemp("curate")
    source = root / "sharegpt_cut.json"
    n_elements = write_truncated_sharegpt(source)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLFLOW_TRACKING_URI", empty_mlflow_store(root / "mlflow.db"))
        mp.delenv("MIMESIS_PARENT_RUN_ID", raising=False)
        out = run(root / "a", params(), source_path=source)
        again = run(root / "b", params(), source_path=source)
    convs = [
        c for s in ("train", "val", "test") for c in read_jsonl(out / f"{s}.jsonl", Conversation)
    ]
    rejects = list(read_jsonl(out / "rejects.jsonl", Reject))
    counts = json.loads((out / "counts.json").read_text())
    return {
        "out": out,
        "again": again,
        "convs": convs,
        "rejects": rejects,
        "counts": counts,
        "n_elements": n_elements,
        "root": root,
    }


def test_counts_reconcile(curated: dict) -> None:
    c = curated["counts"]
    assert c["raw_records"] == curated["n_elements"] + 1  # + the element cut by the truncation
    assert c["raw_records"] == c["records_in_output"] + c["records_rejected"]
    assert sum(c["rejects_by_reason"].values()) == c["records_rejected"] == len(curated["rejects"])
    assert sum(c["conversations_by_split"].values()) == c["conversations_in_output"]
    assert all(n > 0 for n in c["conversations_by_split"].values())
    placed = [s for conv in curated["convs"] for s in conv.source_ids]
    placed += [r.id for r in curated["rejects"]]
    assert len(placed) == len(set(placed)) == c["raw_records"]
    assert c["source"]["cut"]["at_eof"] and c["source"]["cut"]["partial_id"] == "cut_0"


def test_every_bad_record_has_its_reason(curated: dict) -> None:
    reasons = {r.id: r.reason for r in curated["rejects"]}
    assert reasons == {
        "cut_0": "truncated_record",
        "exactdup_0": "exact_duplicate_of:good0",
        "neardup_0": "near_duplicate_of:nearbase",
        "asstfirst_0": "assistant_first",
        "emptyturn_0": "empty_turn",
        "french_0": "not_english",
        "narrator_0": "unknown_role",
        "system_0": "system_turn",
        "twousers_0": "roles_not_alternating",
        "toolong_0": "too_long",
        "broken_2": "malformed",
        "broken_0": "sibling_malformed:broken_2",
        "dupid_0": "empty_conversation",
    }


def test_chunks_rejoined_and_trailing_user_trimmed(curated: dict) -> None:
    by_id = {c.id: c for c in curated["convs"]}
    chunked = by_id["chunked"]
    assert chunked.source_ids == ["chunked_0", "chunked_4"]
    assert [t.role for t in chunked.turns] == ["user", "assistant"] * 3
    assert chunked.turns[3].text.endswith("step 2.\nOne more detail about starters.")
    assert by_id["dupid"].source_ids == ["dupid_0#2"]
    assert by_id["trailing"].turns[-1].role == "assistant"
    assert curated["counts"]["trailing_user_turns_trimmed"] == 1
    assert curated["counts"]["boundary_merges"] == 1
    assert all(c.language == "en" for c in curated["convs"])


def test_pii_replaced_everywhere(curated: dict) -> None:
    out = curated["out"]
    text = "".join((out / f"{s}.jsonl").read_text() for s in ("train", "val", "test"))
    for original, placeholder in PII.items():
        assert original not in text
        assert placeholder in text
    pii = curated["counts"]["pii_replacements"]
    assert pii["EMAIL"] == 2 and all(pii[p.strip("[]")] >= 1 for p in PII.values())


def test_splits_disjoint_and_deterministic(curated: dict) -> None:
    splits = {}
    for conv in curated["convs"]:
        assert splits.setdefault(conv.id, conv.split) == conv.split
    assert len(splits) == len(curated["convs"])
    for name in ("train", "val", "test", "rejects", "counts"):
        suffix = ".json" if name == "counts" else ".jsonl"
        a = (curated["out"] / f"{name}{suffix}").read_text()
        assert a == (curated["again"] / f"{name}{suffix}").read_text()


def test_validation_report_and_mlflow(curated: dict) -> None:
    report = json.loads((curated["out"] / "validation.json").read_text())
    assert report["success"] and len(report["results"]) >= 12
    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{curated['root'] / 'mlflow.db'}")
    runs = mlflow.search_runs(experiment_names=["mimesis"], filter_string="run_name = 'curate'")
    assert len(runs) == 2
    assert set(runs["metrics.raw_records"]) == {curated["counts"]["raw_records"]}
    assert set(runs["metrics.rejects_not_english"]) == {1}


def test_max_records_stops_early(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mimesis.data.sharegpt import read_records

    source = tmp_path / "cut.json"
    write_truncated_sharegpt(source)
    read = read_records(source, max_records=5)
    assert [r.key for r in read.records] == [
        "chunked_0",
        "chunked_4",
        "pii_0",
        "trailing_0",
        "good0_0",
    ]
    assert read.stopped_at_max_records and read.cut is None and not read.closed
