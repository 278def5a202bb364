"""The curate expectation suite (great-expectations) passes good data and explains bad data."""

from __future__ import annotations

import pytest

from mimesis.data.validate import (
    CurateValidationError,
    Limits,
    conversation_frame,
    raise_on_failure,
    validate_frame,
)
from mimesis.schemas import Conversation, Turn

LIMITS = Limits(
    max_turns=6, max_turn_chars=100, max_conversation_chars=300, val_fraction=0.2, test_fraction=0.2
)


def _conv(
    cid: str, split: str, roles: tuple[str, ...] = ("user", "assistant"), text: str = "hello there"
) -> Conversation:
    return Conversation(
        id=cid,
        source_ids=[f"{cid}_0"],
        split=split,
        language="en",
        turns=[Turn(role=r, text=text) for r in roles],
    )


def _good() -> list[Conversation]:
    splits = ["train"] * 6 + ["val"] * 2 + ["test"] * 2
    return [_conv(f"c{i}", s) for i, s in enumerate(splits)]


@pytest.fixture(scope="module")
def reports() -> dict:
    broken = _good()[:8]  # no test split
    broken += [
        _conv("c0", "val"),  # id in two splits, and its source id twice
        _conv("x1", "val", roles=("assistant", "user")),  # assistant first
        _conv("x2", "train", roles=("user", "user", "assistant")),  # not alternating
        _conv("x3", "train", text="y" * 150),
    ]  # turn over the cap
    return {
        "good": validate_frame(conversation_frame(_good(), LIMITS), LIMITS),
        "broken": validate_frame(conversation_frame(broken, LIMITS), LIMITS),
    }


def test_good_frame_passes(reports: dict) -> None:
    assert reports["good"]["success"]
    raise_on_failure(reports["good"])


def test_broken_frame_raises_a_readable_error(reports: dict) -> None:
    with pytest.raises(CurateValidationError) as info:
        raise_on_failure(reports["broken"])
    message = str(info.value)
    for needle in [
        "expect_column_values_to_be_unique {'column': 'id'}",
        "expect_column_distinct_values_to_equal_set",
        "missing ['test']",
        "'column': 'splits_of_id'",
        "'column': 'shared_source_ids'",
        "'column': 'first_role'",
        "^user(?:,assistant,user)*,assistant$",
        "'column': 'max_turn_chars'",
        "'column': 'split_fraction_error'",
    ]:
        assert needle in message, needle
    assert "'column': 'n_turns'" not in message  # a passing expectation is not listed
