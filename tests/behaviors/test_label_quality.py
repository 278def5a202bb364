"""The hand-labelled set, the scorer and the learned labeller's cross-validation."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_label import CopyingBackend, hash_embed

from mimesis.behaviors import learned, quality
from mimesis.behaviors.annotator import Annotator, AnnotatorParams
from mimesis.behaviors.catalog import BEHAVIOR_IDS, TRAIT_IDS
from mimesis.behaviors.gold import GoldError, load_gold
from mimesis.behaviors.quality import LABELS, gold_inputs
from mimesis.behaviors.scoring import score


def test_packaged_set_is_large_enriched_and_explained():
    gold = load_gold()
    assert len(gold) >= 300
    assert sum(g.draw == "enriched" for g in gold) >= 0.4 * len(gold)
    assert len({g.id for g in gold}) == len(gold)  # one turn per conversation
    for g in gold:
        assert set(g.reasons) == g.labels and all(r.strip() for r in g.reasons.values())
        assert (g.turn_index == 0) == (not g.prev_agent)
    readme = Path(learned.__file__).parent / "data" / "README.md"
    assert "B2" in readme.read_text() and "enriched" in readme.read_text()


def test_bad_row_is_a_clear_error_with_its_line(tmp_path):
    row = load_gold()[0].model_dump()
    path = tmp_path / "gold.jsonl"
    path.write_text(json.dumps(row) + "\n" + json.dumps({**row, "behaviors": ["B99"]}) + "\n")
    with pytest.raises(GoldError, match=r"(?s)gold.jsonl:2: .*B99"):
        load_gold(path)
    with pytest.raises(GoldError, match="not found"):
        load_gold(tmp_path / "missing.jsonl")


def test_scorer_on_a_hand_made_example_with_known_figures():
    gold = [{"B2"}, {"B2", "B9"}, set(), {"B9"}]
    pred = [{"B2"}, {"B9"}, {"B2"}, set()]
    s = score(gold, pred, ["B2", "B9"], n_bootstrap=200, seed=1)
    assert (s["B2"].precision, s["B2"].recall, s["B2"].support, s["B2"].predicted) == (.5, .5, 2, 2)
    assert (s["B9"].precision, s["B9"].recall) == (1.0, 0.5)
    micro = s["micro"]  # tp 2, fp 1, fn 2
    assert micro.precision == pytest.approx(2 / 3) and micro.recall == 0.5
    assert micro.f1 == pytest.approx(2 * (2 / 3) * 0.5 / (2 / 3 + 0.5))
    for name in ("precision", "recall", "f1"):
        lo, hi = micro.ci[name]
        assert 0 <= lo <= getattr(micro, name) <= hi <= 1 and lo < hi


def test_a_labeller_that_always_says_none_has_recall_zero():
    gold = load_gold()
    truth = [g.labels for g in gold]
    for labels in (BEHAVIOR_IDS, TRAIT_IDS):
        s = score(truth, [set()] * len(truth), labels, n_bootstrap=50)
        assert s["micro"].support > 0
        assert s["micro"].recall == 0 and s["micro"].ci["recall"] == (0.0, 0.0)
        assert all(s[label].recall == 0 for label in labels)


def test_learned_labeller_is_never_scored_on_turns_or_conversations_it_was_fitted_on():
    gold = load_gold()[:120]
    x = learned.featurize(gold_inputs(gold), hash_embed)
    y = np.array([[label in g.labels for label in LABELS] for g in gold], dtype=int)
    groups = [g.id for g in gold]
    # Two turns of one conversation: the group must keep them in the same fold.
    groups[1] = groups[0]
    keys = [f"{g.id}#{g.turn_index}" for g in gold]
    params = learned.LearnedParams(folds=3, inner_folds=2)
    preds, scorers = learned.cross_validate(x, y, groups, LABELS, params, seed=0, keys=keys)
    assert len(preds) == len(scorers) == len(gold)
    assert len({id(s) for s in scorers}) == 3
    for n, model in enumerate(scorers):
        assert keys[n] not in model.trained_on
        assert not {k for k, g in zip(keys, groups) if g == groups[n]} & model.trained_on
        assert len(model.trained_on) < len(gold)
    assert any(model.models for model in scorers)  # it did fit models (terse, typo_rich, ...)


def test_threshold_is_the_lowest_cut_reaching_the_target_precision():
    prob = np.array([0.95, 0.9, 0.8, 0.6, 0.5, 0.1])
    y = np.array([1, 1, 0, 1, 0, 0])
    assert learned.choose_threshold(prob, y, 0.75, 2) == 0.6  # 3 of 4 at >= 0.6
    assert learned.choose_threshold(prob, y, 1.0, 2) == 0.9
    assert learned.choose_threshold(prob, y, 1.0, 3) == float("inf")  # abstains


def test_trait_threshold_is_the_cut_with_the_best_f1():
    prob = np.array([0.95, 0.9, 0.8, 0.6, 0.5, 0.1])
    y = np.array([1, 1, 0, 1, 0, 0])
    assert learned.choose_threshold_f1(prob, y) == 0.6  # P 3/4, R 1: F1 0.86
    assert learned.choose_threshold_f1(prob, np.zeros(6, dtype=int)) == float("inf")


def test_context_features_see_an_edit_of_the_last_reply_not_a_new_question():
    reply = "Here is a short poem about the sea and its waves, in four lines."
    edit = learned.context_features("make it shorter and use rhymes about waves", reply, "")
    new = learned.context_features("What is the capital of France?", reply, "")
    names = ["has_agent", "agent_len", "cut_off", "overlap_agent", "overlap_user", "edits",
             "edit_head", "back_ref", "verdict", "opener", "opener_with_agent", "questions",
             "items", "edit_not_question", "restrict", "pressure", "asks", "fit", "asked",
             "asked_not_answered", "refused", "refused_again"]
    e, n = dict(zip(names, edit, strict=True)), dict(zip(names, new, strict=True))
    assert e["edit_not_question"] == 1 and n["edit_not_question"] == 0
    assert e["overlap_agent"] > n["overlap_agent"] and n["opener"] == 1
    assert learned.context_features("hi", "", "")[:3] == [0.0, 0.0, 0.0]
    def feats(text: str) -> dict[str, float]:
        return dict(zip(names, learned.context_features(text, reply, ""), strict=True))
    assert feats("can you do it without a library?")["restrict"] == 1
    assert feats("still not working")["pressure"] == 1
    assert feats("still not working, the loop in line 3 never ends because i is reset to 0 "
                 "on every pass of it")["pressure"] == 0  # a long complaint says what is wrong
    assert feats("Write a poem. Explain it. What is its metre?")["asks"] == 3
    assert feats("no, that's not what I asked for")["fit"] == 1
    assert learned.context_features("without a library", "", "")[14] == 0  # no reply: no B7
    question = "Here are two options. Which one do you want?"
    asked = dict(zip(names, learned.context_features("you decide for me", question, ""),
                     strict=True))
    answered = dict(zip(names, learned.context_features("The second one.", question, ""),
                        strict=True))
    assert asked["asked"] == answered["asked"] == 1 and feats("ok")["asked"] == 0
    assert asked["asked_not_answered"] == 1 and answered["asked_not_answered"] == 0
    refusal = "I'm sorry, but I cannot access real-time stock prices."
    again = dict(zip(names, learned.context_features("give me the real-time stock prices",
                                                     refusal, "real-time stock prices for AAPL"),
                     strict=True))
    assert again["refused"] == 1 and again["refused_again"] > 0.5 and feats("ok")["refused"] == 0


def test_without_an_embedder_the_features_have_no_embedding_columns():
    gold = load_gold()[:30]
    x = learned.featurize(gold_inputs(gold), None)
    assert not any(c.startswith(("e", "cos")) for c in x.columns)
    assert any(c.startswith("c") for c in x.columns) and len(x) == 30
    with_embed = learned.featurize(gold_inputs(gold), hash_embed)
    assert {"cos_agent", "e0"} <= set(with_embed.columns)


def test_mixed_is_scored_out_of_fold_with_the_learned_behaviours():
    gold = load_gold()[:90]
    q = quality.measure(gold, Annotator(CopyingBackend(), AnnotatorParams()), None,
                        learned.LearnedParams(folds=2, inner_folds=2), n_bootstrap=20)
    assert set(q.scores["cv"]) == {"mixed", "learned"}
    cv = q.scores["cv"]
    for b in BEHAVIOR_IDS:  # no annotator ids: mixed's behaviours are the out-of-fold ones,
        if b not in q.rule_behaviors:  # but for those it takes from the rules
            assert cv["mixed"]["behaviors"][b].predicted == cv["learned"]["behaviors"][b].predicted
    rules = [set(i.rules.behaviors) for i in gold_inputs(gold)]
    for b in q.rule_behaviors:
        assert cv["mixed"]["behaviors"][b].predicted == sum(b in r for r in rules)


def test_appending_a_batch_keeps_the_parts_of_earlier_turns():
    gold = load_gold()
    first = quality.assign_parts(gold[:quality.FIRST_BATCH_TURNS])
    assert all(quality.packaged_parts()[cid] == part for cid, part in first.items())


def test_split_is_deterministic_grouped_stratified_and_about_half():
    gold = load_gold()
    parts = quality.split_gold(gold)
    assert parts == quality.split_gold(list(gold)) and set(parts) == {"dev", "test"}
    assert quality.assign_parts(gold) == quality.assign_parts(gold[::-1])
    assert 0.45 <= parts.count("test") / len(gold) <= 0.55
    b2 = [p for g, p in zip(gold, parts) if "B2" in g.behaviors]
    assert abs(b2.count("test") - b2.count("dev")) <= 2
    by_id = {g.id: p for g, p in zip(gold, parts)}
    assert quality.split_gold(gold[100:140]) == [by_id[g.id] for g in gold[100:140]]


def test_rule_based_labellers_are_never_scored_on_the_dev_part():
    gold = load_gold()[:90]
    annotator = Annotator(CopyingBackend(), AnnotatorParams(label_behaviors=True))
    q = quality.measure(gold, annotator, hash_embed,
                        learned.LearnedParams(folds=2, inner_folds=2), n_bootstrap=20)
    parts = quality.split_gold(gold)
    keys = [f"{g.id}#{g.turn_index}" for g in gold]
    dev = {k for k, p in zip(keys, parts) if p == "dev"}
    test = {k for k, p in zip(keys, parts) if p == "test"}
    assert dev and test and set(q.rows["test"]) == test and not dev & set(q.rows["test"])
    for name in quality.RULE_BASED:  # scored, on the held-out part only
        assert name in q.scores["test"]
        assert all(name not in by_name for part, by_name in q.scores.items() if part != "test")
    # The figures are those of the test rows: the support counts only their positives.
    n_test_b2 = sum("B2" in g.behaviors for g, p in zip(gold, parts) if p == "test")
    assert q.scores["test"]["rules"]["behaviors"]["B2"].support == n_test_b2
    assert q.scores["cv"]["learned"]["behaviors"]["B2"].support == sum(
        "B2" in g.behaviors for g in gold)
    assert all(k.startswith("gold.turns") or k.split(".")[1] in ("test", "cv")
               for k in quality.metrics(q))
    assert set(quality.table(q)["scores"]) == {"test", "cv"}


def test_mixed_takes_a_trait_from_the_rules_only_when_better_on_the_rows_given():
    truth = [frozenset({"pasted_content"}), frozenset({"typo_rich"}), frozenset()]
    rules = [{"pasted_content"}, set(), set()]
    model = [set(), {"typo_rich"}, {"pasted_content"}]
    assert quality.choose_rule_traits(truth, rules, model) == ("pasted_content",)
    assert quality.choose_rule_traits([], [], []) == ()


def test_mixed_takes_a_behaviour_from_the_rules_only_when_precise_and_better():
    params = learned.LearnedParams(min_predicted=2, precision_floor=0.5)
    truth = [frozenset({"B12"}), frozenset({"B12"}), frozenset(), frozenset({"B2"}),
             frozenset({"B7"}), frozenset()]
    rules = [{"B12"}, {"B12"}, {"B12"}, {"B2"}, {"B7"}, set()]
    model = [set(), {"B12"}, set(), {"B2"}, set(), set()]
    # B12: rules 2/3 right, F1 0.8 > learned 0.67; B2: a tie keeps the learned labeller;
    # B7: right, but on one prediction (< min_predicted)
    assert quality.choose_rule_behaviors(truth, rules, model, params) == ("B12",)
    strict = learned.LearnedParams(min_predicted=2, precision_floor=0.7)
    assert quality.choose_rule_behaviors(truth, rules, model, strict) == ()
    assert quality.choose_rule_behaviors([], [], [], params) == ()
    assert quality.mixed_behaviors({"B2", "B12"}, {"B7"}, ("B12", "B7")) == {"B2", "B7"}


def test_traits_fit_only_the_turns_labelled_for_traits():
    gold = load_gold()[:160]
    x = learned.featurize(gold_inputs(gold), None)
    y = np.array([[label in g.labels for label in LABELS] for g in gold], dtype=int)
    groups = np.array([g.id for g in gold])
    params = learned.LearnedParams(folds=2, inner_folds=2)
    keep = np.arange(len(gold)) % 3 != 0  # a third labelled for behaviours only
    known = np.array([[keep[n] or label in BEHAVIOR_IDS for label in LABELS]
                      for n in range(len(gold))])
    blank = y.copy()
    blank[~keep, len(BEHAVIOR_IDS):] = 0  # their empty trait lists must not count as "no trait"
    masked = learned.fit(x, blank, groups, LABELS, params, known=known)
    subset = learned.fit(x[keep], y[keep], groups[keep], LABELS, params)
    t = "typo_rich"
    assert masked.models[t].threshold == subset.models[t].threshold
    np.testing.assert_allclose(masked.models[t].classifier.predict_proba(x)[:, 1],
                               subset.models[t].classifier.predict_proba(x)[:, 1])
    unmasked = learned.fit(x, blank, groups, LABELS, params)
    assert not np.allclose(unmasked.models[t].classifier.predict_proba(x)[:, 1],
                           subset.models[t].classifier.predict_proba(x)[:, 1])
    with pytest.raises(ValueError, match="known mask"):
        learned.fit(x, blank, groups, LABELS, params, known=known[:100])


def test_a_behaviour_taken_from_the_rules_still_abstains_in_the_learned_labeller(monkeypatch):
    # combine: learned emits the learned labeller as it is, so its abstentions must hold there
    # even for a behaviour that mixed takes from the rules
    monkeypatch.setattr(quality, "choose_rule_behaviors", lambda *a, **k: ("B2",))
    params = learned.LearnedParams(folds=2, inner_folds=2, target_precision=0.3,
                                   precision_floor=1.0)  # B2 misses the floor
    figures = quality.measure(load_gold()[:120], Annotator(CopyingBackend(), AnnotatorParams()),
                              None, params, n_bootstrap=10)
    assert figures.rule_behaviors == ("B2",)
    assert figures.labeller.models["B2"].threshold == float("inf")  # learned: abstains
    assert "B2" not in figures.abstain  # mixed: emitted, from the rules
