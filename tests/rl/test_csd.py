"""CSD pieces: the loss on hand-made logits, gate signs, the note as a chat-template user turn,
the coach's causal view, note parsing and the leakage filter."""

from __future__ import annotations

import copy
import math
from types import SimpleNamespace

import pytest
import torch

from mimesis.models.engine.tokens import Transcript, encode, render
from mimesis.rl.coach import CoachParams, find_leaks, note_requests, parse_note
from mimesis.rl.csd import csd_loss, teacher_sequence, token_logps

STUDENT = torch.tensor([[[2.0, 0.0, 0.0], [0.0, 1.0, 0.0]]])  # [B=1, T=2, V=3]
TEACHER = torch.tensor([[[0.0, 0.0, 3.0], [1.0, 3.0, 0.0]]])
Y = torch.tensor([[0, 1]])


def test_csd_loss_equals_hand_computed_value():
    student = token_logps(STUDENT, Y).requires_grad_(True)
    terms = csd_loss(student, token_logps(TEACHER, Y), torch.ones(1, 2), beta=5.0)
    # by hand: log softmax of the sampled tokens
    s0, s1 = 2 - math.log(math.e ** 2 + 2), 1 - math.log(math.e + 2)
    t0, t1 = -math.log(2 + math.e ** 3), 3 - math.log(math.e + math.e ** 3 + 1)
    g0, g1 = (1 / (1 + math.exp(-5 * (t - s))) for t, s in ((t0, s0), (t1, s1)))
    assert terms.loss.item() == pytest.approx(-(g0 * s0 + g1 * s1) / 2, abs=1e-6)
    assert terms.loss.item() == pytest.approx(0.2400973, abs=1e-6)
    assert terms.delta.tolist() == pytest.approx([t0 - s0, t1 - s1], abs=1e-6)
    # the gradient is −g/n on each sampled log-prob: g is a constant (stop-gradient Δ)
    terms.loss.backward()
    assert student.grad[0].tolist() == pytest.approx([-g0 / 2, -g1 / 2], abs=1e-6)


def test_gate_and_delta_signs():
    student = torch.tensor([[-2.0, -2.0, -2.0]])
    teacher = torch.tensor([[-0.5, -2.0, -4.0]])  # more, equally, less confident
    terms = csd_loss(student, teacher, torch.ones(1, 3), beta=5.0)
    assert terms.delta.tolist() == [1.5, 0.0, -2.0]
    assert terms.gate[0] > 0.5 and terms.gate[1] == 0.5 and terms.gate[2] < 0.5


def test_csd_loss_ignores_masked_tokens_and_teacher_gradient():
    student = torch.tensor([[-1.0, -2.0, -3.0]], requires_grad=True)
    teacher = torch.tensor([[-0.5, -1.0, -9.0]], requires_grad=True)
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    base = csd_loss(student, teacher, mask, beta=5.0).loss
    other = csd_loss(torch.tensor([[-1.0, -2.0, -0.1]]), torch.tensor([[-0.5, -1.0, 0.0]]),
                     mask, beta=5.0).loss
    assert base.item() == pytest.approx(other.item())
    base.backward()
    assert teacher.grad is None or torch.all(teacher.grad == 0)
    assert student.grad[0, 2] == 0


# ------------------------------------------------------------------ the note in the teacher chat
def _episode(tokenizer):
    """Three agent turns: user reply, tool result, user reply in between."""
    t = Transcript.start(tokenizer, [{"role": "user", "content": "Find the rule."}])
    eos = tokenizer.eos_token_id
    for agent, message in (("[action] What is f(1, 2, 3, 4)?", {"role": "user", "content": "7"}),
                           ("[search] test", {"role": "tool", "content": "test: (9, 3, 5, 7)"}),
                           ("[action] And f(0, 0, 0, 0)?", {"role": "user", "content": "3"})):
        ids = encode(tokenizer, agent) + [eos]
        t.add_agent(ids, [-1.0] * len(ids))
        t.add_message(message)
    ids = encode(tokenizer, "[answer] 12") + [eos]
    t.add_agent(ids, [-1.0] * len(ids))
    return SimpleNamespace(messages=t.messages, prompt_ids=t.prompt_ids,
                           completion_ids=t.completion_ids, env_mask=t.env_mask,
                           turn_ids=t.turn_ids, scenario_id="FunctionGym:x", logprobs=t.logprobs)


@pytest.fixture(scope="module")
def tokenizer():
    from mimesis.models.base import load_base

    return load_base("tiny-llama")[1]


def test_note_is_its_own_user_turn_rendered_by_the_chat_template(tokenizer):
    ep = _episode(tokenizer)
    note = "Ask for inputs that isolate one variable."
    seq = teacher_sequence(tokenizer, ep, {1: note, 3: note})
    expected = [dict(m) for m in ep.messages]
    assistant = [i for i, m in enumerate(expected) if m["role"] == "assistant"]
    for k in (3, 1):  # insert from the back so indices stay valid
        expected.insert(assistant[k], {"role": "user", "content": note})
    assert seq.messages == expected
    # the tokens are the template's rendering of that chat (it adds "\n" after the last turn)
    assert tokenizer.decode(seq.ids, skip_special_tokens=False) + "\n" == render(
        tokenizer, expected, add_generation_prompt=False)
    # the note block, tokenised on its own, is inside the sequence verbatim
    block = render(tokenizer, expected[:assistant[1] + 1], add_generation_prompt=True)
    block = block[len(render(tokenizer, expected[:assistant[1]], add_generation_prompt=False)):]
    assert note in block
    ids = encode(tokenizer, block)
    assert any(seq.ids[i:i + len(ids)] == ids for i in range(len(seq.ids)))
    # scored positions are exactly the student's sampled tokens of turns 0..3, in order
    sampled = [p for p, bit in enumerate(ep.env_mask) if bit]
    assert seq.completion_pos == sampled
    assert [seq.ids[p] for p in seq.teacher_pos] == [ep.completion_ids[p] for p in sampled]


def test_note_follows_any_template_not_hand_written_chatml(tokenizer):
    tok = copy.deepcopy(tokenizer)
    tok.chat_template = ("{% for m in messages %}### {{ m['role'] }}: {{ m['content'] }}"
                         "{% if m['role'] == 'assistant' %}{{ eos_token }}{% endif %}"
                         "{% endfor %}{% if add_generation_prompt %}### assistant: {% endif %}")
    ep = _episode(tok)
    seq = teacher_sequence(tok, ep, {2: "Ask a new question."})
    text = tok.decode(seq.ids, skip_special_tokens=False)
    assert "### tool: test: (9, 3, 5, 7)### user: Ask a new question.### assistant: [action]" in text
    assert "<|im_start|>user\nAsk a new question." not in text


def test_teacher_sequence_without_notes_is_refused(tokenizer):
    with pytest.raises(ValueError):
        teacher_sequence(tokenizer, _episode(tokenizer), {})
    with pytest.raises(ValueError):
        teacher_sequence(tokenizer, _episode(tokenizer), {9: "x"})


# ------------------------------------------------------------------ coach view, parsing, leaks
def _turn(source, reasoning):
    return SimpleNamespace(obs_source=source, user_reasoning=reasoning)


def test_coach_sees_only_the_past_of_the_coached_turn():
    messages = [{"role": "user", "content": "task"}, {"role": "assistant", "content": "a0"},
                {"role": "user", "content": "r0"}, {"role": "assistant", "content": "a1"},
                {"role": "user", "content": "LATER REPLY"}, {"role": "assistant", "content": "a2"}]
    ep = SimpleNamespace(messages=messages, scenario_id="E:1",
                         scenario=SimpleNamespace(goal="hidden goal"),
                         turns=[_turn("user", "first thought"), _turn("user", "LATER THOUGHT"),
                                _turn("env", None)])
    reqs = note_requests([ep], CoachParams(max_notes_per_episode=1))
    assert [(r.episode, r.turn) for r in reqs] == [(0, 1)]
    prompt = reqs[0].messages[1]["content"]
    assert "first thought" in prompt and "r0" in prompt
    assert "LATER" not in prompt and "a1" not in prompt
    assert reqs[0].private == ["first thought", "hidden goal"]
    reqs = note_requests([ep], CoachParams(max_notes_per_episode=2))
    assert [r.turn for r in reqs] == [1, 2] and "LATER THOUGHT" in reqs[1].private


def test_coach_reads_the_goal_only_when_asked():
    messages = [{"role": "user", "content": "task"}, {"role": "assistant", "content": "a0"},
                {"role": "user", "content": "r0"}, {"role": "assistant", "content": "a1"}]
    ep = SimpleNamespace(messages=messages, scenario_id="E:1",
                         scenario=SimpleNamespace(goal="You want a flat in Gangnam."),
                         turns=[_turn("user", ""), _turn("env", None)])
    assert note_requests([ep], CoachParams(private="reasoning")) == []  # paper: no reasoning
    reqs = note_requests([ep], CoachParams(private="reasoning_and_goal"))
    assert [(r.episode, r.turn) for r in reqs] == [(0, 1)]
    prompt = reqs[0].messages[1]["content"]
    assert "(what the user set out to do) You want a flat in Gangnam." in prompt
    assert reqs[0].private == ["You want a flat in Gangnam."]  # the leak filter compares it
    with pytest.raises(ValueError, match="coach.private"):
        CoachParams(private="everything")


@pytest.mark.parametrize(("raw", "note", "status"), [
    ("<think>the user wants 250</think>Ask about the budget.", "Ask about the budget.", "kept"),
    ("One. Two. Three. Four.", "One. Two. Three.", "kept"),
    ("NONE", "", "none"),
    ("none - nothing to add", "", "none"),
    ("<think>only thinking</think>", "", "empty"),
])
def test_parse_note(raw, note, status):
    assert parse_note(raw) == (note, status)


PRIVATE = ["I want the cheapest flat in Gangnam, under 250 dollars a night, with free parking."]
PUBLIC = ["I need an apartment in Seoul for 3 nights.", "[action] What matters most to you?"]


@pytest.mark.parametrize(("note", "reasons"), [
    ("Ask which area and budget the user has in mind.", []),
    ("Confirm the 3 nights, then ask about the area.", []),  # 3 is public
    ("Recommend something under 250.", ["number:250"]),
    ("Look in Gangnam first.", ["entity:Gangnam"]),
    ("Seoul options: ask about the area.", []),  # Seoul is public
    ("They want the cheapest flat in town.", ["ngram:the cheapest flat in",
                                              "ngram:want the cheapest flat"]),
])
def test_leakage_filter(note, reasons):
    assert find_leaks(note, PRIVATE, PUBLIC, ngram=4) == reasons


def test_openai_coach_needs_a_key_and_never_calls_out_when_built(monkeypatch):
    from mimesis.behaviors.backends import AnnotatorError
    from mimesis.rl.coach import make_coach

    params = CoachParams(backend="openai", model="gpt-test", base_url="http://127.0.0.1:9/v1",
                         api_key_env="MIMESIS_TEST_COACH_KEY")
    monkeypatch.delenv("MIMESIS_TEST_COACH_KEY", raising=False)
    with pytest.raises(AnnotatorError):
        make_coach(params, None, None, "unused", seed=0)
    monkeypatch.setenv("MIMESIS_TEST_COACH_KEY", "sk-test")
    coach = make_coach(params, None, None, "unused", seed=0)
    assert coach.name == "openai:gpt-test"
    assert coach.notes([], step=1) == []  # no request, no call
    with pytest.raises(ValueError):
        CoachParams(backend="openai")  # a model id is required


def test_teacher_of_a_noted_turn_sees_only_that_turns_note(tokenizer, monkeypatch):
    """The teacher of turn k is conditioned on h_k alone, never on earlier notes h_1..h_{k-1}."""
    from mimesis.rl import csd

    ep = _episode(tokenizer)
    notes = {1: "Ask about the budget first.", 3: "Confirm the dates now."}
    seen: list[tuple[str, list[int]]] = []

    def fake_score(model, sequences, positions, temperature, pad_id, batch_size=4):
        out = []
        for ids, pos in zip(sequences, positions, strict=True):
            seen.append((tokenizer.decode(ids, skip_special_tokens=False), list(pos)))
            out.append(torch.full((len(pos),), -float(len(seen))))
        return out

    monkeypatch.setattr(csd, "score_positions", fake_score)
    width = len(ep.completion_ids)
    logps, mask = csd.teacher_logps(None, tokenizer, [ep], [notes], width, temperature=1.0)
    assert len(seen) == 2
    (text_1, _), (text_3, _) = seen
    assert notes[1] in text_1 and notes[3] not in text_1
    assert notes[3] in text_3 and notes[1] not in text_3
    # the mask covers exactly the agent tokens of the noted turns, each valued by its own sequence
    turns = torch.tensor(ep.turn_ids)
    agent = torch.tensor(ep.env_mask).bool()
    for k, value in ((1, -1.0), (3, -2.0)):
        cols = agent & (turns == k)
        assert bool(mask[0, cols].eq(1).all()) and bool(logps[0, cols].eq(value).all())
    assert float(mask[0].sum()) == float((agent & ((turns == 1) | (turns == 3))).sum())
