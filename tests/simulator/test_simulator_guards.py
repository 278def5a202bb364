"""Pure guard checks: role adherence rule, goal overlap, repeats, pleasantries."""

from __future__ import annotations

import pytest

from mimesis.simulator.guards import (
    GuardParams,
    assistant_like_reasons,
    content_words,
    goal_overlap,
    is_assistant_like,
    is_pleasantry,
    repeats_earlier,
)

ASSISTANT_TEXTS = [
    "Certainly! Let me look into that for you.",
    "I'd be happy to help you with your booking.",
    "As an AI, I cannot book flights.",
    "How can I assist you today?",
    "Here are some options for your trip to Denver.",
    "Great, I hope this helps! Feel free to ask if anything is unclear.",
    "Is there anything else I can do?",
    "1. Fly direct at 9am\n2. Fly via Chicago at noon\nWhich one would you prefer?",
    "- the blue plan\n- the red plan\nLet me know which you'd like.",
]
USER_TEXTS = [
    "can you book me a flight to denver",
    "Of course it has to be direct, I said that already",
    "1. cheap\n2. direct\nwhich one would you recommend for a family?",
    "thanks, that helps a lot",
    "I'm happy with the second option",
    "let me know if you need my booking number",
    "ugh. not what I asked",
]


@pytest.mark.parametrize("text", ASSISTANT_TEXTS)
def test_assistant_phrases_are_flagged(text: str) -> None:
    assert is_assistant_like(text), assistant_like_reasons(text)


@pytest.mark.parametrize("text", USER_TEXTS)
def test_user_messages_are_not_flagged(text: str) -> None:
    assert not is_assistant_like(text), assistant_like_reasons(text)


def test_offered_option_list_is_its_own_reason() -> None:
    assert assistant_like_reasons(ASSISTANT_TEXTS[7]) == ["offers_options"]


def test_goal_overlap_counts_goal_content_words() -> None:
    goal = "Book a one-way flight from Boston to Denver on March 3"
    assert content_words(goal) == {"book", "one", "way", "flight", "boston", "denver", "march",
                                   "3"}
    assert goal_overlap(goal, "I want to book a one-way flight from Boston to Denver on March 3"
                        ) == 1.0
    assert goal_overlap(goal, "need a flight") == pytest.approx(1 / 8)
    assert goal_overlap(goal, "a flight pls", denominator="message") == pytest.approx(1 / 2)
    assert goal_overlap(goal, "hello") == 0.0
    assert goal_overlap("", "hello") == 0.0


def test_repeats_are_near_verbatim_and_long_enough() -> None:
    earlier = ["Hi, I need to book a flight to Denver please", "yes"]
    assert repeats_earlier("hi i need to book a flight to denver please!!", earlier)
    assert repeats_earlier("Hi, I need to book a flight to Denver, please.", earlier)
    assert not repeats_earlier("Hi, I need to cancel my hotel in Denver", earlier)
    assert not repeats_earlier("yes", earlier)  # too short to be a restart


@pytest.mark.parametrize(("text", "expected"), [
    ("thanks!", True), ("Thank you so much, have a great day!", True), ("you're welcome", True),
    ("ok bye", True), ("cheers :)", True), ("great", False), ("ok", False),
    ("thanks, now cancel the hotel too", False), ("thank you, what time is boarding?", False),
])
def test_pleasantry(text: str, expected: bool) -> None:
    assert is_pleasantry(text) is expected


@pytest.mark.parametrize("kwargs", [{"goal_dump_threshold": 1.5}, {"repeat_threshold": 0.0},
                                    {"pleasantries_limit": 0}, {"repeat_min_words": 0}])
def test_guard_params_are_checked(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        GuardParams(**kwargs)
