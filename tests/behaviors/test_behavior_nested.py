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
    assert any(expected) and grid[0.5, 0.3, 5] == expected
    assert not any(grid[0.5, 0.3, 400])  # no behaviour has 400 positives: all abstain
    assert sum(map(len, grid[0.99, 0.3, 5])) <= sum(map(len, expected))
