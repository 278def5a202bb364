"""Realism drives the simulator exactly as RL does (one generation path): the same
run-time simulator over the same sampler gives the same turns, and the guards' work is counted."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from mimesis.eval.realism.generate import (
    Generated,
    runtime_generated,
    simulate_local,
    simulate_runtime,
)
from mimesis.eval.realism.protocol import build_items
from mimesis.eval.realism.run import RealismParams, guard_counts
from mimesis.schemas import LabeledConversation, Scenario, Turn, TurnLabel


def _conversations(n: int = 6) -> list[LabeledConversation]:
    rng = random.Random(3)
    out = []
    for i in range(n):
        turns, labels = [], []
        for k in range(3):
            turns += [Turn(role="user", text=f"question {k} about lists {rng.randint(0, 99)}"),
                      Turn(role="assistant", text=f"Answer {k}: use append. " * 3)]
            labels.append(TurnLabel(turn_index=2 * k, reasoning="", reasoning_annotator="none"))
        out.append(LabeledConversation(id=f"c{i}", turns=turns, labels=labels, ended=True,
                                       end_reasoning="", end_reasoning_annotator="none",
                                       scenario=Scenario(goal=f"fix list bug {i}",
                                                         annotator="test")))
    return out


@pytest.fixture(scope="module")
def tiny():
    from mimesis.models.base import load_base

    return load_base("tiny-llama")


def test_realism_turns_equal_the_rl_users_turns(tiny):
    """simulate_local == UserSimulator(TokenSampler.chat) of train_agent's frozen user, turn for
    turn, for the same model, seed and episode states."""
    from mimesis.format import TURN_PREFILL
    from mimesis.models.engine.sampling import SamplingParams, TokenSampler
    from mimesis.simulator.prompts import render_system_prompt
    from mimesis.simulator.runtime import UserSimulator, UserState

    model, tokenizer = tiny
    items, _ = build_items(_conversations(), 0, 1, seed=0)
    params = RealismParams(max_new_tokens=12, batch_size=4, max_prompt_tokens=0, seed=5)
    ours = simulate_local(model, tokenizer, "user_simulator", items, params, desc="t")

    # what mimesis.users.frozen.load_user builds (its turns open with the <think> prefill), fed
    # the same states
    sampler = TokenSampler(model, tokenizer, SamplingParams(
        temperature=params.temperature, top_p=params.top_p, max_new_tokens=12, batch_size=4,
        prefill=TURN_PREFILL), seed=5)
    sim = UserSimulator(sampler.chat, max_turns=10**9)
    pairs = []
    for it in items:
        hist = list(it.history)
        n = sum(t.role == "user" for t in hist[:-1]) if hist else 0
        state = UserState(scenario=it.scenario, system_prompt=render_system_prompt(it.scenario),
                          history=hist[:-1], private=[""] * n, turns=n,
                          turn_flags=[[] for _ in range(n)], goal_overlap=[0.0] * n)
        pairs.append((hist[-1].text if hist else None, state))
    theirs = []
    for start in range(0, len(pairs), 8):  # simulate_local's chunks: 2 x batch_size
        theirs += [runtime_generated(r, s) for r, s in sim.next_messages(pairs[start:start + 8])]
    assert [g.raw for g in ours] == [g.raw for g in theirs]
    assert [g.utterance for g in ours] == [g.utterance for g in theirs]
    assert len(ours) == len(items)


def test_guards_resample_and_refuse_empty_turns_and_count_them():
    items, _ = build_items(_conversations(2), 0, 1, seed=0)
    calls = []

    def empty_then_text(batch):
        calls.append(len(batch))
        # "list" is a goal word, so the openings are on topic (no off-topic redraw)
        return ["<think>hm</think>\n" if len(calls) == 1
                else "<think>ok</think>\nmy list is still broken" for _ in batch]

    out = simulate_runtime(empty_then_text, "user_simulator", items, None, 0, 0, 0, 64, "t")
    assert calls == [len(items), len(items)]  # one call, then one resample call for all
    assert all(g.utterance == "my list is still broken" and not g.ended for g in out)
    counts = guard_counts(out)
    assert counts["resampled_rate"] == 1.0 and counts["resampled_empty_utterance"] == 1.0

    def always_empty(batch):
        return ["<think>hm</think>\n" for _ in batch]

    lost = simulate_runtime(always_empty, "user_simulator", items, None, 0, 0, 0, 64, "t")
    # refused after the resample: nothing sent, and it is a lost turn, not an end decision
    assert all(g.utterance == "" and not g.ended and "end:empty_turn" in g.flags for g in lost)


def test_deferred_end_is_a_spoken_turn_and_a_bare_end_is_an_end():
    items, _ = build_items(_conversations(2), 0, 1, seed=0)
    spoken = simulate_runtime(lambda b: ["<think>done</think>\nthanks, bye <|end_conversation|>"]
                              * len(b), "user_simulator", items, None, 0, 0, 0, 64, "t")
    assert all(g.utterance == "thanks, bye" and not g.ended for g in spoken)
    ended = simulate_runtime(lambda b: ["<think>done</think>\n<|end_conversation|>"] * len(b),
                             "prompted_user", items, None, 0, 0, 0, 64, "t")
    assert all(g.ended and g.utterance == "" and g.reasoning == "done" for g in ended)
    assert guard_counts(ended)["ended_end_signal"] == 1.0


def test_guard_counts_of_plain_turns():
    g = Generated("x", "", "x", False, ())
    assert guard_counts([g, replace(g, flags=("resampled:role_flip",))])["resampled_rate"] == 0.5


def test_earlier_user_turns_carry_their_labelled_reasoning_in_the_view():
    """The simulator's view of a next-turn position shows its earlier turns as it saw them in
    training, `<think>labelled reasoning</think>` + turn, not an empty `<think></think>`."""
    convs = _conversations(2)
    for conv in convs:
        conv.labels = [lab.model_copy(update={"reasoning": f"i want step {lab.turn_index}"})
                       for lab in conv.labels]
    items, _ = build_items(convs, 0, 2, seed=0)
    late = [it for it in items if it.kind == "next" and it.turn_index == 4]
    assert late and late[0].history_reasoning == ("i want step 0", "i want step 2")
    views = []

    def record(batch):
        views.extend(batch)
        return ["<think>ok</think>\nnext question"] * len(batch)

    simulate_runtime(record, "user_simulator", late, None, 0, 0, 0, chunk_size=4, desc="t")
    own = [m["content"] for m in views[0] if m["role"] == "assistant"]
    assert own[0].startswith("<think>i want step 0</think>\n")
    assert own[1].startswith("<think>i want step 2</think>\n")
    # A budget that drops the oldest pair keeps each kept turn with its own reasoning.
    views.clear()
    simulate_runtime(record, "user_simulator", late, len, 4, 0, 0, chunk_size=4, desc="t")
    own = [m["content"] for m in views[0] if m["role"] == "assistant"]
    assert len(own) == 1 and own[0].startswith("<think>i want step 2</think>\n")


def test_first_draws_are_kept_and_counted_though_the_guards_cleaned_the_sent_turns():
    """A first draw cut by the token limit (private text, nothing to say) is redrawn clean:
    the sent turns show nothing, the raw rates show every position; a row whose first draws
    are clean scores 0 on both."""
    from mimesis.eval.realism.run import raw_rates

    items, _ = build_items(_conversations(4), 0, 1, seed=0)
    groups = [it.conv_id for it in items]
    calls = []

    def cut_then_clean(batch):
        calls.append(len(batch))
        return ["<think>the user wants a fix, so I" if len(calls) == 1
                else "<think>ok</think>\nmy list is still broken" for _ in batch]

    out = simulate_runtime(cut_then_clean, "user_simulator", items, None, 0, 0, 0, 64, "t")
    assert all(g.utterance == "my list is still broken" for g in out)  # what the agent got
    assert all(g.first_raw.startswith("<think>the user wants") and g.raw != g.first_raw
               for g in out)
    assert all("think_unclosed" in g.first_flags for g in out)
    rates = raw_rates(out, groups, n_bootstrap=100)
    assert rates["raw_leak_rate"] == 1.0 and rates["raw_empty_rate"] == 1.0
    assert rates["raw_positions"] == len(items) and rates["raw_conversations"] == 4

    clean = simulate_runtime(lambda b: ["<think>ok</think>\nmy list is still broken"] * len(b),
                             "user_simulator", items, None, 0, 0, 0, 64, "t")
    rates = raw_rates(clean, groups, n_bootstrap=100)
    assert rates["raw_leak_rate"] == 0.0 and rates["raw_empty_rate"] == 0.0


def test_first_draw_flags_see_the_runtimes_private_text_rule():
    """A first draw that reads out a hidden fact with meta-talk is emptied by the runtime (rule
    0) and redrawn: its flags carry ``hidden_fact``, as the runtime's resample flags do; a
    hidden word the agent already said is no leak."""
    from mimesis.eval.realism.generate import first_draw_flags
    from mimesis.simulator.runtime import UserSimulator, UserState

    scenario = Scenario(goal="a flight to Denver, budget 450 euros", annotator="test")
    calls = []

    def leak_then_clean(batch):
        calls.append(len(batch))
        return ["<think>ok</think>\nany flights? My goal is to stay under 450 euros"
                if len(calls) == 1 else "<think>ok</think>\nflights to Denver under 450 euros?"
                ] * len(batch)

    sim = UserSimulator(leak_then_clean, max_turns=10)
    reply, state = sim.next_message("Hi! Where to?", sim.init_state(scenario))
    # the sent turn states the budget itself; it was not public when the first draw was made
    assert reply == "flights to Denver under 450 euros?" and "resampled:hidden_fact" in state.flags
    assert "hidden_fact" in first_draw_flags(state)
    assert "hidden_fact" in runtime_generated(reply, state).first_flags

    # the agent said the figure already: no longer hidden, the same draw is no leak
    sim = UserSimulator(lambda b: ["<think>ok</think>\nmy goal is to stay under 450 euros"]
                        * len(b), max_turns=10)
    reply, state = sim.next_message("Is 450 euros your budget?", sim.init_state(scenario))
    assert reply and "hidden_fact" not in first_draw_flags(state)
    unsaid = UserState(scenario=scenario, system_prompt="s")
    _, state = sim.next_message("Anything else?", unsaid)
    assert "hidden_fact" in first_draw_flags(state)


def test_first_draw_termination_counts_the_ends_the_end_rule_drew_again():
    """Every first draw ends; the end rule draws each again and the second draw speaks: the
    sent row ends nowhere, the first-draw row ends everywhere (true-end rate 1, false-end rate
    1 where the real user went on), and table.md prints both."""
    from mimesis.eval.realism.report import termination_section
    from mimesis.eval.realism.run import raw_termination
    from mimesis.eval.realism.userlm import termination_f1
    from mimesis.format import END_SIGNAL

    items, _ = build_items(_conversations(6), 0, 2, seed=0)
    nxt = [it for it in items if it.kind == "next"]
    assert any(it.real_ended for it in nxt) and not all(it.real_ended for it in nxt)
    calls = []

    def end_then_speak(batch):
        calls.append(len(batch))
        return [f"<think>done</think>\n{END_SIGNAL}" if len(calls) == 1
                else "<think>ok</think>\none more thing" for _ in batch]

    out = simulate_runtime(end_then_speak, "user_simulator", items, None, 0, 0, 0, 64, "t")
    assert not any(g.ended for g in out)
    raw = raw_termination(items, out)
    assert (raw["recall"], raw["false_end_rate"], raw["n"]) == (1.0, 1.0, len(nxt))
    assert raw["predicted"] == len(nxt)  # first turns are not termination positions
    sent = termination_f1([False] * len(nxt), [it.real_ended for it in nxt])
    lines = termination_section({"trained": {"termination": sent, "raw_termination": raw}},
                                ["trained"])
    row = next(line for line in lines if line.startswith("| trained"))
    assert f"| 0/{len(nxt)} | 0 | 0 | 0 | {len(nxt)}/{len(nxt)} | 1 | 1 |" in row
