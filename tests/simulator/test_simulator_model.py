"""End to end with a real (tiny, random) model: generation through the chat template, parsing,
and the agent never receiving what was inside ``<think>``.

The reasoning is prefilled (as a thinking simulator is driven) and handed back with the model's
real continuation: closed (the model writes the utterance) or still open (cut by max tokens).
"""

from __future__ import annotations

import pytest

from mimesis.schemas import Scenario
from mimesis.simulator.runtime import UserSimulator, build_view

SECRET = "zanzibar-quokka-7319"
SCENARIO = Scenario(goal="Find a cheap flight to Denver", annotator="test")


@pytest.fixture(scope="module")
def generator():
    from mimesis.models.base import load_base
    from mimesis.models.generation import ChatGenerator, GenerationConfig

    model, tokenizer = load_base("tiny-llama")
    config = GenerationConfig(max_new_tokens=12, temperature=0.0, batch_size=4)
    return ChatGenerator(model, tokenizer, config, name="hf:tiny-llama")


def prefilled(generator, prefill: str):
    def generate(batch):
        continuations = generator.generate(batch, prefills=[prefill] * len(batch))
        return [prefill + text for text in continuations]
    return generate


@pytest.mark.slow
def test_closed_think_block_stays_private_over_two_turns(generator) -> None:
    sim = UserSimulator(prefilled(generator, f"<think>{SECRET}</think>\n"), max_turns=3)
    (message, state), = sim.next_messages([(None, sim.init_state(SCENARIO))])
    continuation = state.raw[0].split("</think>", 1)[1].strip()
    assert SECRET not in message and "think>" not in message
    assert message == continuation or state.ended  # what the model said is what the agent gets
    if state.ended:
        pytest.skip(f"the random model wrote no utterance: {state.raw}")
    assert state.private[0] == SECRET
    message2, state2 = sim.next_message("Where are you flying from?", state)
    assert SECRET not in message2
    rendered = generator.render(build_view(state2)[:3])  # the training view, through the template
    assert f"<|im_start|>assistant\n<think>{SECRET}</think>\n{message}<|im_end|>" in rendered


@pytest.mark.slow
def test_think_block_cut_by_max_tokens_sends_nothing(generator) -> None:
    sim = UserSimulator(prefilled(generator, f"<think>I know {SECRET} and"), max_turns=3)
    message, state = sim.next_message(None, sim.init_state(SCENARIO))
    if any("</think>" in raw for raw in state.raw):
        pytest.skip(f"the random model closed the block itself: {state.raw}")
    assert message == "" and state.end_reason == "empty_turn" and len(state.raw) == 2
    assert all(SECRET in raw for raw in state.raw) and SECRET in state.end_reasoning
