"""Rule-based behaviour and trait detectors on hand-written turns, with context where needed."""

from __future__ import annotations

import pytest

from mimesis.behaviors.catalog import BEHAVIOR_IDS
from mimesis.behaviors.rules import DETECTORS, RuleResult, detect_rules
from mimesis.behaviors.traits import detect_traits
from mimesis.schemas import Turn

PLAN = "Here is a 3-day plan: day 1 visit the museum by car, day 2 use the metro app, day 3 relax."
CLARIFY = "Happy to help! What kind of cuisine do you prefer, and how many guests are coming?"
REFUSE = "I'm sorry, but as an AI I cannot browse the internet or open links."


def chat(*texts: str) -> list[Turn]:
    """Alternating turns, user first."""
    return [Turn(role="user" if i % 2 == 0 else "assistant", text=t) for i, t in enumerate(texts)]


def behaviors(*texts: str) -> list[str]:
    """Rule behaviours of the last turn of ``chat(*texts)``."""
    return detect_rules(chat(*texts), len(texts) - 1).behaviors


# (behaviour, positive conversation, negative conversation); the last turn is the labelled one.
CASES = [
    ("B1", ("write a cafe slogan", "Fresh coffee, fresh start.", "meh, that's too formal"),
     ("write a formal cafe slogan", "Fresh coffee, fresh start.", "nice, another one?")),
    ("B2", ("plan a trip to Rome", PLAN, "oh and it must be vegan friendly too"),
     ("plan a trip to Rome", PLAN, "what is the weather like there?")),
    ("B3", ("plan a dinner party", CLARIFY, "whatever, just pick something"),
     ("plan a dinner party", CLARIFY, "Italian, and six guests")),
    ("B4", ("open this link and summarise it: example.com/report", REFUSE,
            "just open the link and summarise it"),
     ("open this link and summarise it: example.com/report", REFUSE,
      "ok here is the text of the report instead")),
    ("B5", ("book a table", "Booked a table for 2 at 7pm.",
            "obviously I meant for 8 people, how did you not know that"),
     ("book a table", "Booked a table for 2 at 7pm.", "great, and for 8 people next week too")),
    ("B6", ("fix my sql query", "Could you share the table schema?",
            "anyway, different question: how do I bake bread?"),
     ("fix my sql query", "Could you share the table schema?", "users(id int, name text)")),
    ("B7", ("how do I get to the airport", PLAN, "no car, no metro, no taxi"),
     ("how do I get to the airport", PLAN, "which of these is cheapest?")),
    ("B8", ("list python web frameworks", "Flask, Django and FastAPI are popular.",
            "you said that Rails is the fastest python framework"),
     ("list python web frameworks", "Flask, Django and FastAPI are popular.",
      "you said Django, tell me more about Django")),
    ("B9", ("fix the bug", "Try adding a null check before the loop.", "still not working??"),
     ("fix the bug", "Try adding a null check before the loop.",
      "it fails with KeyError: 'name' on line 12 of parse.py")),
    ("B10", ("help me set up nginx", "First, install nginx with apt.",
             "never mind, I'll do it myself"),
     ("help me set up nginx", "First, install nginx with apt.", "done, what's next?")),
    ("B11", ("write a 300 words essay on bees", "Bees are vital pollinators...",
             "The essay has to be 100 words."),
     ("write a 300 words essay on bees", "Bees are vital pollinators...",
      "Actually make it 100 words instead.")),
    ("B12", ("hi", "Hello! How can I help?",
             ("What is Docker? How does it differ from a VM? Can you list pros and cons? "
              "Also write a Dockerfile.")),
     ("hi", "Hello! How can I help?", "What is Docker?")),
    ("B13", ("summarise this", "Here is a summary.", "are you stupid? do your job properly"),
     ("summarise this", "Here is a summary.", "thanks, can you make it shorter?")),
]


@pytest.mark.parametrize(("bid", "positive", "negative"), CASES, ids=[c[0] for c in CASES])
def test_each_behaviour_fires_on_positive_and_not_on_negative(bid, positive, negative):
    assert bid in behaviors(*positive)
    assert bid not in behaviors(*negative)


def test_every_catalogue_behaviour_has_a_detector_and_a_case():
    assert tuple(DETECTORS) == BEHAVIOR_IDS
    assert [c[0] for c in CASES] == list(BEHAVIOR_IDS)


@pytest.mark.parametrize("bid", ["B2", "B4", "B6", "B8", "B11"])
def test_context_dependent_behaviours_need_the_preceding_turns(bid):
    positive = next(c[1] for c in CASES if c[0] == bid)
    alone = detect_rules(chat(positive[-1]), 0).behaviors
    # Without context the same words are no goalpost shift, persistence, switch or contradiction;
    # B8 flips the other way: quoting an agent that never spoke is itself a false premise.
    assert (bid in alone) == (bid == "B8")


def test_clarifying_question_does_not_count_when_it_is_a_closing_offer():
    closing = "Here is the code. Let me know if you have any other questions?"
    assert "B3" not in behaviors("write code", closing, "whatever")


def test_rules_use_only_turns_up_to_index():
    turns = chat("plan a trip", PLAN, "oh and it must be cheap", "Sure.", "thanks!")
    assert detect_rules(turns[:3], 2) == detect_rules(turns, 2)


def test_detect_rules_rejects_agent_turns_and_bad_indices():
    turns = chat("hi", "Hello!")
    with pytest.raises(ValueError, match="not a user turn"):
        detect_rules(turns, 1)
    with pytest.raises(IndexError):
        detect_rules(turns, 5)


def test_detect_rules_returns_catalogue_order_and_traits():
    result = detect_rules(chat("hi", "Hello!", "faster!!! come on, you are useless"), 2)
    assert isinstance(result, RuleResult)
    assert result.behaviors == sorted(result.behaviors, key=BEHAVIOR_IDS.index)
    assert {"B9", "B13"} <= set(result.behaviors)
    assert "typo_rich" in result.traits  # "!!!"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("continue", {"terse"}),
        ("more please", {"terse"}),
        ("Thanks, that's all I needed!", {"thanks_and_leave"}),
        ("thx", {"terse", "typo_rich", "thanks_and_leave"}),
        ("i dont get why u did that", {"typo_rich"}),
        ("can you explain the second step again in more detail", {"typo_rich"}),
        ("Can you explain the second step again in more detail?", set()),
        ("Fix this:\n```python\ndef f(x):\n    return x +\n```", {"pasted_content"}),
        ("Summarise the following article: " + "Lorem ipsum dolor sit amet. " * 20,
         {"pasted_content"}),
        ("Thanks! Now can you also write the tests?", set()),
    ],
)
def test_traits(text, expected):
    assert set(detect_traits(text)) == expected


def test_docstring_examples_hold():
    import doctest

    from mimesis.behaviors import fallbacks, parsing, rules, traits

    for module in (rules, traits, parsing, fallbacks):
        assert doctest.testmod(module).failed == 0, module.__name__
