"""Parsing of raw simulator generations: reasoning leaks and tolerant end signals
(docs/pitfalls.md #3, #6)."""

from __future__ import annotations

import pytest

from mimesis.format import END_SIGNAL, format_end, format_target
from mimesis.simulator.parsing import parse_turn, starts_like_reasoning

SECRET = "refund quietly"  # words that only ever appear in the reasoning

LEAKY_OUTPUTS = {
    "tagged": f"<think>I want a {SECRET}</think>\nmy order never arrived",
    "tagged_twice": f"<think>first</think>\nmy order <think>{SECRET}</think> never arrived",
    "thinking_tag": f"<thinking>I want a {SECRET}</thinking>\nmy order never arrived",
    "unclosed_cut_by_max_tokens": f"my order never arrived <think>I want a {SECRET} and",
    "unopened_prefill": f"I want a {SECRET}</think>\nmy order never arrived",
    "thinking_process": (f"Thinking Process:\n\n1.  **Analyze:** The assistant greeted me.\n"
                         f"2.  **Goal:** I want a {SECRET}.\n\nmy order never arrived"),
    "thinking_process_lines": (f"Thinking Process:\n1. The assistant greeted me.\n"
                               f"2. I want a {SECRET}.\nmy order never arrived"),
    "reasoning_paragraphs": (f"Reasoning: I want a {SECRET}.\n\nI'll keep it short and not "
                             f"reveal everything.\n\nmy order never arrived"),
    "reasoning_with_marker": (f"Reasoning: I want a {SECRET}.\n"
                              f"Final message: \"my order never arrived\""),
    "parenthesised_label": f"(thinking) I want a {SECRET}.\nmy order never arrived",
    "parenthesised_content": f"(thinking: I want a {SECRET}) my order never arrived",
    "let_me_think": f"Let me think... I want a {SECRET}.\n\nmy order never arrived",
    "meta_preamble": (f"Okay, so the assistant asked what happened. I want a {SECRET}.\n\n"
                      f"my order never arrived"),
    "trailing_note": f"my order never arrived\n\n(Note: I want a {SECRET}, not revealed yet.)",
    "bold_header": f"**Thinking:** I want a {SECRET}.\n\nmy order never arrived",
}


@pytest.mark.parametrize("raw", LEAKY_OUTPUTS.values(), ids=LEAKY_OUTPUTS.keys())
def test_reasoning_never_reaches_the_utterance(raw: str) -> None:
    turn = parse_turn(raw)
    assert turn.utterance == "my order never arrived"
    assert SECRET in turn.reasoning
    assert "think" not in turn.utterance.lower()
    assert not turn.ended


@pytest.mark.parametrize("raw", [
    f"Let me think… I want a {SECRET}, I'll just ask.",
    f"Reasoning: I want a {SECRET}. The assistant should not know yet.",
    f"<think>I want a {SECRET} but I",
])
def test_unsplittable_reasoning_gives_an_empty_utterance(raw: str) -> None:
    turn = parse_turn(raw)
    assert turn.utterance == ""
    assert SECRET in turn.reasoning


@pytest.mark.parametrize("text", [
    "I need to respond to my landlord, can you help me write an email?",
    "The agent told me yesterday that my refund would be processed.",
    "can you fix this error\n\nOutput: 404 not found",
    "here is my config:\n[END]\nfoo=bar\nwhat is wrong with it?",
    "ok so what are the options for getting to Denver?",
    "Note: I'm on python 3.8. Why does this fail?",
    "1. cheap\n2. direct\nthose are my requirements",
])
def test_ordinary_user_messages_are_left_alone(text: str) -> None:
    turn = parse_turn(text)
    assert (turn.reasoning, turn.utterance, turn.ended) == ("", text, False)


def test_canonical_forms_round_trip() -> None:
    turn = parse_turn(format_target("they want my dates", "march 3"))
    assert (turn.reasoning, turn.utterance, turn.ended) == ("they want my dates", "march 3", False)
    end = parse_turn(format_end("I have what I need"))
    assert (end.reasoning, end.utterance, end.ended) == ("I have what I need", "", True)
    assert "end_signal_variant" not in end.flags


@pytest.mark.parametrize("raw", [
    END_SIGNAL, "<|endconversation|>", "<|END_CONVERSATION|>", "< | end conversation | >",
    "<end_conversation>", "<|end-of-conversation|>", "|end_conversation|", "[END]",
    "[end conversation]", "###STOP###", "### stop ###", "END_CONVERSATION",
    "<think>done</think>\n[END]",
])
def test_end_signal_variants_end_the_turn(raw: str) -> None:
    turn = parse_turn(raw)
    assert turn.ended and turn.utterance == ""


def test_end_signal_with_utterance_keeps_the_utterance() -> None:
    turn = parse_turn("<think>good price</think>\nyes please book it <|end_conversation|>")
    assert (turn.utterance, turn.ended) == ("yes please book it", True)
    assert parse_turn("thanks! ###STOP###").utterance == "thanks!"


def test_loose_end_forms_count_only_at_the_edges() -> None:
    assert not parse_turn("my log says [END] then nothing, why?").ended
    assert not parse_turn("what does ###STOP### mean in this script?").ended
    assert parse_turn("[END] ok bye").ended


def test_role_prefix_and_control_tokens_are_removed() -> None:
    assert parse_turn("User: hello there").utterance == "hello there"
    turn = parse_turn("hello there<|im_end|>\n<|im_start|>user\nHow can I help?")
    assert turn.utterance == "hello there" and "control_token" in turn.flags


def test_quotes_around_the_message_go_once_reasoning_was_removed() -> None:
    assert parse_turn('<think>a</think>"hey can you help"').utterance == "hey can you help"
    assert parse_turn('"hey" is what she said').utterance == '"hey" is what she said'


def test_starts_like_reasoning() -> None:
    assert starts_like_reasoning("Thinking Process: ...")
    assert starts_like_reasoning("hmm, let me think")
    assert not starts_like_reasoning("thinking of going to Rome, ideas?")
