"""Choose the learned labeller's settings by grouped cross-validation of the ``label`` stage's
whole procedure on the development data ("nested" CV), as docs/behaviors.md's rule asks.

Each outer fold's training part runs what :func:`mimesis.behaviors.quality.measure` runs on the
whole development set: per behaviour a model with a threshold chosen on inner folds
(:func:`learned.fit`), and the abstentions of :func:`quality.abstentions` (fewer than
``min_positives`` positives, no threshold at ``target_precision``, or a grouped-CV precision of
that training part below ``precision_floor``). The outer test part is then labelled by it.

The probabilities do not depend on ``target_precision``, ``precision_floor`` or
``min_positives`` (every behaviour with at least 3 positives gets a model here, masked later),
so one pass per ``regularization`` scores a whole grid of the other three.

Run: ``python -m mimesis.behaviors.nested --c 0.05 0.2 1.0`` prints one line per setting.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from sklearn.model_selection import GroupKFold

from mimesis.behaviors import learned
from mimesis.behaviors.catalog import BEHAVIOR_IDS
from mimesis.behaviors.gold import load_development
from mimesis.behaviors.quality import gold_inputs
from mimesis.behaviors.scoring import score

MIN_MODEL_POSITIVES = 3  # the least min_positives allowed (LearnedParams); others are masks


@dataclass
class _Fitted:
    """One training part's fit, per behaviour: positives, inner out-of-fold probabilities (for
    its thresholds) and the probabilities its full model gives the rows it was not fitted on."""

    positives: dict[str, int]
    inner_prob: dict[str, np.ndarray]
    inner_y: dict[str, np.ndarray]
    prob: dict[str, np.ndarray]


def _fit_part(x: pd.DataFrame, y: np.ndarray, groups: np.ndarray, train: np.ndarray,
              test: np.ndarray, params: learned.LearnedParams, seed: int) -> _Fitted:
    inner = GroupKFold(n_splits=min(params.inner_folds, len(set(groups[train]))))
    fitted = _Fitted({}, {}, {}, {})
    xt = x.iloc[train]
    for k, b in enumerate(BEHAVIOR_IDS):
        target = y[train, k]
        fitted.positives[b] = int(target.sum())
        if target.sum() < MIN_MODEL_POSITIVES or target.sum() == len(target):
            continue
        fitted.inner_prob[b] = learned._out_of_fold(xt, target, groups[train], inner, params,
                                                    seed, b)
        fitted.inner_y[b] = target
        model = learned._classifier(params, seed, b, x.columns).fit(xt, target)
        fitted.prob[b] = model.predict_proba(x.iloc[test])[:, 1]
    return fitted


def _predict(fitted: _Fitted, n: int, target: float, min_positives: int,
             min_predicted: int) -> list[set[str]]:
    """Label sets of the rows ``fitted.prob`` scores, before the precision-floor abstention."""
    out: list[set[str]] = [set() for _ in range(n)]
    for b, prob in fitted.prob.items():
        if fitted.positives[b] < min_positives:
            continue
        cut = learned.choose_threshold(fitted.inner_prob[b], fitted.inner_y[b], target,
                                       min_predicted)
        for row in np.flatnonzero(prob >= cut):
            out[row].add(b)
    return out


def nested_grid(x: pd.DataFrame, y: np.ndarray, groups: Sequence[str],
                params: learned.LearnedParams, targets: Sequence[float],
                floors: Sequence[float], min_positives: Sequence[int], seed: int = 0
                ) -> dict[tuple[float, float, int], list[set[str]]]:
    """Nested out-of-fold behaviour predictions for every row, per setting.

    Args:
        x: :func:`learned.featurize` frame, ``n`` rows.
        y: Hand labels of B1-B13, shape ``(n, 13)``, 0/1.
        groups: Conversation id per row (a conversation stays in one fold at every level).
        params: Folds, inner folds, ``min_predicted`` and ``regularization`` used as given.
        targets, floors, min_positives: The grid of ``target_precision``, ``precision_floor``
            and ``min_positives`` to score.

    Returns:
        ``{(target, floor, min_positives): label sets per row}``.
    """
    groups = np.asarray(groups)
    grid = list(itertools.product(targets, floors, min_positives))
    preds: dict[tuple[float, float, int], list[set[str]]] = {
        g: [set() for _ in range(len(x))] for g in grid}
    outer = GroupKFold(n_splits=min(params.folds, len(set(groups))))
    for train, test in outer.split(x, groups=groups):
        final = _fit_part(x, y, groups, train, test, params, seed)
        # the stage's abstention by CV precision, from a grouped CV of this training part
        cv_preds = {g: [set() for _ in train] for g in grid}
        sub = GroupKFold(n_splits=min(params.folds, len(set(groups[train]))))
        for s_train, s_test in sub.split(train, groups=groups[train]):
            part = _fit_part(x, y, groups, train[s_train], train[s_test], params, seed)
            for t, f, m in grid:
                for row, labels in zip(s_test, _predict(part, len(s_test), t, m,
                                                        params.min_predicted), strict=True):
                    cv_preds[t, f, m][row] = labels
        truth = [{b for k, b in enumerate(BEHAVIOR_IDS) if y[n, k]} for n in train]
        for t, f, m in grid:
            cv = score(truth, cv_preds[t, f, m], BEHAVIOR_IDS, 1)
            floor_out = {b for b in BEHAVIOR_IDS
                         if cv[b].predicted == 0 or cv[b].precision < f}
            for row, labels in zip(test, _predict(final, len(test), t, m, params.min_predicted),
                                   strict=True):
                preds[t, f, m][row] = labels - floor_out
    return preds


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--c", type=float, nargs="+", default=[0.05, 0.2, 1.0])
    parser.add_argument("--targets", type=float, nargs="+", default=[0.55, 0.6, 0.65, 0.7])
    parser.add_argument("--floors", type=float, nargs="+", default=[0.5])
    parser.add_argument("--min-positives", type=int, nargs="+", default=[8])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-bootstrap", type=int, default=1000)
    args = parser.parse_args(argv)
    dev = load_development()
    x = learned.featurize(gold_inputs(dev), None)
    y = np.array([[b in g.behaviors for b in BEHAVIOR_IDS] for g in dev], dtype=int)
    truth = [set(g.behaviors) for g in dev]
    base = learned.LearnedParams(folds=5, inner_folds=3)
    for c in args.c:
        grid = nested_grid(x, y, [g.id for g in dev], replace(base, regularization=c),
                           args.targets, args.floors, args.min_positives, args.seed)
        for (t, f, m), pred in grid.items():
            s = score(truth, pred, BEHAVIOR_IDS, args.n_bootstrap, args.seed)
            mi = s["micro"]
            # per behaviour: right / predicted / labelled positives
            per = " ".join(f"{b}:{round(s[b].precision * s[b].predicted)}/{s[b].predicted}/"
                           f"{s[b].support}" for b in BEHAVIOR_IDS if s[b].predicted)
            print(f"C {c} target {t} floor {f} min_pos {m}: P {mi.precision:.3f} "
                  f"[{mi.ci['precision'][0]:.2f}, {mi.ci['precision'][1]:.2f}] R {mi.recall:.3f} "
                  f"[{mi.ci['recall'][0]:.2f}, {mi.ci['recall'][1]:.2f}] F1 {mi.f1:.3f} "
                  f"right {round(mi.precision * mi.predicted)} of {mi.predicted} predicted, "
                  f"{mi.support} positives | {per}", flush=True)


if __name__ == "__main__":
    main()
