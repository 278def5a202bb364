"""The nested grid (``mimesis.behaviors.nested``) that chooses the labeller's settings: inside
each outer training part it must do what the ``label`` stage does on the whole development set."""

from __future__ import annotations

import numpy as np
from sklearn.model_selection import GroupKFold

from mimesis.behaviors import learned, nested, quality
from mimesis.behaviors.catalog import BEHAVIOR_IDS
from mimesis.behaviors.gold import load_gold
from mimesis.behaviors.scoring import score


def test_each_outer_part_gets_the_stages_fit_and_abstentions():
    gold = load_gold()[:160]
    x = learned.featurize(quality.gold_inputs(gold), None)
    y = np.array([[b in g.behaviors for b in BEHAVIOR_IDS] for g in gold], dtype=int)
    groups = np.array([g.id for g in gold])
    params = learned.LearnedParams(folds=2, inner_folds=2, min_positives=5,
                                   target_precision=0.5, precision_floor=0.3)
    grid = nested.nested_grid(x, y, groups, params, [0.5, 0.99], [0.3], [5, 400])
    expected: list[set[str]] = [set() for _ in gold]
    for train, test in GroupKFold(2).split(x, groups=groups):
        # what quality.measure does on the training part: fit, CV, abstain below the floor
        model = learned.fit(x.iloc[train], y[train], groups[train], BEHAVIOR_IDS, params)
        oof, _ = learned.cross_validate(x.iloc[train], y[train], groups[train], BEHAVIOR_IDS,
                                        params)
        cv = score([set(gold[n].behaviors) for n in train], oof, BEHAVIOR_IDS, 1)
        dropped = {b for b in BEHAVIOR_IDS if cv[b].predicted == 0 or cv[b].precision < 0.3}
        for n, labels in zip(test, model.predict(x.iloc[test]), strict=True):
            expected[n] = labels - dropped
    assert any(expected) and grid[0.5, 0.3, 5, False] == expected
    assert not any(grid[0.5, 0.3, 400, False])  # no behaviour has 400 positives: all abstain
    assert sum(map(len, grid[0.99, 0.3, 5, False])) <= sum(map(len, expected))


def test_the_rule_behaviours_are_chosen_inside_each_outer_part():
    gold = load_gold()[:160]
    inputs = quality.gold_inputs(gold)
    x = learned.featurize(inputs, None)
    y = np.array([[b in g.behaviors for b in BEHAVIOR_IDS] for g in gold], dtype=int)
    groups = np.array([g.id for g in gold])
    rules = [set(i.rules.behaviors) for i in inputs]
    untuned = [g.draw == "random" for g in gold]
    params = learned.LearnedParams(folds=2, inner_folds=2, min_positives=5,
                                   target_precision=0.5, precision_floor=0.3, min_predicted=1)
    grid = nested.nested_grid(x, y, groups, params, [0.5], [0.3], [5], 0, rules, untuned)
    plain, mixed = grid[0.5, 0.3, 5, False], grid[0.5, 0.3, 5, True]
    for n in range(len(gold)):
        # behaviours the rules supply come only from the rules, the others as without them
        assert mixed[n] - rules[n] <= plain[n]
    taken = {b for n in range(len(gold)) for b in mixed[n] - plain[n]}
    assert taken and all(any(b in rules[n] for n in range(len(gold))) for b in taken)


def test_choose_takes_the_best_admissible_f1_and_breaks_ties_by_precision():
    cells = {"a": {"precision": 0.70, "precision_lo": 0.55, "recall": 0.35, "f1": 0.46},
             "b": {"precision": 0.60, "precision_lo": 0.51, "recall": 0.40, "f1": 0.465},
             "c": {"precision": 0.55, "precision_lo": 0.45, "recall": 0.50, "f1": 0.52},
             "d": {"precision": 0.90, "precision_lo": 0.80, "recall": 0.20, "f1": 0.33}}
    assert nested.choose(cells) == "a"  # c: interval too low; d: recall too low; a ties b
    assert nested.choose(cells, tie=0.001) == "b"
    assert nested.choose({"d": cells["d"]}) is None
