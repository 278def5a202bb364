"""Honest realism statistics: the C2ST permutation null is calibrated at production
size, a copying simulator scores as the real-vs-real ceiling, a simulator that always ends loses
every turn, and the goal / opening checks see what they should."""

from __future__ import annotations

import random

import numpy as np
import pytest

from mimesis.eval.realism.c2st import c2st, permute_groups, pool_c2st
from mimesis.eval.realism.generate import parse_all, real_records, simulated_records
from mimesis.eval.realism.goals import (
    goal_candidates,
    goal_identifiability,
    is_junk,
    opening_quality,
)
from mimesis.eval.realism.metrics import RealismConfig, evaluate_rows, realism_index
from mimesis.eval.realism.protocol import build_items
from mimesis.eval.realism.report import markdown_table
from mimesis.eval.realism.style import style_matrix
from mimesis.schemas import LabeledConversation, Scenario, Turn, TurnLabel
from mimesis.simulator.guards import is_assistant_like

# evaluate_user's default: 32 conversations (16 a half), ~2.5 spoken turns each, 384 + 7 features
N_CONVS_PER_SIDE, DIM = 16, 391


def _sample(rng: np.random.Generator, prefix: str, shift: float = 0.0):
    """Turns clustered by conversation topic, 2-3 per conversation."""
    rows, groups = [], []
    for c in range(N_CONVS_PER_SIDE):
        topic = rng.normal(0, 1.0, DIM)
        for _ in range(rng.integers(2, 4)):
            rows.append(topic + rng.normal(0, 1, DIM) + shift)
            groups.append(f"{prefix}{c}")
    return np.array(rows), groups


@pytest.mark.slow  # 20 seeds x 20 permutations x grouped 5-fold CV at d = 391
def test_permutation_null_is_calibrated_at_production_size():
    """Same distribution: p >= 0.05 in >= 90% of seeds. A turn-level permutation or a missing +1
    would make the null too narrow (or p = 0) and fail this."""
    ps = []
    for seed in range(20):
        rng = np.random.default_rng(seed)
        (xa, ga), (xb, gb) = _sample(rng, "a"), _sample(rng, "b")
        res = c2st(xa, xb, ga, gb, seed=seed, n_permutations=20)
        assert len(res.null) == 20 and res.p_value >= 1 / 21
        ps.append(res.p_value)
    assert sum(p >= 0.05 for p in ps) >= 18, ps


def test_permutation_test_has_power_and_pooling_keeps_it():
    rng = np.random.default_rng(7)
    (xa, ga), (xb, gb) = _sample(rng, "a"), _sample(rng, "b", shift=0.35)
    results = [c2st(xa, xb, ga, gb, seed=s, n_permutations=50) for s in (0, 1)]
    assert all(r.p_value < 0.05 for r in results)
    pooled = pool_c2st(results, n_bootstrap=500, seed=0)
    assert pooled["p_value"] < 0.05 and pooled["ci_low"] > 0
    assert pooled["accuracy_ci_low"] <= pooled["accuracy"] <= pooled["accuracy_ci_high"]
    assert pooled["conversations"] == 2 * N_CONVS_PER_SIDE
    assert pooled["n"] == sum(len(r.correct) for r in results)


def test_group_permutation_keeps_a_conversation_on_one_side():
    rng = np.random.default_rng(0)
    y = np.array([0, 0, 0, 1, 1, 1, 1])
    groups = np.array(["a", "a", "b", "c", "c", "d", "d"])
    for _ in range(20):
        p = permute_groups(y, groups, rng)
        assert p[0] == p[1] and p[3] == p[4] and p[5] == p[6]
        assert sorted(p[[0, 2, 3, 5]]) == [0, 0, 1, 1]


# ----------------------------------------------------------------------------- rows
WORDS = ["hey", "need", "help", "fix", "code", "why", "not", "working", "thanks", "ok", "so",
         "what", "about", "the", "list", "again", "loop", "sql", "email", "resume", "bug"]
TOPICS = ["python", "essay", "recipe", "travel", "excel", "poem", "salary", "garden"]


def _conv(i: int, rng: random.Random) -> LabeledConversation:
    topic = TOPICS[i % len(TOPICS)]
    turns, labels = [], []
    for k in range(3):
        text = " ".join([topic, *(rng.choice(WORDS) for _ in range(rng.randint(2, 10)))])
        turns += [Turn(role="user", text=text + rng.choice(["", "?"])),
                  Turn(role="assistant", text=f"Here is step {k} about {topic}. " * 3)]
        labels.append(TurnLabel(turn_index=2 * k, reasoning="", reasoning_annotator="none"))
    return LabeledConversation(id=f"c{i:02d}", turns=turns, labels=labels, ended=True,
                               end_reasoning="", end_reasoning_annotator="none",
                               scenario=Scenario(goal=f"get help with a {topic} question {i}",
                                                 annotator="test"))


_VOCAB: dict[str, int] = {}


def _hash_embed(texts: list[str]) -> np.ndarray:
    """Unit-norm bag of words over a shared vocabulary (256-d, no collisions in these tests):
    a deterministic stand-in for MiniLM."""
    out = np.zeros((len(texts), 256))
    for i, t in enumerate(texts):
        for w in t.lower().replace("?", " ").split():
            out[i, _VOCAB.setdefault(w, len(_VOCAB)) % 256] += 1.0
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


def _featurize(texts: list[str]) -> np.ndarray:
    return np.hstack([_hash_embed(texts), style_matrix(texts)])


def _rows(sim_texts):
    rng = random.Random(0)
    items, _ = build_items([_conv(i, rng) for i in range(32)], 0, 2, seed=0)
    label = lambda turns, i: []
    real = real_records(items, label, max_turn_chars=60)
    sims = {"sim": simulated_records(items, parse_all([sim_texts(it) for it in items]), label,
                                     max_turn_chars=60)}
    cfg = RealismConfig(min_support=3, c2st_min_support=8, c2st_folds=4, c2st_permutations=40,
                        n_bootstrap=300, goal_distractors=10)
    return evaluate_rows(sims, real, _featurize, is_assistant_like, cfg, _hash_embed), real


def test_a_simulator_that_copies_real_turns_scores_as_the_ceiling():
    m, real = _rows(lambda it: it.real_text or "<|end_conversation|>")
    sim, ceiling = m["sim"], m["real"]
    assert all(len(r.utterance) <= 60 + len(" […]") for r in real)  # one cap for both rows
    assert sim["turn_loss_rate"] == 0.0 and ceiling["turn_loss_rate"] == 0.0
    assert sim["c2st"]["p_value"] >= 0.05 and ceiling["c2st"]["p_value"] >= 0.05
    for row in (sim, ceiling):
        assert row["c2st"]["ci_low"] == 0.0  # accuracy CI holds 50: indistinguishable
    assert abs(sim["c2st"]["distance"] - ceiling["c2st"]["distance"]) < 12
    assert abs(sim["realism_index"] - ceiling["realism_index"]) < 0.25
    assert sim["goal"] == ceiling["goal"] and sim["goal"]["candidates"] == 11
    assert sim["goal"]["top1"] > 3 * sim["goal"]["chance_top1"]
    assert sim["opening"]["bad"] == ceiling["opening"]["bad"]
    assert "noise (95% CIs overlap)" in markdown_table(m, ["sim", "real"])


def test_a_simulator_that_always_ends_loses_every_turn():
    m, real_recs = _rows(lambda it: "<|end_conversation|>")
    sim = m["sim"]
    assert sim["turn_loss_rate"] == 1.0 and sim["realism_index"] == 0.0
    assert "c2st" not in sim and sim["n_turns"] == 0 and sim["goal"] == {}
    assert sim["opening"]["empty"] == 1.0 and sim["opening"]["bad"] == 1.0
    assert m["real"]["realism_index"] > 0.5
    table = markdown_table(m, ["sim", "real"])
    # no spoken turn for the C2ST, but over all positions an always-ending user is told apart
    # every time: scored 0 of 96 positions, distance 50 with a CI at 50
    assert "| sim | 0 / 32 | 0.00 [0.00, 0.00] (0/96) | – | 50.0 [50.0, 50.0] |" in table
    assert sim["scored_rate"] == 0.0 and sim["c2st_all"]["distance"] == 50.0
    # the real row is scored out of the same 96 positions: it spoke at all but its ends
    real = m["real"]
    assert real["n_positions"] == 96.0 and real["n_turns"] == len(real_recs) < 96
    assert real["scored_rate"] == pytest.approx(len(real_recs) / 96)
    assert real["scored_rate_ci_low"] <= real["scored_rate"] <= real["scored_rate_ci_high"] < 1


def test_an_assistant_like_simulator_is_caught_by_every_check():
    m, _ = _rows(lambda it: "Certainly! How can I help you today? As an AI, I am happy to help.")
    sim = m["sim"]
    assert sim["c2st"]["p_value"] < 0.05 and sim["c2st"]["ci_low"] > 20
    assert sim["opening"]["role_flipped"] == 1.0
    assert sim["goal"]["top1"] <= 2 * sim["goal"]["chance_top1"]
    assert sim["realism_index"] < m["real"]["realism_index"]


# ----------------------------------------------------------------------------- units
def test_realism_index_formula():
    assert realism_index(10.0, 0.5) == pytest.approx(0.4)
    assert realism_index(None, 1.0) == 0.0 and realism_index(None, 0.2) is None


def test_opening_quality_uses_the_guards_and_flags_junk():
    goal = "book a flight to denver on march third"
    q = opening_quality([(goal, "How can I help you today?", False),
                         (goal, "book flight denver march third", False),
                         (goal, "<|im_start|>assistant hi", False),
                         (goal, "", True),
                         (goal, "hey can u help me with a trip", False)])
    assert q == {"empty": 0.2, "role_flipped": 0.2, "goal_dump": 0.2, "junk": 0.2, "bad": 0.8,
                 "n": 5.0}
    assert is_junk("the the the the end") and not is_junk("is this the right loop")


def test_goal_identifiability_ranks_the_true_goal():
    goals = {f"c{i}": f"{t} question" for i, t in enumerate(TOPICS)}
    cands = goal_candidates(goals, distractors=5, seed=0)
    assert all(len(c) == 6 and c[0] == goals[k] for k, c in cands.items())
    assert cands == goal_candidates(goals, distractors=5, seed=0)
    right = goal_identifiability({k: [f"my {g}"] for k, g in goals.items()}, cands, _hash_embed)
    assert right["top1"] == 1.0 and right["mrr"] == 1.0 and right["chance_top1"] == 1 / 6
    shifted = {k: [f"my {goals[f'c{(i + 1) % len(TOPICS)}']}"] for i, k in enumerate(goals)}
    wrong = goal_identifiability(shifted, cands, _hash_embed)
    assert wrong["top1"] == 0.0 and wrong["mrr"] < 0.6


def test_paired_row_comparison_finds_a_real_gap_and_calls_equal_rows_noise():
    from mimesis.eval.realism.c2st import PER_CONVERSATION, compare_pooled

    convs = [f"c{i}" for i in range(40)]
    # row a: the discriminator is right on half its rows (chance: distance 0); row b: always
    # right (distance 50): a is closer to real, by a gap the paired CI must show
    a = {PER_CONVERSATION: {c: [2.0, 4.0] for c in convs}}
    b = {PER_CONVERSATION: {c: [4.0, 4.0] for c in convs}}
    got = compare_pooled(a, b, n_bootstrap=500, seed=0)
    assert got["difference"] == -50.0 and got["ci_high"] < 0 and got["p_a_better"] < 0.01
    same = compare_pooled(a, a, n_bootstrap=500, seed=0)
    assert same["difference"] == 0.0 and same["ci_low"] <= 0 <= same["ci_high"]
    assert same["p_a_better"] > 0.5  # "a is closer than itself" is never supported
    assert compare_pooled({}, b) == {}


def test_real_row_pools_many_splits_and_takes_its_p_from_one():
    from mimesis.eval.realism.metrics import row_metrics

    rng = random.Random(0)
    items, _ = build_items([_conv(i, rng) for i in range(32)], 0, 2, seed=0)
    real = real_records(items, lambda turns, i: [], max_turn_chars=60)
    many = RealismConfig(c2st_min_support=8, c2st_folds=4, c2st_real_splits=6,
                         c2st_permutations=19, n_bootstrap=100)
    out = row_metrics(None, real, _featurize, is_assistant_like, many, None, {})["c2st"]
    one = row_metrics(None, real, _featurize, is_assistant_like,
                      RealismConfig(c2st_min_support=8, c2st_folds=4, c2st_real_splits=1,
                                    c2st_permutations=19, n_bootstrap=100), None, {})["c2st"]
    assert out["p_value_splits"] == 1.0 and out["p_value"] == one["p_value"]  # split 0's test
    assert out["n"] > one["n"]  # the distance pools all six splits


def test_lost_positions_enter_the_all_positions_c2st_as_empty_turns():
    from mimesis.eval.realism.metrics import all_position_pairs

    texts = lambda it: "<think>x</think>\nsure" if it.half == 0 else ""
    m, real = _rows(texts)
    rng = random.Random(0)
    items, _ = build_items([_conv(i, rng) for i in range(32)], 0, 2, seed=0)
    sim = simulated_records(items, parse_all([texts(it) for it in items]), lambda t, i: [],
                            max_turn_chars=60)
    (s0, _), (s1, _) = all_position_pairs(sim, real)
    asked = [r for r in sim if not r.item.real_ended]
    assert len(s1) == sum(r.item.half == 1 for r in asked) and all(r.utterance == "" for r in s1)
    assert all(r.utterance == "sure" for r in s0)
    row = m["sim"]
    assert 0 < row["scored_rate"] < 1
    assert row["c2st_all"]["distance"] > row.get("c2st", {}).get("distance", 0.0)


def test_raw_rates_count_first_draws_that_would_have_leaked_or_said_nothing():
    from mimesis.eval.realism.generate import Generated
    from mimesis.eval.realism.run import raw_rates
    from mimesis.simulator.parsing import parse_turn

    def first(text: str, extra: tuple[str, ...] = ()) -> Generated:
        return Generated("sent", "", "sent", False, (), text, (*parse_turn(text).flags, *extra))

    draws = [first("<think>plan</think>\nhi there"),
             first("<think>plan</think>\n<think>more</think>\nhi"),  # a second block: leak
             first("<think>plan cut by the token limit"),              # unclosed: leak + empty
             first("<think>done</think>\n<|end_conversation|>"),     # an end is not empty
             first("<think>x</think>\nbudget 450 euros", ("hidden_fact",)),  # rule 0: leak
             Generated("", "", "", False, ())]                          # no draw: not counted
    got = raw_rates(draws, ["a", "a", "b", "b", "c", "c"], n_bootstrap=0)
    assert got == {"raw_positions": 5.0, "raw_conversations": 3.0,
                   "raw_leak_rate": 3 / 5, "raw_empty_rate": 1 / 5}
    assert "raw_leak_rate" not in raw_rates([Generated("", "", "", False, ())], ["a"])
    with_ci = raw_rates(draws, ["a", "a", "b", "b", "c", "c"], n_bootstrap=500)
    # conversation b leaks once of two, a once of two, c its one: the CI spans those shares
    assert 1 / 3 <= with_ci["raw_leak_rate_ci_low"] <= 0.6 <= with_ci["raw_leak_rate_ci_high"]


def test_clustered_share_resamples_conversations_not_positions():
    """Ten conversations all hit, ten all missed, ten positions each: resampling positions would
    give a CI of about ±0.07; resampling conversations about ±0.22."""
    from mimesis.eval.realism.metrics import clustered_share

    hits = [c < 10 for c in range(20) for _ in range(10)]
    groups = [f"c{c}" for c in range(20) for _ in range(10)]
    out = clustered_share(hits, groups, n_bootstrap=2000, seed=0)
    assert out["rate"] == 0.5 and out["n"] == 200 and out["conversations"] == 20
    assert out["ci_low"] < 0.35 and out["ci_high"] > 0.65
    assert clustered_share([True] * 4, ["a", "a", "b", "b"], 100)["ci_low"] == 1.0
    with pytest.raises(ValueError, match="hits"):
        clustered_share([True], ["a", "b"])


def test_all_positions_distance_and_its_paired_difference_count_the_lost_turns():
    """Three simulators that copy the real turns: at every position ("copy"), at a third of
    them ("lossy", it ends elsewhere) and at none ("silent"). On spoken turns copy and lossy
    both look real, so their spoken paired difference is noise; over all positions the lost
    turns enter as empty ones, lossy moves away from copy and silent is told apart every time,
    a paired all-positions difference whose CI excludes 0. Table and verdicts carry them."""
    rng = random.Random(0)
    items, _ = build_items([_conv(i, rng) for i in range(32)], 0, 2, seed=0)
    label = lambda turns, i: []
    real = real_records(items, label, max_turn_chars=60)
    end = "<|end_conversation|>"
    keep = lambda it: (int(it.conv_id[1:]) + it.turn_index) % 3 == 0
    texts = {"copy": [it.real_text or end for it in items],
             "lossy": [(it.real_text or end) if keep(it) else end for it in items],
             "silent": [end for _ in items]}
    sims = {n: simulated_records(items, parse_all(t), label, max_turn_chars=60)
            for n, t in texts.items()}
    cfg = RealismConfig(min_support=3, c2st_min_support=8, c2st_folds=4, c2st_permutations=0,
                        n_bootstrap=300, goal_distractors=10)
    m = evaluate_rows(sims, real, _featurize, is_assistant_like, cfg, _hash_embed)
    copy, lossy, silent = m["copy"], m["lossy"], m["silent"]
    assert silent["scored_rate"] == 0 < lossy["scored_rate"] < 0.5 * copy["scored_rate"]
    assert copy["c2st_all"] == copy["c2st"]  # nothing lost: the same test
    assert lossy["c2st_all"]["n"] > lossy["c2st"]["n"]  # the lost positions are in
    assert lossy["c2st_all"]["distance"] > lossy["c2st"]["distance"] + 10
    assert silent["c2st_all"]["distance"] == 50.0 and "c2st" not in silent
    spoken = m["comparisons"]["copy-vs-lossy"]  # copy − lossy, rows in their given order
    assert spoken["ci_low"] <= 0 <= spoken["ci_high"]
    everything = m["comparisons_all"]["copy-vs-lossy"]
    assert everything["difference"] == pytest.approx(
        copy["c2st_all"]["distance"] - lossy["c2st_all"]["distance"])
    assert everything["difference"] < spoken["difference"] - 10
    assert "copy-vs-silent" not in m["comparisons"]  # silent has no spoken turn to compare
    gone = m["comparisons_all"]["copy-vs-silent"]
    assert gone["ci_high"] < 0 and gone["p_a_better"] < 0.01  # copy is closer to real
    table = markdown_table(m, ["copy", "lossy", "silent", "real"])
    assert "(paired, same positions, all positions)" in table
    assert f"| {lossy['c2st_all']['distance']:.1f} [" in table


def test_the_realism_rate_helpers_doctests_hold():
    import doctest

    from mimesis.eval.realism import metrics, run

    for module in (metrics, run):
        assert doctest.testmod(module).failed == 0
