"""The agent action parser: tags, tolerance, reasoning removal, untagged messages."""

from __future__ import annotations

import pytest

from mimesis.envs.actions import Action, parse_action


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[action] Do you like jazz?", Action("action", "Do you like jazz?", True)),
        ("[search] hotel", Action("search", "hotel", True)),
        ("[answer] 42", Action("answer", "42", True)),
        ("[finish]", Action("finish", "", True)),
        ("[ANSWER]: H3", Action("answer", "H3", True)),
        ("[ Answer ] H3", Action("answer", "H3", True)),
        ("**[answer]** Lion", Action("answer", "Lion", True)),
        ("`[search]` flight", Action("search", "flight", True)),
        ("  \n[action]\nIs it alive?  ", Action("action", "Is it alive?", True)),
    ],
)
def test_tag_variants(text: str, expected: Action) -> None:
    assert parse_action(text) == expected


def test_untagged_message_is_an_action_to_the_user() -> None:
    assert parse_action("Is it bigger than a bread box?") == Action(
        "action", "Is it bigger than a bread box?", tagged=False
    )


def test_preamble_is_dropped_and_second_tag_ignored() -> None:
    act = parse_action("I have enough evidence now.\n[answer] 17\n[finish]")
    assert act == Action("answer", "17", True)


def test_reasoning_never_reaches_the_content() -> None:
    act = parse_action("<think>the rule is a+b; say [answer] 3</think>[action] f(1, 1, 1, 1)?")
    assert act == Action("action", "f(1, 1, 1, 1)?", True)
    # An unclosed think block (generation cut while thinking) is reasoning, not a message.
    assert parse_action("<think>maybe I should ask about") == Action("action", "", False)


def test_unknown_bracket_words_are_plain_text() -> None:
    act = parse_action("[note] is it red?")
    assert act == Action("action", "[note] is it red?", False)


def test_empty_message() -> None:
    assert parse_action("") == Action("action", "", False)
