"""The run-time simulator against scripted fake models: one test per docs/pitfalls.md item #1–#6.

Each fake ``generate_fn`` returns canned raw outputs and records the views it was given.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest

from mimesis.schemas import Scenario
from mimesis.simulator.guards import GuardParams
from mimesis.simulator.runtime import NO_REPLY, UserSimulator, UserState, build_view

GOAL = "Book a one-way flight from Boston to Denver on March 3 for two adults in economy"
SCENARIO = Scenario(goal=GOAL, behaviors=["B3"], traits=["terse"], annotator="test")


class Scripted:
    """A fake model: pops canned outputs in order; ``reply`` may instead compute one per view."""

    def __init__(self, outputs: list[str] | None = None,
                 reply: Callable[[list[dict[str, str]]], str] | None = None) -> None:
        self.outputs = list(outputs or [])
        self.reply = reply
        self.calls: list[list[list[dict[str, str]]]] = []

    def __call__(self, batch: list[list[dict[str, str]]]) -> list[str]:
        self.calls.append(copy.deepcopy(batch))
        if self.reply is not None:
            return [self.reply(view) for view in batch]
        return [self.outputs.pop(0) for _ in batch]


def talk(sim: UserSimulator, agent_replies: list[str]) -> tuple[list[str], UserState]:
    """Run an episode: opening turn, then one user turn per agent reply until it ends."""
    message, state = sim.next_message(None, sim.init_state(SCENARIO))
    sent = [message]
    for reply in agent_replies:
        if state.ended:
            break
        message, state = sim.next_message(reply, state)
        sent.append(message)
    return sent, state


# docs/pitfalls.md #1: stopping too early ----------------------------------------------------------
def test_confirmation_with_end_signal_is_sent_and_the_end_deferred() -> None:
    model = Scripted(["<think>start vague</think>\nneed a flight to denver",
                      "<think>good price</think>\nyes please book it <|end_conversation|>",
                      *["<think>booked, done</think>\n<|end_conversation|>"] * 3])  # end_draws
    sim = UserSimulator(model)
    sent, state = talk(sim, ["UA 123 at $300, shall I book it?", "Done, it is booked."])
    assert sent == ["need a flight to denver", "yes please book it", ""]
    assert state.history[-1].text == "Done, it is booked."  # the agent did carry it out
    assert state.ended and state.end_reason == "end_signal"
    assert "end_deferred" in state.turn_flags[1]
    assert state.end_reasoning == "booked, done"


# docs/pitfalls.md #2: restarting after success ----------------------------------------------------
def test_ended_episode_never_calls_the_model_again() -> None:
    model = Scripted(["need a flight to denver", *["<|end_conversation|>"] * 3])
    sim = UserSimulator(model)
    _, state = talk(sim, ["Booked!"])
    assert state.ended and len(model.calls) == 4
    for reply in ["Anything else?", "Hello?", ""]:
        message, state = sim.next_message(reply, state)
        assert (message, state.ended, state.end_reason) == ("", True, "end_signal")
    assert len(model.calls) == 4
    assert state.history[-1].text == "Booked!"  # replies after the end are not recorded


def test_repeating_the_opening_request_ends_the_episode_as_a_restart() -> None:
    model = Scripted(["Hi, I need to book a flight to Denver please",
                      "yes book it",
                      "hi I need to book a flight to Denver, please!",
                      "Hi, I need to book a flight to Denver please."])  # drawn again: a repeat
    sent, state = talk(UserSimulator(model), ["Found one for $300. Book it?", "Booked!"])
    assert sent == ["Hi, I need to book a flight to Denver please", "yes book it", ""]
    assert state.end_reason == "restart" and "resampled:restart" in state.flags
    assert state.turns == 2 and len(model.calls) == 4
    once = Scripted(["Hi, I need to book a flight to Denver please", "yes book it",
                     "hi I need to book a flight to Denver, please!", "thanks, all good"])
    sent, state = talk(UserSimulator(once), ["Found one for $300. Book it?", "Booked!"])
    assert sent[-1] == "thanks, all good" and not state.ended


def test_short_repeats_are_not_restarts() -> None:
    model = Scripted(["need a flight to denver", "yes", "yes"])
    sent, state = talk(UserSimulator(model), ["Boston?", "March 3?"])
    assert sent[1:] == ["yes", "yes"] and not state.ended


# docs/pitfalls.md #3: reasoning leaks -------------------------------------------------------------
@pytest.mark.parametrize("raw", [
    "<think>hide the date secretword</think>\nneed a flight to denver",
    ("Thinking Process:\n1. The assistant greeted me.\n2. hide the date secretword\n"
    "need a flight to denver"),
    "Reasoning: hide the date secretword.\n\nneed a flight to denver",
    "(thinking) hide the date secretword\nneed a flight to denver",
    "Let me think... hide the date secretword.\n\nneed a flight to denver",
])
def test_agent_never_sees_reasoning_but_the_simulator_keeps_it(raw: str) -> None:
    model = Scripted([raw, *["<|end_conversation|>"] * 3])
    sim = UserSimulator(model)
    message, state = sim.next_message(None, sim.init_state(SCENARIO))
    assert message == "need a flight to denver"
    assert "secretword" in state.private[0]
    assert all("secretword" not in t.text for t in state.history)
    sim.next_message("Sure, from where?", state)
    own = model.calls[1][0][1]  # the simulator's view of its own first turn: canonical form
    assert own == {"role": "assistant",
                   "content": f"<think>{state.private[0]}</think>\nneed a flight to denver"}


# docs/pitfalls.md #4: role flip -------------------------------------------------------------------
def test_assistant_like_turn_is_flagged_and_recorded() -> None:
    model = Scripted(["need a flight", "Certainly! Here are some options for your trip."])
    sent, state = talk(UserSimulator(model), ["Where to?"])
    assert sent[1].startswith("Certainly!")
    assert state.turn_flags[1] == ["role_flip"] and "role_flip" in state.flags
    assert state.turn_flags[0] == []


def test_assistant_like_turn_is_resampled_once_when_asked() -> None:
    model = Scripted(["need a flight", "How can I assist you today?", "denver, march 3"])
    sim = UserSimulator(model, guards=GuardParams(resample_role_flip=True))
    sent, state = talk(sim, ["Where to?"])
    assert sent[1] == "denver, march 3"
    assert state.turn_flags[1] == ["resampled:role_flip"]
    assert len(model.calls) == 3 and model.calls[1] == model.calls[2]  # same view resampled
    assert state.raw[1] == "How can I assist you today?"


def test_view_has_training_roles_and_the_opening_is_never_resent() -> None:
    opening = "need a flight to denver"

    def model(view: list[dict[str, str]]) -> str:
        # Like a real model, it writes an opening when its view shows no turn of its own.
        own = [m for m in view if m["role"] == "assistant"]
        return opening if not own else f"<think>step {len(own)}</think>\nfollow-up {len(own)}"

    fake = Scripted(reply=model)
    sent, _ = talk(UserSimulator(fake), ["From where?", "Which date?"])
    assert sent == [opening, "follow-up 1", "follow-up 2"]
    view = fake.calls[-1][0]
    assert [m["role"] for m in view] == ["system", "assistant", "user", "assistant", "user"]
    assert view[0]["content"].startswith("You are a real person")
    assert view[1]["content"] == f"<think></think>\n{opening}"
    assert [view[2]["content"], view[4]["content"]] == ["From where?", "Which date?"]
    assert view[3]["content"] == "<think>step 1</think>\nfollow-up 1"


# docs/pitfalls.md #5: goal dumping ----------------------------------------------------------------
def test_first_turn_that_dumps_the_goal_is_flagged_with_its_overlap() -> None:
    model = Scripted([f"I want to {GOAL.lower()}", "two adults"])
    _sent, state = talk(UserSimulator(model), ["OK, anything else?"])
    assert "goal_dump" in state.turn_flags[0] and state.goal_overlap[0] == 1.0
    assert len(state.goal_overlap) == 2 and "goal_dump" not in state.turn_flags[1]


def test_goal_dump_resample_keeps_the_vaguer_turn() -> None:
    model = Scripted([f"I want to {GOAL.lower()}", "hey, flights to denver?"])
    sim = UserSimulator(model, guards=GuardParams(resample_goal_dump=True))
    message, state = sim.next_message(None, sim.init_state(SCENARIO))
    assert message == "hey, flights to denver?"
    assert state.turn_flags[0] == ["resampled:goal_dump"]
    assert state.goal_overlap[0] < GuardParams().goal_dump_threshold


def test_vague_opening_is_not_flagged() -> None:
    model = Scripted(["need a flight"])
    sim = UserSimulator(model)
    _, state = sim.next_message(None, sim.init_state(SCENARIO))
    assert state.turn_flags[0] == [] and 0 < state.goal_overlap[0] < 0.7


# docs/pitfalls.md #6: never ending ----------------------------------------------------------------
def test_turn_limit_ends_the_episode_without_another_generation() -> None:
    model = Scripted(["need a flight", "is there wifi on board", "what about checked bags",
                      "can I pick a window seat", "never generated"])
    sent, state = talk(UserSimulator(model, max_turns=3), ["a", "b", "c", "d"])
    assert state.turns == 3 and sent[-1] == ""
    assert state.ended and state.end_reason == "max_turns"
    assert len(model.calls) == 3


def test_end_signal_variant_ends_the_episode() -> None:
    model = Scripted(["need a flight", "<think>all set</think>\n[END]", "[END]", "[END]"])
    _, state = talk(UserSimulator(model), ["Booked."])
    assert state.end_reason == "end_signal" and "end_signal_variant" in state.flags


def test_thank_you_loop_ends() -> None:
    model = Scripted(["need a flight", "thanks!", "thank you so much!!", "never sent"])
    sent, state = talk(UserSimulator(model), ["Booked.", "You're welcome!", "Anytime!"])
    assert sent == ["need a flight", "thanks!", ""]
    assert state.end_reason == "pleasantries_loop" and len(model.calls) == 3


def test_empty_turn_is_resampled_then_ends_the_episode() -> None:
    model = Scripted(["need a flight", "<think>hmm what", "<think>still thinking about"])
    sent, state = talk(UserSimulator(model), ["From where?"])
    assert sent == ["need a flight", ""] and state.end_reason == "empty_turn"
    assert len(model.calls) == 3 and "resampled:empty_utterance" in state.flags


# Protocol -------------------------------------------------------------------------------------
def test_batched_turns_use_one_call_and_keep_the_order() -> None:
    def model(view: list[dict[str, str]]) -> str:
        goal = view[0]["content"].split("Your goal: ")[1].splitlines()[0]
        return f"about {goal}"

    fake = Scripted(reply=model)
    sim = UserSimulator(fake)
    states = [sim.init_state(Scenario(goal=g, annotator="t")) for g in ("cats", "dogs", "eels")]
    ended = states[1].model_copy(update={"ended": True, "end_reason": "end_signal"})
    out = sim.next_messages([(None, states[0]), (None, ended), (None, states[2])])
    assert [m for m, _ in out] == ["about cats", "", "about eels"]
    assert len(fake.calls) == 1 and len(fake.calls[0]) == 2


def test_next_message_leaves_the_given_state_alone() -> None:
    sim = UserSimulator(Scripted(["need a flight"]))
    state = sim.init_state(SCENARIO)
    _, new = sim.next_message(None, state)
    assert state.history == [] and new.turns == 1


def test_agent_may_speak_first_and_empty_agent_replies_are_visible() -> None:
    model = Scripted(["hi, a flight?", "hello??"])
    sim = UserSimulator(model)
    message, state = sim.next_message("Welcome to Air Demo!", sim.init_state(SCENARIO))
    assert message == "hi, a flight?" and state.history[0].role == "assistant"
    _, state = sim.next_message("  ", state)
    assert model.calls[1][0][-1] == {"role": "user", "content": NO_REPLY}


def test_protocol_errors() -> None:
    sim = UserSimulator(Scripted(["need a flight"]))
    _, state = sim.next_message(None, sim.init_state(SCENARIO))
    with pytest.raises(ValueError, match="None"):
        sim.next_message(None, state)
    bad = UserSimulator(lambda batch: [])
    with pytest.raises(ValueError, match="0 texts"):
        bad.next_message(None, bad.init_state(SCENARIO))
    with pytest.raises(ValueError):
        UserSimulator(Scripted(), max_turns=0)


def test_state_round_trips_as_json() -> None:
    model = Scripted(["<think>r</think>\nneed a flight", *["<|end_conversation|>"] * 3])
    _, state = talk(UserSimulator(model), ["Done."])
    again = UserState.model_validate_json(state.model_dump_json())
    assert again == state and build_view(again) == build_view(state)


def test_an_opening_that_only_ends_is_drawn_again() -> None:
    model = Scripted(["<think>done</think>\n<|end_conversation|>", "need a flight"])
    sim = UserSimulator(model)
    message, state = sim.next_message(None, sim.init_state(SCENARIO))
    assert message == "need a flight" and not state.ended
    assert "resampled:open_end" in state.flags and len(model.calls) == 2
    thrice = Scripted(["<|end_conversation|>"] * 3)
    message, state = UserSimulator(thrice).next_message(None, UserSimulator(thrice).init_state(SCENARIO))
    assert (message, state.ended, state.end_reason) == ("", True, "end_signal")
    assert len(thrice.calls) == 3
    off = Scripted(["<|end_conversation|>"])
    sim = UserSimulator(off, guards=GuardParams(resample_open_end=False))
    assert sim.next_message(None, sim.init_state(SCENARIO))[1].ended and len(off.calls) == 1


def test_a_later_end_needs_every_draw_to_end() -> None:
    # An end, then a turn that speaks: the end was a coin flip, so the turn is sent.
    model = Scripted(["need a flight", "<think>bored</think>\n<|end_conversation|>",
                      "<think>hm</think>\nand a hotel?"])
    sent, state = talk(UserSimulator(model), ["Which dates?"])
    assert sent == ["need a flight", "and a hotel?"] and not state.ended
    assert "resampled:end_confirm" in state.turn_flags[1] and len(model.calls) == 3
    # Two ends, then speech: still sent (end_draws = 3 by default).
    model = Scripted(["need a flight", "<|end_conversation|>", "[END]", "ok, and a hotel?"])
    sent, state = talk(UserSimulator(model), ["Which dates?"])
    assert sent[-1] == "ok, and a hotel?" and not state.ended and len(model.calls) == 4
    # Three ends: the episode ends, with the last draw's reasoning.
    both = Scripted(["need a flight", "<|end_conversation|>", "[END]",
                     "<think>done</think>\n[END]"])
    _, state = talk(UserSimulator(both), ["Booked."])
    assert state.ended and state.end_reason == "end_signal" and state.end_reasoning == "done"
    # end_draws = 1: the first end ends the episode.
    off = Scripted(["need a flight", "<|end_conversation|>"])
    _, state = talk(UserSimulator(off, guards=GuardParams(end_draws=1)), ["Booked."])
    assert state.ended and len(off.calls) == 2
    with pytest.raises(ValueError, match="end_draws"):
        GuardParams(end_draws=0)


def test_an_off_topic_opening_is_drawn_again_once() -> None:
    model = Scripted(["I like turtles.", "need a flight to denver"])
    sim = UserSimulator(model)
    message, state = sim.next_message(None, sim.init_state(SCENARIO))
    assert message == "need a flight to denver" and "resampled:off_topic" in state.turn_flags[0]
    stubborn = Scripted(["I like turtles.", "I like cats."])
    message, state = UserSimulator(stubborn).next_message(
        None, UserSimulator(stubborn).init_state(SCENARIO))
    assert message == "I like cats." and "off_topic" in state.turn_flags[0]  # sent, flagged
    off = Scripted(["I like turtles."])
    sim = UserSimulator(off, guards=GuardParams(resample_off_topic=False))
    assert sim.next_message(None, sim.init_state(SCENARIO))[0] == "I like turtles."


def test_a_redraw_is_counted_by_its_reason_not_by_how_the_draw_was_written() -> None:
    # every well-formed trained turn parses with think_tagged: counted as a reason, it read as
    # "a think tag inside the utterance" on 22-57 % of positions in the realism guard counts
    model = Scripted(["<think>turtles</think>\nI like turtles.",
                      "<think>flight</think>\nneed a flight to denver"])
    sim = UserSimulator(model)
    message, state = sim.next_message(None, sim.init_state(SCENARIO))
    assert message == "need a flight to denver"
    redraws = [f for f in state.turn_flags[0] if f.startswith("resampled:")]
    assert redraws == ["resampled:off_topic"]
    assert "think_tagged" in state.turn_flags[0]  # the sent draw's own parse flags stay


def test_each_rule_redraws_once_without_spending_another_rules_redraw() -> None:
    # off-topic opening -> redraw; that draw is empty -> its own redraw; then a good turn.
    model = Scripted(["I like turtles.", "<think>hmm", "need a flight to denver"])
    sim = UserSimulator(model)
    message, state = sim.next_message(None, sim.init_state(SCENARIO))
    assert message == "need a flight to denver" and len(model.calls) == 3
    assert {"resampled:off_topic", "resampled:empty_utterance"} <= set(state.turn_flags[0])


def test_a_degenerate_turn_is_drawn_again_once() -> None:
    model = Scripted(["need a flight", "<village>Denver</village>\n<village>Denver</village>",
                      "March 3, from Boston"])
    sent, state = talk(UserSimulator(model), ["Which dates?"])
    assert sent[-1] == "March 3, from Boston" and "resampled:junk" in state.turn_flags[1]
    stubborn = Scripted(["need a flight", "ok ok ok ok ok", "no no no no no"])
    sent, state = talk(UserSimulator(stubborn), ["Which dates?"])
    assert sent[-1] == "no no no no no" and "junk" in state.turn_flags[1]  # sent, flagged
