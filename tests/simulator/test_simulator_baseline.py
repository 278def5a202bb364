"""The prompted-user baseline runs behind the same simulator, view and guards as the trained one."""

from __future__ import annotations

from mimesis.format import END_SIGNAL
from mimesis.schemas import Scenario, Turn
from mimesis.simulator.baseline import (
    prompted_user_simulator,
    render_prompted_system_prompt,
    render_prompted_user_messages,
)
from mimesis.simulator.prompts import render_system_prompt
from mimesis.simulator.runtime import UserSimulator, build_view

SCENARIO = Scenario(goal="Get a refund for a late order", behaviors=["B9"], traits=["terse"],
                    annotator="test")


def test_prompt_plays_the_user_with_goal_directives_and_end_signal() -> None:
    prompt = render_prompted_system_prompt(SCENARIO)
    assert "Get a refund for a late order" in prompt
    assert "You get impatient" in prompt and "very short messages" in prompt
    assert END_SIGNAL in prompt and "<think></think>" in prompt
    assert "never the assistant" in prompt
    assert prompt != render_system_prompt(SCENARIO)
    assert "{" not in prompt  # every placeholder filled


def test_messages_share_the_trained_view_but_the_system_prompt() -> None:
    history = [Turn(role="user", text="my order is late"), Turn(role="assistant", text="Sorry!")]
    messages = render_prompted_user_messages(SCENARIO, history, ["annoyed"])
    trained = build_view(UserSimulator(lambda b: []).init_state(SCENARIO).model_copy(
        update={"history": history, "private": ["annoyed"]}))
    assert messages[1:] == trained[1:]
    assert messages[1] == {"role": "assistant",
                           "content": "<think>annoyed</think>\nmy order is late"}
    assert messages[0]["content"] == render_prompted_system_prompt(SCENARIO)
    assert render_prompted_user_messages(SCENARIO, history)[1]["content"].startswith(
        "<think></think>")


def test_baseline_simulator_uses_its_prompt_and_the_guards() -> None:
    seen: list[list[dict[str, str]]] = []

    def generate(batch: list[list[dict[str, str]]]) -> list[str]:
        seen.extend(batch)
        return ["Thinking Process: be the user.\n\nmy order is late"] if len(seen) == 1 else [
            "I'd be happy to help you with anything else!"]

    sim = prompted_user_simulator(generate, max_turns=4)
    message, state = sim.next_message(None, sim.init_state(SCENARIO))
    assert message == "my order is late" and state.private[0].startswith("Thinking Process")
    assert seen[0] == [{"role": "system", "content": render_prompted_system_prompt(SCENARIO)}]
    _, state = sim.next_message("Sorry about that.", state)
    assert "role_flip" in state.turn_flags[1] and sim.max_turns == 4
