"""Annotator: output parsing, checks, fallbacks with recorded producers, local backend wiring."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from mimesis.behaviors import parsing
from mimesis.behaviors.annotator import (
    KINDS,
    Annotator,
    AnnotatorParams,
    ConversationView,
    PromptTemplate,
    TurnView,
    make_annotator,
)
from mimesis.behaviors.backends import AnnotatorError, HFBackend
from mimesis.behaviors.fallbacks import FALLBACK, abstract_goal

FIRST = "Write a cover letter for a junior data analyst job at a bank in Leeds"
CONV = ConversationView(
    user_turns=(FIRST, "make it shorter and mention SQL"),
    last_agent="Here is a shorter version mentioning SQL.",
)


class ScriptedBackend:
    """A backend whose answer per prompt kind comes from a function of the prompt text."""

    supports_prefill = True

    def __init__(self, answers: dict[str, Callable[[str], str]], name: str = "hf:scripted"):
        self.answers, self.name = answers, name
        self.calls: list[tuple[str, int, list[str]]] = []

    def complete(self, batch: Sequence[list[dict]], prefills: Sequence[str], max_new_tokens: int,
                 desc: str) -> list[str]:
        kind = desc.split()[-1]
        self.calls.append((kind, len(batch), list(prefills)))
        return [p + self.answers[kind](m[-1]["content"]) for m, p in zip(batch, prefills)]


def annotator(**answers: Callable[[str], str]) -> tuple[Annotator, ScriptedBackend]:
    backend = ScriptedBackend(answers)
    return Annotator(backend, AnnotatorParams(label_behaviors="behaviors" in answers)), backend


# --- parsing -------------------------------------------------------------------------------
def test_behavior_ids_keep_only_valid_catalogue_ids_in_order():
    assert parsing.parse_behavior_ids("B13, b2?, B0, B14, B9x, B9") == ["B9", "B13"]
    assert parsing.parse_behavior_ids("NONE") == []


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("I want a shorter list. I am tired of scrolling. I also like cats.",
         "I want a shorter list. I am tired of scrolling."),
        ('Assistant: "I want the bug fixed today."', "I want the bug fixed today."),
        ("<think>I need the SQL join explained</think>", "I need the SQL join explained."),
        ("I want help. I want help. I want", "I want help."),
        ("I want to merge it with the sender's private thought. I want it merged now.",
         "I want it merged now."),
        ("I'm sorry, but as an AI I cannot do that.", ""),
        ("The user wants a list.", ""),
        ("", ""),
        ("I", ""),
    ],
)
def test_clean_first_person(raw, expected):
    assert parsing.clean_first_person(raw) == expected


def test_clean_goal_wants_second_person_only():
    assert parsing.clean_goal("You want a tidy budget sheet.") == "You want a tidy budget sheet."
    assert parsing.clean_goal("You want to help me create a product.") == ""
    assert parsing.clean_goal("I want a tidy budget sheet.") == ""
    assert parsing.clean_goal("You want help with that.") == ""


def test_goal_copy_check_catches_verbatim_and_near_copies():
    copy = parsing.copies
    assert copy("You want " + FIRST.lower(), FIRST, 6, 0.5)
    assert copy("You want to say hi.", "hi", 6, 0.5)  # short first message contained verbatim
    assert copy("You want a cover letter for a data analyst job at a bank.", FIRST, 6, 0.5)
    assert not copy("You want an application letter that gets you into banking analytics.",
                    FIRST, 6, 0.5)


# --- annotator with a scripted backend ------------------------------------------------------
def test_goal_never_contains_first_message_even_when_the_model_copies_it():
    ann, _ = annotator(goal=lambda prompt: " " + FIRST.lower() + ".")
    views = [CONV, ConversationView(user_turns=("hi", "what is a monad in haskell")),
             ConversationView(user_turns=("explain monads",))]
    for view, goal in zip(views, ann.goals(views)):
        assert goal is not None and goal.producer == FALLBACK
        assert goal.text.startswith("You want")
        assert view.user_turns[0].lower() not in goal.text.lower()
        assert not ann.is_copy(goal.text, view.user_turns[0])


def test_goal_from_model_is_kept_with_its_producer_when_it_paraphrases():
    ann, backend = annotator(goal=lambda prompt: " a job application letter for banking analytics.")
    [goal] = ann.goals([CONV])
    assert goal.text == "You want a job application letter for banking analytics."
    assert goal.producer == "annotator:hf:scripted"
    assert backend.calls == [("goal", 1, ["You want"])]


def test_goal_rejected_when_no_candidate_avoids_copying():
    # A first message made of nothing but the abstraction's own words leaves no candidate.
    assert abstract_goal(["You want help"], lambda g: True) == ""


def test_reasoning_first_person_cut_to_two_sentences_with_producer():
    ann, _ = annotator(reasoning=lambda p: " a letter that sounds less stiff. I hate cover "
                                           "letters. I also want coffee.")
    [out] = ann.reasonings([TurnView(utterance=FIRST, first=True)])
    assert out.text == "I want a letter that sounds less stiff. I hate cover letters."
    assert out.producer == "annotator:hf:scripted"


@pytest.mark.parametrize("raw", ["", "   ", " to. As an AI language model I can't.",
                                 " pizza toppings with pineapple."])
def test_unusable_reasoning_falls_back_and_records_it(raw):
    ann, _ = annotator(reasoning=lambda p: raw)
    [out] = ann.reasonings([TurnView(utterance="not what i asked, still broken", prev_agent="Try "
                                     "restarting the server.", labels=("B9",))])
    assert out.producer == FALLBACK
    assert out.text.startswith("I ") and "annoyed" in out.text


def test_end_reasoning_and_fallback():
    ann, _ = annotator(end=lambda p: " got the letter I needed.")
    assert ann.end_reasonings([CONV])[0].text == "I am done because I got the letter I needed."
    ann, _ = annotator(end=lambda p: " I'm sorry for your loss.")
    [out] = ann.end_reasonings([CONV])
    assert out.producer == FALLBACK and out.text.startswith("I ")


def test_behaviour_labels_only_when_asked_and_only_valid_ids():
    ann, _ = annotator(behaviors=lambda p: "B2, B99, B7")
    assert ann.behaviors([TurnView(utterance="x")]) == [["B2", "B7"]]
    assert "B13: uses disparaging" in backend_prompt(ann)
    off = Annotator(ScriptedBackend({}), AnnotatorParams(label_behaviors=False))
    assert off.behaviors([TurnView(utterance="x")]) is None


def backend_prompt(ann: Annotator) -> str:
    return ann.templates["behaviors"].messages(catalog="B13: uses disparaging", context="",
                                               utterance="x")[-1]["content"]


def test_no_backend_means_rules_only():
    ann = make_annotator(AnnotatorParams(backend="none"))
    assert ann.producer == FALLBACK
    assert ann.goals([CONV])[0].producer == FALLBACK
    assert ann.reasonings([TurnView(utterance="continue", labels=("terse",))])[0].text


def test_prompt_templates_load_and_render():
    for kind in KINDS:
        template = PromptTemplate.load(f"annotate_{kind}")
        assert "<!--" not in template.user and template.system
    reasoning = PromptTemplate.load("annotate_reasoning")
    msgs = reasoning.messages(context="", utterance="fix {this} bug")
    assert msgs[-1]["content"].count("fix {this} bug") == 1 and reasoning.prefill == "I want"


# --- local HF backend wiring ---------------------------------------------------------------
def test_hf_backend_prepends_prefill_and_checks_lengths():
    seen = {}

    def fake_generate(batch, prefills, max_new_tokens, desc):
        seen.update(n=len(batch), max_new_tokens=max_new_tokens, prefills=list(prefills))
        return [" the tests to pass."] * len(batch)

    backend = HFBackend(fake_generate, "hf:fake")
    ann = Annotator(backend, AnnotatorParams(reasoning_max_new_tokens=7))
    [out] = ann.reasonings([TurnView(utterance="make the tests pass", first=True)])
    assert out.text == "I want the tests to pass." and out.producer == "annotator:hf:fake"
    assert seen == {"n": 1, "max_new_tokens": 7, "prefills": ["I want"]}
    broken = HFBackend(lambda *a: [], "hf:broken")
    with pytest.raises(AnnotatorError, match="0 outputs for 1 prompts"):
        broken.complete([[{"role": "user", "content": "x"}]], [""], 4, "x")


def test_params_are_checked():
    with pytest.raises(ValueError, match="backend"):
        AnnotatorParams(backend="vllm")
    with pytest.raises(ValueError, match="goal_max_jaccard"):
        AnnotatorParams(goal_max_jaccard=0)


@pytest.mark.slow
def test_tiny_local_model_end_to_end():
    """The real local path on the tiny random model: its noise must end in recorded fallbacks."""
    pytest.importorskip("mimesis.models.base")
    params = AnnotatorParams(model="tiny-llama", batch_size=4, reasoning_max_new_tokens=6,
                             goal_max_new_tokens=6, end_max_new_tokens=6)
    ann = make_annotator(params, seed=1)
    assert ann.producer == "annotator:hf:tiny-llama"
    turns = [TurnView(utterance=u, first=i == 0) for i, u in enumerate(CONV.user_turns)]
    for produced in [*ann.reasonings(turns), *ann.end_reasonings([CONV])]:
        assert produced.producer in (FALLBACK, ann.producer)
        assert produced.text.startswith(("I", "My", "Me"))
    [goal] = ann.goals([CONV])
    assert goal is not None and not ann.is_copy(goal.text, FIRST)


def test_hf_backend_stops_rows_at_single_token_sentence_ends():
    from types import SimpleNamespace

    model = SimpleNamespace(generation_config=SimpleNamespace(eos_token_id=2,
                                                              repetition_penalty=1.0))
    codes = {".": [5], "!": [6], "?": [7, 8]}  # "?" is two tokens here: it cannot stop a row
    tokenizer = SimpleNamespace(encode=lambda text, add_special_tokens: codes[text],
                                eos_token_id=2)
    HFBackend.from_model(model, tokenizer, "hf:x", temperature=0.0, batch_size=2,
                         max_prompt_tokens=64, repetition_penalty=1.1, seed=0,
                         stop_texts=(".", "!", "?"))
    assert model.generation_config.eos_token_id == [2, 5, 6]
    assert model.generation_config.repetition_penalty == 1.1


def test_degenerate_loops_and_empty_end_reasons_fall_back():
    assert parsing.clean_first_person("I want to love her, not to love her, but to love her.") == ""
    assert parsing.clean_first_person("I want this, and I want to see it.") != ""
    assert parsing.clean_first_person("I am done because Iodododododod.") == ""
    assert parsing.clean_first_person("I want a committee in Mississippi.") != ""
    ann, _ = annotator(end=lambda p: " am too.")
    assert ann.end_reasonings([CONV])[0].producer == FALLBACK
