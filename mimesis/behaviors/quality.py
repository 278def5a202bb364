"""How good each labeller is, measured on the hand-labelled set (``mimesis.behaviors.gold``):
the rules, the annotator (when it gives behaviour ids), their union, the learned labeller and
``mixed`` (the ``label`` stage's default: behaviours from the learned labeller, which reads the
rule hits as features, plus the annotator's when it gives any; each trait from whichever of rules
and learned labeller is better on it).

The set is split once, deterministically, into a **dev** part and a held-out **test** part
(:func:`split_gold`). The rule lexicons and thresholds were tuned by reading dev turns only, so
the rule-based labellers (rules, annotator, union) are scored on the test part only. The learned
labeller and ``mixed`` are scored by grouped cross-validation on all turns (part ``cv``: each
turn's behaviours come from a model fitted, and thresholded on inner folds, without its
conversation) and on the test part's out-of-fold predictions (``test``: turns the rules were not
tuned on either). ``mixed`` picks each trait's labeller on the dev part.

The ``label`` stage runs :func:`measure` on every run, logs :func:`metrics` to MLflow, and labels
with the labeller :func:`measure` fitted on the whole set.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np

from mimesis.behaviors import learned
from mimesis.behaviors.annotator import Annotator, TurnView
from mimesis.behaviors.catalog import BEHAVIOR_IDS, TRAIT_IDS
from mimesis.behaviors.gold import POPULATION_DRAWS, GoldTurn, load_gold
from mimesis.behaviors.rules import RuleResult, detect_rules
from mimesis.behaviors.scoring import Score, score

LABELS: tuple[str, ...] = (*BEHAVIOR_IDS, *TRAIT_IDS)
DEV, TEST, CV = "dev", "test", "cv"
RULE_BASED = ("rules", "annotator", "union")  # never scored on the dev part
FIRST_BATCH_TURNS = 300  # the set's first rows, labelled in batch 1; later batches are appended
# Packaged turns relabelled after their batch was split (data/README.md, "Relabelled turns"),
# with the behaviours they had then: the split stratifies them by those, so no turn changes part.
SPLIT_AS_LABELLED: dict[tuple[str, int], frozenset[str]] = {
    ("xmbbsiP", 6): frozenset(), ("1uSOnON", 4): frozenset()}


@dataclass
class Quality:
    """Scores per part (``test``: held-out turns; ``cv``: cross-validated on all), labeller
    (``rules``, ``annotator``, ``union``, ``mixed``, ``learned``) and group (``behaviors``:
    B1-B13, ``traits``); the learned labeller fitted on the whole set; the traits ``mixed`` takes
    from the rules; and the keys (``id#turn_index``) of the turns each part holds."""

    scores: dict[str, dict[str, dict[str, dict[str, Score]]]]
    labeller: learned.LearnedLabeller
    n_turns: int
    rule_traits: tuple[str, ...] = ()
    rows: dict[str, tuple[str, ...]] | None = None
    abstain: dict[str, str] | None = None  # behaviour -> why ``mixed`` never emits it
    rule_behaviors: tuple[str, ...] = ()  # behaviours ``mixed`` takes from the rules


def mixed_behaviors(learned_labels: set[str], rule_labels: set[str],
                    rule_behaviors: Sequence[str]) -> set[str]:
    """``mixed``'s behaviours of one turn: the learned labeller's, except those taken from the
    rules (``rule_behaviors``, :func:`choose_rule_behaviors`)."""
    taken = set(rule_behaviors)
    return ({b for b in learned_labels if b in BEHAVIOR_IDS and b not in taken}
            | (set(rule_labels) & taken))


def _stratum(labels: set[str]) -> tuple[bool, ...]:
    other = labels & set(BEHAVIOR_IDS) - {"B2", "B12"}
    return "B2" in labels, "B12" in labels, bool(other), "pasted_content" in labels


def _hash(cid: str) -> str:
    return hashlib.sha256(cid.encode()).hexdigest()


def assign_parts(gold: Sequence[GoldTurn], first: str = DEV) -> dict[str, str]:
    """Conversation id -> ``dev`` or ``test``: conversations (all their turns together) are
    stratified by B2, B12, another behaviour and pasted_content (a relabelled turn by its
    behaviours before, :data:`SPLIT_AS_LABELLED`), ordered by the SHA-256 of their id within each
    stratum, and alternately assigned, ``first`` first (about half each)."""
    order = (DEV, TEST) if first == DEV else (TEST, DEV)
    labels: dict[str, set[str]] = defaultdict(set)
    for g in gold:
        before = SPLIT_AS_LABELLED.get((g.id, g.turn_index))
        labels[g.id] |= g.labels if before is None else g.labels - set(BEHAVIOR_IDS) | before
    strata: dict[tuple[bool, ...], list[str]] = defaultdict(list)
    for cid, labs in labels.items():
        strata[_stratum(labs)].append(cid)
    return {cid: order[n % 2] for key in sorted(strata)
            for n, cid in enumerate(sorted(strata[key], key=_hash))}


@cache
def packaged_parts() -> dict[str, str]:
    """The packaged set's split: :func:`assign_parts` of each labelling batch on its own (the
    first ``FIRST_BATCH_TURNS`` rows dev first, then the rest test first, which evens out the
    strata's odd counts), so that appending a batch leaves the parts of earlier turns, the
    split the rules were tuned against, unchanged."""
    gold = load_gold()
    return {**assign_parts(gold[:FIRST_BATCH_TURNS]), **assign_parts(gold[FIRST_BATCH_TURNS:], TEST)}


def split_gold(gold: Sequence[GoldTurn]) -> list[str]:
    """The part (``dev``/``test``) of each turn: the packaged set's split for its conversations
    (so a subset keeps their parts), hash parity for a conversation outside it."""
    parts = packaged_parts()
    return [parts.get(g.id, (DEV, TEST)[int(_hash(g.id), 16) % 2]) for g in gold]


def gold_inputs(gold: Sequence[GoldTurn]) -> list[learned.TurnInput]:
    """Each labelled turn with its context and its rule labels (rules see the two context turns)."""
    out = []
    for g in gold:
        turns = g.turns()
        out.append(learned.TurnInput(g.text, g.prev_agent, g.prev_user,
                                     detect_rules(turns, len(turns) - 1)))
    return out


def annotated_behaviors(gold: Sequence[GoldTurn], rules: Sequence[RuleResult],
               annotator: Annotator) -> list[set[str]] | None:
    views = [TurnView(utterance=g.text, prev_agent=g.prev_agent,
                      labels=(*r.behaviors, *r.traits), first=not g.prev_agent)
             for g, r in zip(gold, rules, strict=True)]
    ids = annotator.behaviors(views)
    return None if ids is None else [set(x) for x in ids]


def choose_rule_traits(truth: Sequence[frozenset[str]], rules: Sequence[set[str]],
                       model: Sequence[set[str]]) -> tuple[str, ...]:
    """Traits whose rule labels have a higher F1 than the learned labeller's on the rows given
    (the dev part); ties and an empty part keep the learned labeller."""
    if not truth:
        return ()
    s_rules = score(truth, rules, TRAIT_IDS, 1)
    s_model = score(truth, model, TRAIT_IDS, 1)
    return tuple(t for t in TRAIT_IDS if s_rules[t].f1 > s_model[t].f1)


def rules_untuned_population(gold: Sequence[GoldTurn]) -> list[int]:
    """Rows drawn without keyword cues (:data:`POPULATION_DRAWS`) that the rule lexicons were
    not tuned on (every row but the packaged set's dev part)."""
    packaged = packaged_parts()
    return [n for n, g in enumerate(gold)
            if g.draw in POPULATION_DRAWS and packaged.get(g.id) != DEV]


def choose_rule_behaviors(truth: Sequence[frozenset[str]], rules: Sequence[set[str]],
                          model: Sequence[set[str]], params: learned.LearnedParams
                          ) -> tuple[str, ...]:
    """Behaviours whose rule labels beat the learned labeller's on the rows given (population-like
    development rows outside the packaged set's dev part, where the rule lexicons were tuned:
    :func:`rules_untuned_population`): the rules'
    precision there reaches ``precision_floor`` on at least ``min_predicted`` predictions and
    their F1 is higher than the learned labeller's out-of-fold F1. An enriched draw inflates
    every precision, so the choice is made where prevalence is closest to the population's."""
    if not truth:
        return ()
    s_rules = score(truth, rules, BEHAVIOR_IDS, 1)
    s_model = score(truth, model, BEHAVIOR_IDS, 1)
    return tuple(b for b in BEHAVIOR_IDS
                 if s_rules[b].predicted >= params.min_predicted
                 and s_rules[b].precision >= params.precision_floor
                 and s_rules[b].f1 > s_model[b].f1)


def measure(gold: Sequence[GoldTurn], annotator: Annotator, embed: learned.Embed | None,
            params: learned.LearnedParams, n_bootstrap: int = 1000, seed: int = 0) -> Quality:
    """Score every labeller on its part of ``gold`` and fit the learned labeller on all of it.

    The annotator is scored only when it gives behaviour ids (``label_behaviors``); traits of
    the annotator and union rows are the rules'.
    """
    inputs = gold_inputs(gold)
    truth = [g.labels for g in gold]
    parts = split_gold(gold)
    rule_sets = [set(i.rules.behaviors) | set(i.rules.traits) for i in inputs]
    preds: dict[str, list[set[str]]] = {"rules": rule_sets}
    if (model := annotated_behaviors(gold, [i.rules for i in inputs], annotator)) is not None:
        preds["annotator"] = [m | set(r.traits) for m, r in
                              zip(model, (i.rules for i in inputs), strict=True)]
        preds["union"] = [m | r for m, r in zip(model, rule_sets, strict=True)]
    x = learned.featurize(inputs, embed, params.embed_chars)
    y = np.array([[label in t for label in LABELS] for t in truth], dtype=int)
    # turns labelled for behaviours only neither fit nor score a trait
    known = np.array([[g.traits_labelled or label in BEHAVIOR_IDS for label in LABELS]
                      for g in gold], dtype=bool).reshape(len(gold), len(LABELS))
    groups, keys = [g.id for g in gold], [f"{g.id}#{g.turn_index}" for g in gold]
    oof, _ = learned.cross_validate(x, y, groups, LABELS, params, seed, keys, known)
    dev = [n for n, p in enumerate(parts) if p == DEV and gold[n].traits_labelled]
    rule_traits = choose_rule_traits([truth[n] for n in dev], [rule_sets[n] for n in dev],
                                     [oof[n] for n in dev])
    pop = rules_untuned_population(gold)
    rule_behaviors = choose_rule_behaviors(
        [truth[n] for n in pop], [rule_sets[n] for n in pop], [oof[n] for n in pop],
        params) if params.behaviors_from_rules else ()
    annotated = [a - set(TRAIT_IDS) for a in preds.get("annotator", [set()] * len(gold))]
    preds["mixed"] = [mixed_behaviors(m, r, rule_behaviors)
                      | {b for b in a if b in BEHAVIOR_IDS}
                      | {t for t in TRAIT_IDS if t in (r if t in rule_traits else m)}
                      | ({"thanks_and_leave"} & r)
                      for a, r, m in zip(annotated, rule_sets, oof, strict=True)]
    preds["learned"] = oof
    rows = {TEST: [n for n, p in enumerate(parts) if p == TEST], CV: list(range(len(gold)))}

    def scored(names: Sequence[str], part: str) -> dict[str, dict[str, dict[str, Score]]]:
        out = {}
        for name in names:
            out[name] = {}
            for group, ids in (("behaviors", BEHAVIOR_IDS), ("traits", TRAIT_IDS)):
                idx = [n for n in rows[part] if group == "behaviors" or gold[n].traits_labelled]
                out[name][group] = score([truth[n] for n in idx],
                                         [preds[name][n] for n in idx], ids, n_bootstrap, seed)
        return out

    scores = {TEST: scored([*[n for n in RULE_BASED if n in preds], "mixed", "learned"], TEST),
              CV: scored(["mixed", "learned"], CV)}
    final = learned.fit(x, y, groups, LABELS, params, seed, keys, known)
    abstain = abstentions(final, score(truth, oof, BEHAVIOR_IDS, 1), y, params)
    for b in abstain:  # an infinite threshold never fires; the model stays for inspection
        if b in final.models:
            final.models[b].threshold = float("inf")
    # the learned labeller abstains as measured (``combine: learned`` emits it as it is);
    # ``mixed`` emits the behaviours it takes from the rules, so they are not reported abstaining
    return Quality(scores, final, len(gold), rule_traits,
                   {part: tuple(keys[n] for n in idx) for part, idx in rows.items()},
                   {b: why for b, why in abstain.items() if b not in rule_behaviors},
                   rule_behaviors)


def abstentions(labeller: learned.LearnedLabeller, cv: dict[str, Score], y: np.ndarray,
                params: learned.LearnedParams) -> dict[str, str]:
    """Behaviours the fitted labeller must not emit, each with its reason: too few hand-labelled
    positives for a model, no threshold reaching ``target_precision`` on inner folds, or a
    cross-validated precision (``cv``: out-of-fold scores on the labelled set) below
    ``precision_floor``, or no out-of-fold prediction at all (nothing to judge it by).

    Args:
        y: Hand labels, shape ``(n, len(LABELS))``, for the positive counts.
    """
    out = {}
    for b in BEHAVIOR_IDS:
        positives = int(y[:, LABELS.index(b)].sum())
        model = labeller.models.get(b)
        if model is None:
            out[b] = f"{positives} hand-labelled positives (< min_positives {params.min_positives})"
        elif not np.isfinite(model.threshold):
            out[b] = f"no threshold reaches precision {params.target_precision} on inner folds"
        elif cv[b].predicted == 0 or cv[b].precision < params.precision_floor:
            out[b] = (f"cross-validated precision {cv[b].precision:.2f} on {cv[b].predicted} "
                      f"predictions (floor {params.precision_floor})")
    return out


def metrics(quality: Quality) -> dict[str, float]:
    """Flat MLflow metrics ``gold.<part>.<labeller>.<label or micro_behaviors/micro_traits>.
    <figure>`` (part ``test`` or ``cv``; figures: precision, recall, f1, support, predicted and
    their ``_lo``/``_hi`` bounds), plus ``gold.turns`` and ``gold.<part>.turns``."""
    out = {"gold.turns": float(quality.n_turns)}
    out.update({f"gold.{part}.turns": float(len(keys))
                for part, keys in (quality.rows or {}).items()})
    for part, by_name in quality.scores.items():
        for name, groups in by_name.items():
            for group, per_label in groups.items():
                for label, s in per_label.items():
                    key = f"micro_{group}" if label == "micro" else label
                    out.update({f"gold.{part}.{name}.{key}.{k}": v for k, v in s.flat().items()})
    return out


def table(quality: Quality) -> dict:
    """JSON-ready figures per part, labeller, group and label (for ``quality.json``)."""
    return {"turns": quality.n_turns, "abstaining": dict(quality.abstain or {}),
            "parts": {TEST: "held-out half of the labelled set (rules never tuned on it)",
                      CV: "all turns, grouped cross-validation (learned and mixed only)",
                      "turns": {p: len(k) for p, k in (quality.rows or {}).items()}},
            "mixed_traits_from_rules": list(quality.rule_traits),
            "mixed_behaviors_from_rules": list(quality.rule_behaviors),
            "thresholds": {k: m.threshold for k, m in quality.labeller.models.items()},
            "scores": {part: {name: {group: {label: {**s.flat()} for label, s in per.items()}
                                     for group, per in groups.items()}
                              for name, groups in by_name.items()}
                       for part, by_name in quality.scores.items()}}
