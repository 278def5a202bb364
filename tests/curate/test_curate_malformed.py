"""curate on malformed input: every input element is an output record or a counted reject.

Covers the ways input can be lost: a mid-file syntax error, non-UTF-8 bytes, lone
surrogates, ids equal to internal keys, data after the closing bracket, and the reconciliation's
diagnostic.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from test_curate_stage import TOPICS, _exchange, params

from mimesis.data.sharegpt import RawRecord, ReadResult, read_records
from mimesis.io import read_jsonl
from mimesis.schemas import Conversation, Reject
from mimesis.stages.curate import Ledger, run


def _good(i: int) -> str:
    topic = TOPICS[i % len(TOPICS)] + f" variant {i} " + " ".join(f"w{i}x{j}" for j in range(12))
    return json.dumps({"id": f"good{i}_0", "conversations": _exchange(topic)})


def _curate(tmp_path: Path, body: bytes) -> dict:
    source = tmp_path / "src.json"
    source.write_bytes(body)
    out = run(tmp_path / "out", params(), source_path=source)
    convs = [
        c for s in ("train", "val", "test") for c in read_jsonl(out / f"{s}.jsonl", Conversation)
    ]
    rejects = {r.id: r for r in read_jsonl(out / "rejects.jsonl", Reject)}
    counts = json.loads((out / "counts.json").read_text())
    placed = [s for c in convs for s in c.source_ids] + list(rejects)
    assert len(placed) == len(set(placed)) == counts["raw_records"]
    assert counts["raw_records"] == counts["records_in_output"] + counts["records_rejected"]
    return {"ids": {s for c in convs for s in c.source_ids}, "rejects": rejects, "counts": counts}


def _array(*elements: str) -> bytes:
    return ("[\n  " + ",\n  ".join(elements) + "\n]\n").encode()


# --- reader -----------------------------------------------------------------------------------
def test_reader_skips_a_syntax_error_to_the_next_element(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(
        '[{"id": "a_0"}, {"id": "b_0" "oops": [{"x": 1}]}, {"id": "c_0"}, {"id": "d_0"}]'
    )
    read = read_records(path)
    assert [r.key for r in read.records] == ["a_0", "c_0", "d_0"]
    assert read.cut is None and read.closed
    assert [(s.partial_id, s.key, s.at_eof) for s in read.skipped] == [("b_0", "b_0", False)]
    assert [r.index for r in read.records] == [0, 2, 3]


def test_reader_keys_never_collide_with_ids(tmp_path: Path) -> None:
    path = tmp_path / "ids.json"
    path.write_text(
        json.dumps([{"x": 1}, {"id": "<element:0>"}, {"id": "a_0"}, {"id": "a_0"}, {"id": "a_0#2"}])
    )
    keys = [r.key for r in read_records(path).records]
    assert len(set(keys)) == len(keys) == 5
    assert keys[2:4] == ["a_0", "a_0#2"]


# --- the stage --------------------------------------------------------------------------------
def test_syntax_error_mid_file_loses_no_record(tmp_path: Path) -> None:
    broken = '{"id": "broken_0", "conversations": [{"from": "human" "value": "hi"}]}'
    body = _array(*[_good(i) for i in range(3)], broken, *[_good(i) for i in range(3, 7)])
    res = _curate(tmp_path, body)
    assert res["counts"]["raw_records"] == 8
    assert {f"good{i}_0" for i in range(7)} <= res["ids"] | set(res["rejects"])
    assert {f"good{i}_0" for i in range(3, 7)} <= res["ids"]  # the records after the error
    assert res["rejects"]["broken_0"].reason == "malformed_json"


def test_unrecoverable_tail_is_one_counted_reject(tmp_path: Path) -> None:
    body = _array(*[_good(i) for i in range(4)])[:-3] + b', {"id": "tail_0", "conv": ]]] nope\n'
    res = _curate(tmp_path, body)
    assert res["rejects"]["tail_0"].reason == "malformed"
    assert "chars left unparsed" in res["rejects"]["tail_0"].detail


@pytest.mark.parametrize(
    "bad",
    [
        (
            b'{"id": "bad_0", "conversations": [{"from": "human", "value": "caf\xe9 \xff?"},'
            b' {"from": "gpt", "value": "ok"}]}'
        ),
        (
            b'{"id": "bad_0", "conversations": [{"from": "human", "value": "lone \\ud800 here"},'
            b' {"from": "gpt", "value": "ok"}]}'
        ),
        (
            b'{"id": "bad_0", "conversations": [{"from": "human", "value": "ok"},'
            b' {"from": "gpt", "value": "half a pair \\udc00"}]}'
        ),
    ],
    ids=["non_utf8", "lone_high_surrogate", "lone_low_surrogate"],
)
def test_bad_unicode_is_a_per_record_reject(
    tmp_path: Path, bad: bytes
) -> None:
    goods = [_good(i).encode() for i in range(6)]
    body = b"[\n" + b",\n".join([*goods[:3], bad, *goods[3:]]) + b"\n]\n"
    res = _curate(tmp_path, body)
    assert res["counts"]["raw_records"] == 7
    assert res["rejects"]["bad_0"].reason == "bad_unicode"
    assert {f"good{i}_0" for i in range(3, 6)} <= res["ids"]


def test_non_utf8_id_and_emoji_pairs(tmp_path: Path) -> None:
    emoji = json.dumps(
        {"id": "emoji_0", "conversations": _exchange("a smile \ud83d\ude00 for you")}
    )
    body = _array(*[_good(i) for i in range(4)], emoji).replace(b'"good1_0"', b'"good\xff1_0"')
    res = _curate(tmp_path, body)
    assert "emoji_0" in res["ids"]  # a valid surrogate pair is an ordinary character
    (bad_key,) = [k for k in res["rejects"] if k.startswith("good") and k != "good1_0"]
    assert res["rejects"][bad_key].reason == "bad_unicode" and "\\x" in bad_key


def test_id_equal_to_an_internal_key(tmp_path: Path) -> None:
    clash = json.dumps({"id": "<element:4>", "conversations": _exchange("a clashing id question")})
    body = _array(*[_good(i) for i in range(4)], '{"no_id": true}', clash)
    res = _curate(tmp_path, body)
    assert res["counts"]["raw_records"] == 6
    assert "<element:4>" in res["ids"] | set(res["rejects"])


def test_data_after_the_closing_bracket_is_counted(tmp_path: Path) -> None:
    body = _array(*[_good(i) for i in range(4)]) + _good(9).encode() + b"\n"
    res = _curate(tmp_path, body)
    assert res["counts"]["raw_records"] == 5
    (trailing,) = [r for r in res["rejects"].values() if r.reason == "trailing_data"]
    assert "good9_0" in trailing.id


def test_records_in_another_schema_are_rejected_with_what_they_lack(tmp_path: Path) -> None:
    """Your own conversations in OpenAI's shape instead of ShareGPT's (README, "Your own
    conversations"): each such record is a ``malformed`` reject naming what it lacks, and the
    records that fit are curated as usual."""
    messages = json.dumps({"id": "msgs_0", "messages": [{"role": "user", "content": "hi"}]})
    role_content = json.dumps(
        {
            "id": "rolecontent_0",
            "conversations": [
                {"role": "user", "content": "how do I keep basil alive on a windowsill?"},
                {"role": "assistant", "content": "Give it sun and water when the soil is dry."},
            ],
        }
    )
    res = _curate(
        tmp_path, _array(*[_good(i) for i in range(4)], messages, role_content)
    )
    assert res["rejects"]["msgs_0"].reason == "malformed"
    assert res["rejects"]["msgs_0"].detail == "'conversations' is not a list"
    assert res["rejects"]["rolecontent_0"].reason == "malformed"
    assert res["rejects"]["rolecontent_0"].detail == "turn 0 lacks string 'from'/'value'"
    assert {f"good{i}_0" for i in range(4)} <= res["ids"]


def test_a_jsonl_file_is_refused_whole(tmp_path: Path) -> None:
    """One conversation per line (JSONL) is not a ShareGPT file: the reader says so at once."""
    path = tmp_path / "mine.jsonl"
    path.write_text(_good(0) + "\n" + _good(1) + "\n")
    with pytest.raises(ValueError, match="is not a JSON array"):
        read_records(path)


def test_reconciliation_names_what_is_missing() -> None:
    rec = RawRecord(key="x_0", id="x_0", index=0, data={})
    read = ReadResult(records=[rec, rec])
    ledger = Ledger(rejects=[Reject(id="x_0", stage="curate", reason="malformed")])
    with pytest.raises(RuntimeError, match="x_0"):
        ledger.counts(read, [], Counter())


# --- the command line: bad input is a reason and exit code 2, never a traceback ----------------
@pytest.mark.parametrize(("body", "reason"), [
    (None, "No such file"),
    (b'{"id": "c1"}', "is not a JSON array"),
    (_array(_good(0)), "need at least 3 conversations"),
])
def test_the_command_names_bad_input_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture, body, reason
) -> None:
    from mimesis.stages.curate import main

    source = tmp_path / "src.json"
    if body is not None:
        source.write_bytes(body)
    with pytest.raises(SystemExit) as exit_:
        main(["--source", str(source), "--out", str(tmp_path / "out"),
              "--params", str(Path(__file__).parents[2] / "params.yaml")])
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert exit_.value.code == 2 and last.startswith("curate: ") and reason in last
    assert "Traceback" not in err
