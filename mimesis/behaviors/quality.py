"""How good each labeller is, measured on the hand-labelled set (``mimesis.behaviors.gold``):
the rules, the annotator (when it gives behaviour ids), their union, and the learned labeller
(grouped cross-validation, never scored on turns or conversations it was fitted on).

The ``label`` stage runs :func:`measure` on every run, logs :func:`metrics` to MLflow, and labels
with the labeller :func:`measure` fitted on the whole set.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mimesis.behaviors import learned
from mimesis.behaviors.annotator import Annotator, TurnView
from mimesis.behaviors.catalog import BEHAVIOR_IDS, TRAIT_IDS
from mimesis.behaviors.gold import GoldTurn
from mimesis.behaviors.rules import RuleResult, detect_rules
from mimesis.behaviors.scoring import Score, score

LABELS: tuple[str, ...] = (*BEHAVIOR_IDS, *TRAIT_IDS)


@dataclass
class Quality:
    """Scores per labeller (``rules``, ``annotator``, ``union``, ``learned``) and group
    (``behaviors``: B1-B13, ``traits``), and the learned labeller fitted on the whole set."""

    scores: dict[str, dict[str, dict[str, Score]]]
    labeller: learned.LearnedLabeller
    n_turns: int


def gold_inputs(gold: Sequence[GoldTurn]) -> list[learned.TurnInput]:
    """Each labelled turn with its context and its rule labels (rules see the two context turns)."""
    out = []
    for g in gold:
        turns = g.turns()
        out.append(learned.TurnInput(g.text, g.prev_agent, g.prev_user,
                                     detect_rules(turns, len(turns) - 1)))
    return out


def _annotated(gold: Sequence[GoldTurn], rules: Sequence[RuleResult],
               annotator: Annotator) -> list[set[str]] | None:
    views = [TurnView(utterance=g.text, prev_agent=g.prev_agent,
                      labels=(*r.behaviors, *r.traits), first=not g.prev_agent)
             for g, r in zip(gold, rules, strict=True)]
    ids = annotator.behaviors(views)
    return None if ids is None else [set(x) for x in ids]


def measure(gold: Sequence[GoldTurn], annotator: Annotator, embed: learned.Embed,
            params: learned.LearnedParams, n_bootstrap: int = 1000, seed: int = 0) -> Quality:
    """Score every labeller on ``gold`` and fit the learned labeller on all of it.

    The annotator is scored only when it gives behaviour ids (``label_behaviors``); traits of
    the annotator and union rows are the rules' (the annotator gives none).
    """
    inputs = gold_inputs(gold)
    truth = [g.labels for g in gold]
    rule_sets = [set(i.rules.behaviors) | set(i.rules.traits) for i in inputs]
    preds: dict[str, list[set[str]]] = {"rules": rule_sets}
    if (model := _annotated(gold, [i.rules for i in inputs], annotator)) is not None:
        preds["annotator"] = [m | set(r.traits) for m, r in
                              zip(model, (i.rules for i in inputs), strict=True)]
        preds["union"] = [m | r for m, r in zip(model, rule_sets, strict=True)]
    x = learned.featurize(inputs, embed, params.embed_chars)
    y = np.array([[label in t for label in LABELS] for t in truth], dtype=int)
    groups, keys = [g.id for g in gold], [f"{g.id}#{g.turn_index}" for g in gold]
    preds["learned"], _ = learned.cross_validate(x, y, groups, LABELS, params, seed, keys)
    scores = {name: {"behaviors": score(truth, p, BEHAVIOR_IDS, n_bootstrap, seed),
                     "traits": score(truth, p, TRAIT_IDS, n_bootstrap, seed)}
              for name, p in preds.items()}
    final = learned.fit(x, y, groups, LABELS, params, seed, keys)
    return Quality(scores, final, len(gold))


def metrics(quality: Quality) -> dict[str, float]:
    """Flat MLflow metrics ``gold.<labeller>.<label or micro_behaviors/micro_traits>.<figure>``
    (figures: precision, recall, f1, support, predicted and their ``_lo``/``_hi`` bounds)."""
    out = {"gold.turns": float(quality.n_turns)}
    for name, groups in quality.scores.items():
        for group, per_label in groups.items():
            for label, s in per_label.items():
                key = f"micro_{group}" if label == "micro" else label
                out.update({f"gold.{name}.{key}.{k}": v for k, v in s.flat().items()})
    return out


def table(quality: Quality) -> dict:
    """JSON-ready figures per labeller, group and label (for ``quality.json``)."""
    return {"turns": quality.n_turns,
            "thresholds": {k: m.threshold for k, m in quality.labeller.models.items()},
            "scores": {name: {group: {label: {**s.flat()} for label, s in per.items()}
                              for group, per in groups.items()}
                       for name, groups in quality.scores.items()}}
