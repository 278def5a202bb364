"""Pure realism metrics on hand-made inputs with hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mimesis.eval.realism.divergence import (
    behavior_counts,
    behavior_frequencies,
    behavior_js,
    js_divergence,
)
from mimesis.eval.realism.style import STYLE_FEATURES, style_distances, style_matrix, turn_style
from mimesis.eval.realism.userlm import (
    first_turn_diversity,
    intent_decomposition,
    mean_intent_decomposition,
    role_adherence,
    termination_f1,
)


def test_js_divergence_known_values():
    assert js_divergence([1, 0], [0, 1]) == pytest.approx(1.0)
    assert js_divergence([0.3, 0.7], [3, 7]) == pytest.approx(0.0, abs=1e-12)
    # m = (0.75, 0.25); KL(p||m) = 0.5 log2(2/3) + 0.5 log2 2; KL(q||m) = log2(4/3)
    expected = 0.5 * (0.5 * math.log2(2 / 3) + 0.5) + 0.5 * math.log2(4 / 3)
    assert js_divergence([0.5, 0.5], [1, 0]) == pytest.approx(expected)
    assert expected == pytest.approx(0.311278, abs=1e-6)
    assert js_divergence([0.5, 0.5], [1, 0]) == pytest.approx(js_divergence([1, 0], [0.5, 0.5]))


def _js_by_hand(p, q):
    """The definition, written out (what js_divergence computed before it called scipy)."""
    p, q = np.asarray(p, float) / np.sum(p), np.asarray(q, float) / np.sum(q)
    m = 0.5 * (p + q)
    kl = [float(np.sum(x[x > 0] * np.log2(x[x > 0] / m[x > 0]))) for x in (p, q)]
    return max(0.0, 0.5 * kl[0] + 0.5 * kl[1])


def test_js_divergence_gives_the_hand_written_numbers():
    rng = np.random.default_rng(0)
    for _ in range(200):
        p, q = rng.integers(0, 6, 14), rng.integers(0, 6, 14)
        p[0] += 1
        q[1] += 1  # a positive sum on each side
        assert js_divergence(p, q) == pytest.approx(_js_by_hand(p, q), abs=1e-12)


@pytest.mark.parametrize("p,q", [([1, 0], [1]), ([-1, 2], [1, 1]), ([0, 0], [1, 1])])
def test_js_divergence_rejects_bad_input(p, q):
    with pytest.raises(ValueError):
        js_divergence(p, q)


def test_behavior_counts_use_a_none_bin_and_ignore_traits():
    counts = behavior_counts([["B1"], ["B1", "B3"], [], ["terse"]], ids=("B1", "B2", "B3"))
    assert counts.tolist() == [2, 0, 1, 2]
    freqs = behavior_frequencies([["B1"], []], ids=("B1", "B2"))
    assert freqs == {"B1": 0.5, "B2": 0.0, "none": 0.5}


def test_behavior_js_is_zero_for_same_mix_and_one_for_disjoint():
    real = [["B1"], [], [], ["B9"]]
    assert behavior_js(real, real * 3) == pytest.approx(0.0, abs=1e-12)
    # simulator shows no behaviour at all, real users always B2: disjoint supports -> 1 bit
    assert behavior_js([[], []], [["B2"], ["B2"]]) == pytest.approx(1.0)
    # half the real turns carry B2: p=(0,1) vs q=(0.5,0.5) over (B2, none)
    assert behavior_js([[], []], [["B2"], []]) == pytest.approx(0.311278, abs=1e-6)


def test_turn_style_features():
    casual = turn_style("ok but why dont u use pandas")
    assert casual["lowercase_start"] == 1 and casual["no_final_punct"] == 1
    assert casual["typo"] == 1 and casual["question"] == 0
    polite = turn_style("Certainly! Here is a summary:\n\n1. First point.\n2. Second point.")
    assert polite["assistant_phrase"] == 1 and polite["markdown"] == 1
    assert polite["lowercase_start"] == 0 and polite["typo"] == 0
    assert turn_style("What is X?")["question"] == 1
    assert turn_style("abc")["log_chars"] == pytest.approx(math.log(4))
    assert style_matrix(["a", "b?"]).shape == (2, len(STYLE_FEATURES))


def test_style_distances_hand_computed():
    a = ["hi there", "what?"]          # rates: lowercase 1, question 0.5, no_final_punct 0.5
    b = ["Hello there.", "Fine."]      # rates: lowercase 0, question 0, no_final_punct 0
    d = style_distances(a, b)
    assert d["lowercase_start"] == pytest.approx(1.0)
    assert d["question"] == pytest.approx(0.5)
    assert d["no_final_punct"] == pytest.approx(0.5)
    assert d["markdown"] == 0 and d["assistant_phrase"] == 0
    # W1 of two 2-point samples = mean |sorted a - sorted b| of log1p(lengths)
    la, lb = sorted(map(math.log1p, (8, 5))), sorted(map(math.log1p, (12, 5)))
    assert d["length_w1"] == pytest.approx(np.mean(np.abs(np.subtract(la, lb))))
    assert style_distances(a, a)["length_w1"] == 0.0
    with pytest.raises(ValueError):
        style_distances([], b)


def test_first_turn_diversity_three_turns():
    # Jaccard: {a,b}~{a,c} = 1/3, others 0 -> mean 1/9 -> diversity 8/9
    assert first_turn_diversity(["a b", "a c", "d"]) == pytest.approx(8 / 9)
    assert first_turn_diversity(["Fix my code", "fix my code!"]) == pytest.approx(0.0)
    with pytest.raises(ValueError):
        first_turn_diversity(["alone"])


def test_intent_decomposition_example():
    goal = "Find a cheap vegan restaurant in Berlin for Friday dinner"
    dump = "I want a cheap vegan restaurant in Berlin for Friday dinner"
    # stop words removed: U = {want, cheap, vegan, restaurant, berlin, friday, dinner}; 6 in I
    assert intent_decomposition(goal, dump) == pytest.approx(6 / 7)
    assert intent_decomposition(goal, "any tips for berlin?") == pytest.approx(1 / 2)
    assert intent_decomposition(goal, "hi") == 0.0
    assert mean_intent_decomposition([goal, goal], [dump, "hi"]) == pytest.approx(3 / 7)


def test_termination_f1_from_a_small_confusion():
    # tp=2, fp=1, fn=1, tn=2 -> precision 2/3, recall 2/3, f1 2/3
    pred = [True, True, True, False, False, False]
    real = [True, True, False, True, False, False]
    m = termination_f1(pred, real)
    assert m["precision"] == pytest.approx(2 / 3) and m["recall"] == pytest.approx(2 / 3)
    assert m["f1"] == pytest.approx(2 / 3)
    assert (m["positives"], m["predicted"], m["n"]) == (3, 3, 6)
    assert m["false_end_rate"] == pytest.approx(1 / 3)  # 1 of the 3 positions the user went on
    never = termination_f1([False] * 4, [True, False, True, False])
    assert never["f1"] == 0.0 and never["recall"] == 0.0


def test_termination_f1_gives_the_hand_written_numbers():
    rng = np.random.default_rng(1)
    for _ in range(200):
        pred, real = rng.random(12) < rng.random(), rng.random(12) < rng.random()
        tp, n_pred, n_pos = int(np.sum(pred & real)), int(pred.sum()), int(real.sum())
        precision = tp / n_pred if n_pred else 0.0
        recall = tp / n_pos if n_pos else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        m = termination_f1(pred.tolist(), real.tolist())
        assert (m["precision"], m["recall"]) == pytest.approx((precision, recall), abs=1e-12)
        assert m["f1"] == pytest.approx(f1, abs=1e-12)


def test_role_adherence_counts_unflagged_turns():
    def rule(text: str) -> bool:
        return text.startswith("Certainly")

    assert role_adherence(["ok", "Certainly! Here", "why?", "no"], rule) == pytest.approx(0.75)
    with pytest.raises(ValueError):
        role_adherence([], rule)
