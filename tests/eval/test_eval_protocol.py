"""Evaluation protocol: positions, halves, history fitting, simulator views, realism rows."""

from __future__ import annotations

import random

import numpy as np
import pytest

from mimesis.eval.realism.generate import (
    baseline_messages,
    parse_all,
    real_records,
    simulated_records,
    trained_messages,
)
from mimesis.eval.realism.metrics import RealismConfig, evaluate_rows, row_metrics
from mimesis.eval.realism.protocol import FIRST, NEXT, build_items, clip_history, fit_history
from mimesis.eval.realism.report import markdown_table
from mimesis.eval.realism.style import style_matrix
from mimesis.schemas import LabeledConversation, Scenario, Turn, TurnLabel


def make_conv(cid: str, n_pairs: int, ended: bool = True, labels: dict | None = None,
              user_fmt: str = "user {c} says {i}") -> LabeledConversation:
    turns = []
    for i in range(n_pairs):
        turns.append(Turn(role="user", text=user_fmt.format(c=cid, i=i)))
        turns.append(Turn(role="assistant", text=f"Agent reply {i} to {cid}. " * 5))
    labs = [TurnLabel(turn_index=2 * i, behaviors=(labels or {}).get(2 * i, []), reasoning="",
                      reasoning_annotator="none") for i in range(n_pairs)]
    return LabeledConversation(id=cid, turns=turns, labels=labs, end_reasoning="",
                               end_reasoning_annotator="none", ended=ended,
                               scenario=Scenario(goal=f"get help with task {cid}", annotator="t"))


def test_items_include_first_turn_and_final_position_when_ended():
    conv = make_conv("c0", 4, ended=True, labels={2: ["B9"]})
    items, skipped = build_items([conv], 0, next_positions=2, seed=1)
    assert not skipped
    kinds = [it.kind for it in items]
    assert kinds == [FIRST, NEXT, NEXT]
    assert items[0].history == () and items[0].real_text == "user c0 says 0"
    final = [it for it in items if it.turn_index == len(conv.turns)]
    assert len(final) == 1 and final[0].real_ended and final[0].real_labels == ()
    inner = next(it for it in items if it.kind == NEXT and not it.real_ended)
    assert inner.real_text == conv.turns[inner.turn_index].text
    assert len(inner.history) == inner.turn_index and inner.history[-1].role == "assistant"


def test_cut_conversation_never_uses_final_position():
    conv = make_conv("c1", 3, ended=False)
    for seed in range(5):
        items, _ = build_items([conv], 0, next_positions=5, seed=seed)
        nxt = [it for it in items if it.kind == NEXT]
        assert sorted(it.turn_index for it in nxt) == [2, 4]
        assert not any(it.real_ended for it in nxt)


def test_sampling_halves_and_skips():
    convs = [make_conv(f"c{i}", 3) for i in range(9)]
    bad = make_conv("bad", 2)
    bad = bad.model_copy(update={"turns": [bad.turns[1], bad.turns[0]]})
    items, skipped = build_items([*convs, bad], 0, 2, seed=3)
    assert skipped == {"bad": "turn 0 has role assistant; turns must alternate, user first"}
    halves = {}
    for it in items:
        halves.setdefault(it.conv_id, set()).add(it.half)
    assert all(len(h) == 1 for h in halves.values())  # a conversation lives in one half
    sizes = [sum(h == {k} for h in halves.values()) for k in (0, 1)]
    assert abs(sizes[0] - sizes[1]) <= 1
    few, _ = build_items(convs, 4, 2, seed=3)
    assert len({it.conv_id for it in few}) == 4
    again, _ = build_items(convs, 4, 2, seed=3)
    assert [(i.conv_id, i.turn_index) for i in few] == [(i.conv_id, i.turn_index) for i in again]
    with pytest.raises(ValueError):
        build_items(convs, 4, 0, seed=3)


def test_fit_history_drops_oldest_pairs_and_keeps_the_system_prompt():
    conv = make_conv("c2", 4)
    history = clip_history(conv.turns[:6], max_user_chars=0, max_agent_chars=40)
    assert all(len(t.text) <= 44 for t in history if t.role == "assistant")

    def count(messages):
        return sum(len(m["content"]) for m in messages)

    full = trained_messages(conv.scenario, history)
    budget = count(full) - 1
    fitted = fit_history(lambda h: trained_messages(conv.scenario, h), history, count, budget)
    assert fitted[0] == full[0]  # scenario kept
    assert len(fitted) == len(full) - 2 and fitted[-1] == full[-1]
    tiny = fit_history(lambda h: trained_messages(conv.scenario, h), history, count, 1)
    assert [m["role"] for m in tiny] == ["system", "user"]  # only the last agent reply left
    assert tiny[-1]["content"] == history[-1].text


def test_views_flip_roles_and_differ_only_in_system_prompt():
    conv = make_conv("c3", 2)
    history = list(conv.turns[:3])
    trained, baseline = trained_messages(conv.scenario, history), baseline_messages(
        conv.scenario, history)
    assert [m["role"] for m in trained] == ["system", "assistant", "user", "assistant"]
    assert trained[1:] == baseline[1:] and trained[0] != baseline[0]
    assert history[0].text in trained[1]["content"] and trained[2]["content"] == history[1].text
    assert "task c3" in trained[0]["content"] and "task c3" in baseline[0]["content"]


def test_parse_keeps_reasoning_out_of_the_utterance_and_detects_ends():
    out = parse_all(["<think>they asked</think>\nmarch 3",
                     "<think>done</think>\n<|end_conversation|>"])
    assert out[0].utterance == "march 3" and out[0].reasoning == "they asked" and not out[0].ended
    assert out[1].ended and out[1].utterance == ""


WORDS = ["hey", "need", "help", "fix", "code", "why", "not", "working", "thanks", "ok", "so", "what",
         "about", "the", "list", "again"]


def _casual(rng: random.Random) -> str:
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 14)))
    return text + rng.choice(["", "?", ".", " pls"])


def _rows(n_convs: int = 24):
    rng = random.Random(0)
    convs = [make_conv(f"c{i:02d}", 3, labels={2: ["B9"]}) for i in range(n_convs)]
    convs = [c.model_copy(update={"turns": [t if t.role == "assistant" else
                                            Turn(role="user", text=_casual(rng)) for t in c.turns]})
             for c in convs]
    items, _ = build_items(convs, 0, 2, seed=0)
    label = lambda turns, i: ["B9"] if "?" in turns[i].text else []
    real = real_records(items, label)
    echo = parse_all([it.real_text or "<|end_conversation|>" for it in items])
    polite = parse_all(["Certainly! Here is a detailed answer for you?\n\n1. First\n2. Second"
                        for _ in items])
    sims = {"trained": simulated_records(items, echo, label),
            "baseline": simulated_records(items, polite, label)}
    return items, real, sims


@pytest.mark.slow
def test_realism_rows_separate_an_echo_from_an_assistant():
    items, real, sims = _rows()
    # the checks read distances and rates, not p-values: a short null and few resamples suffice
    cfg = RealismConfig(min_support=3, c2st_min_support=8, c2st_folds=4, c2st_permutations=20,
                        c2st_real_splits=3, n_bootstrap=200)
    m = evaluate_rows(sims, real, lambda t: style_matrix(t), lambda t: "Certainly" in t, cfg)
    echo, polite, ceiling = m["trained"], m["baseline"], m["real"]
    assert echo["termination_f1"] == 1.0 and echo["role_adherence"] == 1.0
    assert polite["termination_f1"] == 0.0 and polite["role_adherence"] == 0.0
    assert polite["style"]["markdown"] == 1.0 and echo["style"]["markdown"] == 0.0
    assert polite["behavior_js"] > 0.3 and echo["behavior_js"] < 0.05
    assert polite["c2st"]["distance"] > 40 and echo["c2st"]["distance"] < 25
    assert ceiling["termination_f1"] == 1.0 and ceiling["role_rule_flag_rate"] == 0.0
    assert polite["first_turn_end_rate"] == 0.0 and polite["empty_rate"] == 0.0
    assert echo["first_turn_diversity"] == pytest.approx(ceiling["first_turn_diversity"])
    b9 = m["slices"]["B9"]
    assert b9["support"]["turns"] == sum("B9" in it.real_labels for it in items if it.real_text)
    assert b9["trained"]["role_adherence"] == 1.0
    assert m["behavior_frequencies"]["baseline"]["B9"] == 1.0
    table = markdown_table(m)
    assert "prompted baseline" in table and "| B9 |" in table


def test_metrics_need_support():
    _, real, sims = _rows(n_convs=4)
    cfg = RealismConfig(min_support=50, c2st_min_support=50)
    m = row_metrics(sims["trained"], real, lambda t: np.zeros((len(t), 2)), lambda t: False, cfg)
    assert "style" not in m and "c2st" not in m and "first_turn_diversity" not in m
    assert "termination_f1" in m and m["n_turns"] > 0
