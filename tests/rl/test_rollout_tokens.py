"""Message-level token assembly with the tiny tokenizer's own template (docs/pitfalls.md #7, #8,
#10)."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from mimesis.models.base import base_dir
from mimesis.models.engine.tokens import TemplateDriftError, Transcript, encode, render

# A Qwen3-style template: an assistant message that is followed by a later message loses its
# <think> block. Otherwise plain ChatML, like the tiny model's own template.
DROP_THINK_TEMPLATE = (
    "{%- for message in messages %}"
    "{%- set content = message['content'] %}"
    "{%- if message['role'] == 'assistant' and not loop.last and '</think>' in content %}"
    "{%- set content = content.split('</think>')[-1].lstrip('\\n') %}"
    "{%- endif %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + content + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{%- endif %}"
)


@pytest.fixture(scope="module")
def tok():
    return AutoTokenizer.from_pretrained(base_dir("tiny-llama"))


@pytest.fixture
def drop_think_tok():
    tokenizer = AutoTokenizer.from_pretrained(base_dir("tiny-llama"))
    tokenizer.chat_template = DROP_THINK_TEMPLATE
    return tokenizer


def sampled(tok, text: str, stop: bool = True) -> tuple[list[int], list[float]]:
    ids = encode(tok, text) + ([tok.eos_token_id] if stop else [])
    return ids, [-0.5] * len(ids)


def test_agent_tokens_are_verbatim_and_injected_tokens_masked(tok) -> None:
    t = Transcript.start(tok, [{"role": "user", "content": "Find the rule."}])
    turns = [sampled(tok, "<think>ask first</think>\n[action] What is f(1, 2, 3, 4)?"),
             sampled(tok, "[answer] 7")]
    t.add_agent(*turns[0])
    injected = t.add_message({"role": "user", "content": "f(1, 2, 3, 4) = 7"})
    t.add_agent(*turns[1])
    ids0, ids1 = turns[0][0], turns[1][0]
    assert t.completion_ids == ids0 + injected + ids1
    assert t.env_mask == [1] * len(ids0) + [0] * len(injected) + [1] * len(ids1)
    assert t.logprobs == [-0.5] * len(ids0) + [0.0] * len(injected) + [-0.5] * len(ids1)
    assert t.turn_ids == [0] * (len(ids0) + len(injected)) + [1] * len(ids1)
    # The injected part is the template's: end of the agent block, the user turn, the next
    # generation prompt — and not one sampled token.
    assert tok.decode(injected) == "\n<|im_start|>user\nf(1, 2, 3, 4) = 7<|im_end|>\n<|im_start|>assistant\n"
    # The whole sequence is the template's rendering of the whole conversation
    # (docs/pitfalls.md #7, #10); the only thing after the last sampled EOS is the template's
    # closing newline.
    full = tok.apply_chat_template(t.messages, tokenize=True)["input_ids"]
    assert full[:len(t.ids())] == t.ids()
    assert tok.decode(full[len(t.ids()):]) == "\n"
    assert t.messages[1]["content"] == "<think>ask first</think>\n[action] What is f(1, 2, 3, 4)?"


def test_turn_cut_by_length_gets_the_closing_token_as_injected(tok) -> None:
    t = Transcript.start(tok, [{"role": "user", "content": "hi"}])
    ids, lps = sampled(tok, "[action] a long question that was cut", stop=False)
    t.add_agent(ids, lps)
    injected = t.add_message({"role": "tool", "content": "result"})
    # <|im_end|> closes the agent block but was not sampled: it is injected (mask 0).
    assert injected[0] == tok.eos_token_id and t.env_mask[len(ids)] == 0
    assert t.ids() == encode(tok, render(tok, t.messages, add_generation_prompt=True))


def test_think_dropping_template_is_detected(drop_think_tok) -> None:
    t = Transcript.start(drop_think_tok, [{"role": "user", "content": "Find the rule."}])
    t.add_agent(*sampled(drop_think_tok, "<think>ask first</think>\n[action] f(1, 2, 3, 4)?"))
    with pytest.raises(TemplateDriftError, match="docs/pitfalls.md #8"):
        t.add_message({"role": "user", "content": "7"})


def test_think_dropping_template_without_think_blocks_is_fine(drop_think_tok) -> None:
    t = Transcript.start(drop_think_tok, [{"role": "user", "content": "Find the rule."}])
    t.add_agent(*sampled(drop_think_tok, "[action] f(1, 2, 3, 4)?"))
    t.add_message({"role": "user", "content": "7"})
    t.add_agent(*sampled(drop_think_tok, "[answer] 7"))
    rendered = encode(drop_think_tok, render(drop_think_tok, t.messages, False))
    assert rendered[:len(t.ids())] == t.ids()


def test_cut_keeps_a_prefix_of_every_field(tok) -> None:
    t = Transcript.start(tok, [{"role": "user", "content": "hi"}])
    t.add_agent(*sampled(tok, "[action] one two three"))
    t.add_message({"role": "user", "content": "four five six"})
    before = list(t.completion_ids)
    assert t.cut(len(before) - 3) and not t.cut(len(before))
    assert t.completion_ids == before[:-3]
    assert len(t.env_mask) == len(t.logprobs) == len(t.turn_ids) == len(before) - 3
    assert t.text == tok.decode(t.ids(), skip_special_tokens=False)


def test_two_agent_turns_in_a_row_are_refused(tok) -> None:
    t = Transcript.start(tok, [{"role": "user", "content": "hi"}])
    t.add_agent(*sampled(tok, "[action] a"))
    with pytest.raises(ValueError, match="two agent turns"):
        t.add_agent(*sampled(tok, "[action] b"))


def test_the_engine_stops_on_a_think_dropping_template(drop_think_tok) -> None:
    from mimesis.models.engine.sampling import Sample
    from mimesis.rollout.engine import RolloutEngine
    from mimesis.rollout.records import RolloutParams, ScenarioSpec
    from mimesis.simulator.runtime import UserSimulator

    def agent(prompts, limits):
        ids = encode(drop_think_tok, "<think>look first</think>\n[search] test")
        return [Sample(ids + [drop_think_tok.eos_token_id], [-1.0] * (len(ids) + 1))] * len(prompts)

    sim = UserSimulator(lambda views: ["7"] * len(views))
    engine = RolloutEngine(agent, drop_think_tok, sim, RolloutParams(group_size=2), progress=False)
    with pytest.raises(TemplateDriftError, match="think"):
        engine.run([ScenarioSpec(env="FunctionGym", seed=1)])
