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

Every setting is scored on the **population-like** development rows only (draws ``random`` and
``later``, no keyword cues): the enriched draws hold far more positives than real traffic, which
inflates precision at any threshold. With the rule behaviours given, each setting is also scored
with ``mixed`` taking behaviours from the rules where they beat the learned labeller
(``quality.choose_rule_behaviors``, chosen inside each outer training part).

Run: ``python -m mimesis.behaviors.nested --c 0.05 0.2`` prints one line per setting and the
setting :func:`choose` picks.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from sklearn.model_selection import GroupKFold

from mimesis.behaviors import learned, quality
from mimesis.behaviors.catalog import BEHAVIOR_IDS
from mimesis.behaviors.gold import POPULATION_DRAWS, load_development
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
                floors: Sequence[float], min_positives: Sequence[int], seed: int = 0,
                rules: Sequence[set[str]] | None = None, untuned: Sequence[bool] | None = None
                ) -> dict[tuple[float, float, int, bool], list[set[str]]]:
    """Nested out-of-fold behaviour predictions for every row, per setting.

    Args:
        x: :func:`learned.featurize` frame, ``n`` rows.
        y: Hand labels of B1-B13, shape ``(n, 13)``, 0/1.
        groups: Conversation id per row (a conversation stays in one fold at every level).
        params: Folds, inner folds, ``min_predicted`` and ``regularization`` used as given.
        targets, floors, min_positives: The grid of ``target_precision``, ``precision_floor``
            and ``min_positives`` to score.
        rules, untuned: The rule behaviours of each row and whether the row may choose which
            behaviours ``mixed`` takes from the rules (population-like, rules not tuned on it:
            ``quality.rules_untuned_population``). Given both, every setting is also scored
            with that choice made inside each outer training part
            (``quality.choose_rule_behaviors``).

    Returns:
        ``{(target, floor, min_positives, from_rules): label sets per row}``; ``from_rules``
        is ``True`` only when ``rules`` and ``untuned`` are given.
    """
    groups = np.asarray(groups)
    grid = list(itertools.product(targets, floors, min_positives))
    variants = (False, True) if rules is not None and untuned is not None else (False,)
    preds: dict[tuple[float, float, int, bool], list[set[str]]] = {
        (*g, r): [set() for _ in range(len(x))] for g in grid for r in variants}
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
            taken: tuple[str, ...] = ()
            if True in variants:
                pop = [k for k, n in enumerate(train) if untuned[n]]
                taken = quality.choose_rule_behaviors(
                    [truth[k] for k in pop], [rules[train[k]] for k in pop],
                    [cv_preds[t, f, m][k] for k in pop],
                    replace(params, precision_floor=f))
            for row, labels in zip(test, _predict(final, len(test), t, m, params.min_predicted),
                                   strict=True):
                preds[t, f, m, False][row] = labels - floor_out
                if True in variants:
                    preds[t, f, m, True][row] = quality.mixed_behaviors(
                        labels - floor_out, rules[row], taken)
    return preds


def choose(cells: dict[tuple, dict], min_lower_precision: float = 0.5,
           min_recall: float = 0.3, tie: float = 0.01) -> tuple | None:
    """The setting the rule picks (docs/behaviors.md, "How the settings were chosen"): among
    cells whose nested micro figures on the population-like rows have a precision interval
    whose lower end is at least ``min_lower_precision`` and a recall of at least ``min_recall``,
    the highest F1; F1s within ``tie`` of the best are tied, broken by precision.

    Args:
        cells: ``{setting: {"precision", "precision_lo", "recall", "f1"}}``.

    Returns:
        The chosen setting, or ``None`` when no cell is admissible.
    """
    ok = {k: c for k, c in cells.items()
          if c["precision_lo"] >= min_lower_precision and c["recall"] >= min_recall}
    if not ok:
        return None
    best = max(c["f1"] for c in ok.values())
    return max((k for k, c in ok.items() if c["f1"] >= best - tie),
               key=lambda k: ok[k]["precision"])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()),
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--c", type=float, nargs="+", default=[0.05, 0.2],
                        help="regularization (C) values of the behaviour regressions, > 0")
    parser.add_argument("--targets", type=float, nargs="+", default=[0.55, 0.6, 0.65, 0.7],
                        help="target_precision values, in (0, 1]")
    parser.add_argument("--floors", type=float, nargs="+", default=[0.5],
                        help="precision_floor values, in [0, 1]")
    parser.add_argument("--min-positives", type=int, nargs="+", default=[8],
                        help=f"min_positives values, >= {MIN_MODEL_POSITIVES}")
    parser.add_argument("--seed", type=int, default=0, help="seed of folds and bootstrap")
    parser.add_argument("--n-bootstrap", type=int, default=1000, help="bootstrap resamples")
    args = parser.parse_args(argv)
    if (min(args.c) <= 0 or not all(0 < t <= 1 for t in args.targets)
            or not all(0 <= f <= 1 for f in args.floors)
            or min(args.min_positives) < MIN_MODEL_POSITIVES or args.n_bootstrap < 1):
        parser.error(f"need --c > 0, 0 < --targets <= 1, 0 <= --floors <= 1, --min-positives "
                     f">= {MIN_MODEL_POSITIVES} and --n-bootstrap >= 1")
    dev = load_development()
    inputs = quality.gold_inputs(dev)
    x = learned.featurize(inputs, None)
    y = np.array([[b in g.behaviors for b in BEHAVIOR_IDS] for g in dev], dtype=int)
    truth = [set(g.behaviors) for g in dev]
    rules = [set(i.rules.behaviors) for i in inputs]
    untuned = [False] * len(dev)
    for n in quality.rules_untuned_population(dev):
        untuned[n] = True
    pop = [n for n, g in enumerate(dev) if g.draw in POPULATION_DRAWS]
    base = learned.LearnedParams(folds=5, inner_folds=3)
    cells = {}
    print(f"{len(dev)} development turns, {len(pop)} population-like (scored)", flush=True)
    for c in args.c:
        grid = nested_grid(x, y, [g.id for g in dev], replace(base, regularization=c),
                           args.targets, args.floors, args.min_positives, args.seed,
                           rules, untuned)
        for (t, f, m, r), pred in grid.items():
            s = score([truth[n] for n in pop], [pred[n] for n in pop], BEHAVIOR_IDS,
                      args.n_bootstrap, args.seed)
            mi = s["micro"]
            cells[c, t, f, m, r] = {"precision": mi.precision, "recall": mi.recall, "f1": mi.f1,
                                    "precision_lo": mi.ci["precision"][0]}
            # per behaviour: right / predicted / labelled positives
            per = " ".join(f"{b}:{round(s[b].precision * s[b].predicted)}/{s[b].predicted}/"
                           f"{s[b].support}" for b in BEHAVIOR_IDS if s[b].predicted)
            print(f"C {c} target {t} floor {f} min_pos {m} rules {r}: P {mi.precision:.3f} "
                  f"[{mi.ci['precision'][0]:.2f}, {mi.ci['precision'][1]:.2f}] R {mi.recall:.3f} "
                  f"[{mi.ci['recall'][0]:.2f}, {mi.ci['recall'][1]:.2f}] F1 {mi.f1:.3f} "
                  f"right {round(mi.precision * mi.predicted)} of {mi.predicted} predicted, "
                  f"{mi.support} positives | {per}", flush=True)
    chosen = choose(cells)
    print("no admissible cell (precision interval's lower end >= 0.5 and recall >= 0.3)"
          if chosen is None else f"chosen (C, target, floor, min_positives, from_rules): {chosen}")


if __name__ == "__main__":
    main()
