"""Hand-made labelled conversations for the train_user / freeze_user tests, and tests of the SFT
row building (role flip, length fitting, rejects)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mimesis.format import END_SIGNAL
from mimesis.io import write_jsonl
from mimesis.schemas import LabeledConversation, Scenario, Turn, TurnLabel

_TOPICS = [
    ("a cover letter for a junior data analyst job",
     "can you write me a cover letter for a junior data analyst role",
     "make it shorter and mention SQL"),
    ("a python function that removes duplicates from a list",
     "how do i remove duplicates from a list in python", "it has to keep the original order"),
    ("a 3 day itinerary for Lisbon", "plan 3 days in lisbon for me", "we dont like museums tbh"),
    ("an explanation of TCP vs UDP", "whats the difference between tcp and udp",
     "ok but which one do games use"),
    ("a birthday message for a colleague", "birthday msg for my coworker anna",
     "less formal pls"),
    ("a fix for a failing pandas merge", "my pandas merge gives duplicated rows why",
     "the key column has NaNs, does that matter"),
]


def make_conversations(n: int, split: str = "train", long_every: int = 0) -> list[
        LabeledConversation]:
    """``n`` labelled conversations (2 user turns each, ended), varied topics.

    ``long_every``: every k-th conversation gets very long agent replies (tests length fitting).
    """
    out = []
    for i in range(n):
        goal, first, second = _TOPICS[i % len(_TOPICS)]
        long = bool(long_every) and i % long_every == 0
        reply = ("Sure! Here is a first version. " * (60 if long else 3)).strip()
        turns = [Turn(role="user", text=f"{first} (#{i})"),
                 Turn(role="assistant", text=reply),
                 Turn(role="user", text=second),
                 Turn(role="assistant", text="Done, here is the updated version.")]
        labels = [
            TurnLabel(turn_index=0, reasoning="I need this quickly, I'll just ask.",
                      reasoning_annotator="test"),
            TurnLabel(turn_index=2, behaviors=["B2"], sources={"B2": ["rules"]},
                      reasoning="Good start, but it misses something I care about.",
                      reasoning_annotator="test"),
        ]
        out.append(LabeledConversation(
            id=f"{split}-{i}", source_ids=[f"{split}-{i}_0"], turns=turns, split=split,
            language="en",
            scenario=Scenario(goal=f"You want {goal}.", behaviors=["B2"], annotator="test"),
            labels=labels, end_reasoning="That's what I needed, I'm done.",
            end_reasoning_annotator="test", ended=True))
    return out


def write_label_dir(label_dir: Path, n_train: int = 6, n_val: int = 2) -> Path:
    """A label-stage output folder with ``train.jsonl`` and ``val.jsonl``."""
    write_jsonl(label_dir / "train.jsonl", make_conversations(n_train, "train"))
    write_jsonl(label_dir / "val.jsonl", make_conversations(n_val, "val"))
    return label_dir


@pytest.fixture(scope="module")
def tiny_tokenizer():
    from mimesis.models.base import load_base

    return load_base("tiny-llama")[1]


def test_rows_are_flipped_conversations_with_end_turn(tiny_tokenizer):
    from mimesis.train.sft_data import build_rows

    convs = make_conversations(3)
    rows, rejects, counts = build_rows(convs, tiny_tokenizer, max_length=512,
                                       max_user_chars=600, max_agent_chars=400)
    assert [r["id"] for r in rows] == ["train-0", "train-1", "train-2"] and rejects == []
    roles = [m["role"] for m in rows[0]["messages"]]
    assert roles == ["system", "assistant", "user", "assistant", "user", "assistant"]
    assert rows[0]["messages"][1]["content"].startswith("<think>I need this quickly")
    assert rows[0]["messages"][-1]["content"].endswith(END_SIGNAL)
    assert counts["fits"] == 3 and counts["tokens"] > 0


def test_long_conversations_are_clipped_to_fit_and_limit_rejects_the_rest(tiny_tokenizer):
    from mimesis.train.sft_data import build_rows, n_tokens

    convs = make_conversations(5, long_every=2)  # 0, 2, 4 have ~1.8k-char agent replies
    rows, rejects, counts = build_rows(convs, tiny_tokenizer, max_length=384,
                                       max_user_chars=0, max_agent_chars=0, limit=4)
    assert all(n_tokens(tiny_tokenizer, r["messages"]) <= 384 for r in rows)
    assert counts["clipped"] >= 2
    # every input conversation is either a row or a reject with a reason
    assert len(rows) + len(rejects) == 5
    assert [r.reason for r in rejects] == ["over_limit"]
    long_row = next(r for r in rows if r["id"] == "train-0")
    assert long_row["messages"][-1]["content"].endswith(END_SIGNAL)  # clipping kept the end


def test_too_long_conversations_lose_middle_exchanges_then_the_tail(tiny_tokenizer):
    from mimesis.train.sft_data import fit_conversation, n_tokens

    conv = make_conversations(1)[0]
    fit = fit_conversation(conv, tiny_tokenizer, max_length=20, max_user_chars=0,
                           max_agent_chars=0)
    assert fit.messages is None and fit.outcome == "too_long"
    full = fit_conversation(conv, tiny_tokenizer, 4096, 0, 0).messages
    # [system, user turn 1, agent 1, user turn 2, agent 2, end]: drop (agent 1, user turn 2)
    elided = fit_conversation(conv, tiny_tokenizer, n_tokens(tiny_tokenizer, full) - 1, 0, 0)
    assert elided.outcome == "elided" and elided.messages == full[:2] + full[4:]
    assert elided.messages[-1]["content"].endswith(END_SIGNAL)
    opening = n_tokens(tiny_tokenizer, full[:2])
    cut = fit_conversation(conv, tiny_tokenizer, opening, 0, 0)
    assert cut.outcome == "cut" and cut.messages == full[:2] and cut.n_tokens == opening
