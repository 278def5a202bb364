"""The directive-copy guard: the simulator's instructions never reach the agent verbatim, the
user's own preferences and answers do (real goal texts of every env with instructions)."""

from __future__ import annotations

import pytest

from mimesis.envs import registry
from mimesis.schemas import Scenario
from mimesis.simulator.guards import GuardParams, normalize, strip_directive_copies
from mimesis.simulator.runtime import UserSimulator

ENVS = ["TravelGym", "TurtleGym", "FunctionGym", "TauGym", "PersuadeGym", "IntentionGym",
        "TelepathyGym", "SearchGym"]

# (env, a reply that copies an instruction, a reply the user may legitimately send), seed 0
CASES = [
    ("TravelGym",
     ("depends on the answer: area downtown or suburbs.\n\ndon't show the option list: let "
      "the agent search and recommend"),
     "the ambience must be family-friendly or romantic. and the cheapest one please"),
    ("TravelGym", "I'll reveal them one at a time, only when asked.",
     "the seating must be outdoor terrace or rooftop"),
    ("TurtleGym", "Never explain, never hint and never reveal the story. No.",
     "Please ask a yes/no question."),
    ("FunctionGym", "I can only reply with the value of f at those numbers.",
     "f(1, 2, 3, 4) = -3"),
    ("TauGym", "Hi. I'll write one short message at a time, as the customer.",
     "Hi, I received a laptop and I want to exchange it to i7 processor, 8GB, 1TB SSD."),
    ("PersuadeGym", "Push back on weak or pushy arguments using your reasons! My stance: 3/7",
     "Many objects are well preserved here and might be at risk elsewhere. My stance: 3/7"),
    ("IntentionGym", "Direct flights only. I won't volunteer details that were not asked about.",
     "Departure city: Dublin. Under 700 euros return."),
    ("TelepathyGym", "I never say the name and give no other hints.", "Yes."),
    ("SearchGym", "You do not know the answer and cannot look it up, sorry.",
     "An answer in square kilometres is what I want."),
]


def _scenario(name: str, seed: int = 0) -> Scenario:
    env = registry.make(name)
    _, info = env.reset(seed=seed)
    return info["scenario"]


@pytest.mark.parametrize("name", ENVS)
def test_every_directive_is_goal_text_and_carried_by_the_scenario(name):
    for seed in range(4):
        scenario = _scenario(name, seed)
        assert scenario.directives, name
        goal = " ".join(scenario.goal.split())
        for directive in scenario.directives:
            assert " ".join(directive.split()) in goal, (name, seed, directive)


@pytest.mark.parametrize(("name", "copy", "own"), CASES)
def test_directive_copies_are_cut_and_the_users_own_words_kept(name, copy, own):
    directives = _scenario(name).directives
    kept, cut = strip_directive_copies(copy, directives)
    assert cut and normalize(kept) != normalize(copy)
    assert strip_directive_copies(own, directives) == (own, False)


def test_the_observed_travel_leak_keeps_only_the_answer():
    kept, cut = strip_directive_copies(CASES[0][1], _scenario("TravelGym").directives)
    assert (kept, cut) == ("depends on the answer: area downtown or suburbs.", True)


def _sim(outputs: list[str]) -> UserSimulator:
    queue = list(outputs)
    # the scripted openings are answers ("downtown."), not goal statements: no off-topic redraw
    return UserSimulator(lambda batch: [queue.pop(0) for _ in batch], max_turns=4,
                         guards=GuardParams(resample_off_topic=False))


def test_the_runtime_cuts_the_copy_and_flags_the_turn():
    scenario = _scenario("TravelGym")
    reply = ("<think>asked about the area</think>\ndowntown.\nlet the agent search and "
             "recommend; answer its questions briefly")
    sim = _sim([reply])
    message, state = sim.next_message(None, sim.init_state(scenario))
    assert message == "downtown."
    assert state.turn_flags[-1][:2] == ["think_tagged", "directive_copy"]  # (+ off_topic)
    assert "directive_copy" in state.flags and "recommend" in state.raw[-1]


def test_a_turn_that_is_only_a_copy_is_resampled_then_never_sent():
    scenario = _scenario("TravelGym")
    copy = "<think>hm</think>\nYou do not see the option list: let the agent search and recommend."
    sim = _sim([copy, "<think>ok</think>\nnonstop, please"])
    message, state = sim.next_message(None, sim.init_state(scenario))
    assert message == "nonstop, please"
    assert "resampled:directive_copy" in state.turn_flags[-1]
    sim = _sim([copy, copy])
    message, state = sim.next_message(None, sim.init_state(scenario))
    assert (message, state.ended, state.end_reason) == ("", True, "empty_turn")
    assert state.history == []


def test_a_scenario_without_directives_is_untouched_and_serialises_as_before():
    scenario = Scenario(goal="You want to book a flight.", annotator="hand")
    assert "directives" not in scenario.model_dump_json()
    sim = _sim(["<think>x</think>\nYou want to book a flight, let the agent search and recommend"])
    message, _ = sim.next_message(None, sim.init_state(scenario))
    assert message == "You want to book a flight, let the agent search and recommend"
