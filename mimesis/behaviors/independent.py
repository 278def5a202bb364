"""The independent labelled set (``data/gold_independent.jsonl``): real user turns drawn from
conversations outside every development file (``mimesis.behaviors.indepselect``) and labelled by
reading, from the guide in ``docs/behaviors.md``, blind to the labeller; plus an ``overlap`` of
packaged turns relabelled the same way, blind to their packaged labels.

What it measures, every ``label`` run:

- **agreement** between the two sets' labelling conventions: Cohen's kappa per behaviour on the
  overlap (:func:`agreement`; Cohen 1960, ``sklearn.metrics.cohen_kappa_score``);
- **transfer**: the labeller fitted on the development data (the packaged set and the extra
  development turns, ``gold.load_development``), scored on the independent turns (overlap left
  out, since the labeller was fitted on those): micro and per-behaviour precision, recall and
  F1 with percentile-bootstrap intervals. The set holds one turn per conversation (checked on
  load), so resampling turns is resampling conversations.

The file's first line is ``{"meta": {...}}``: source package, seed, draw command, date and how it
was labelled. Labels are behaviours B1-B13 only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, model_validator
from sklearn.metrics import cohen_kappa_score

from mimesis.behaviors import learned
from mimesis.behaviors.annotator import Annotator
from mimesis.behaviors.catalog import BEHAVIOR_IDS
from mimesis.behaviors.gold import GoldError, GoldTurn, load_development, read_headed_set
from mimesis.behaviors.quality import Quality, annotated_behaviors, gold_inputs, mixed_behaviors
from mimesis.behaviors.scoring import Score, score

INDEPENDENT_FILE = "gold_independent.jsonl"
DRAWS = ("random", "later", "overlap")


class IndependentTurn(BaseModel):
    """One hand-labelled turn of the independent set (fields as in ``GoldTurn``, no traits).

    Attributes:
        draw: ``random`` (any of the first 8 user turns), ``later`` (user turns 2-8) or
            ``overlap`` (a packaged turn, relabelled for agreement).
    """

    id: str
    turn_index: int
    draw: str
    prev_user: str
    prev_agent: str
    text: str
    behaviors: list[str]
    uncertain: bool
    reasons: dict[str, str]

    @model_validator(mode="after")
    def _check(self) -> IndependentTurn:
        if unknown := set(self.behaviors) - set(BEHAVIOR_IDS):
            raise ValueError(f"unknown behaviours {sorted(unknown)}")
        if set(self.reasons) != set(self.behaviors):
            raise ValueError("every behaviour needs one reason, and only those")
        if self.draw not in DRAWS:
            raise ValueError(f"draw {self.draw!r} is not one of {DRAWS}")
        return self

    def as_gold(self) -> GoldTurn:
        """The turn as a ``GoldTurn`` (traits empty) for the project's feature code."""
        return GoldTurn(id=self.id, turn_index=self.turn_index, draw="random",
                        prev_user=self.prev_user, prev_agent=self.prev_agent, text=self.text,
                        behaviors=self.behaviors, traits=[], uncertain=self.uncertain,
                        reasons=self.reasons)


def default_path() -> Path:
    """Path of the independent set inside the installed package."""
    return Path(str(resources.files("mimesis.behaviors") / "data" / INDEPENDENT_FILE))


def load_independent(path: Path | None = None) -> tuple[dict, list[IndependentTurn]]:
    """The metadata header and the rows of ``path`` (default: the packaged file).

    Raises:
        GoldError: missing file or header, an invalid row (with its line number), or a
            conversation that gives more than one turn.
    """
    path = path or default_path()
    if not path.is_file():
        raise GoldError(f"independent set {path} not found (is package data installed?)")
    return read_headed_set(path, IndependentTurn)


def split_overlap(rows: Sequence[IndependentTurn], gold: Sequence[GoldTurn]
                  ) -> tuple[list[IndependentTurn], list[tuple[IndependentTurn, GoldTurn]]]:
    """The held-out rows and the overlap pairs ``(independent row, packaged row)``.

    Args:
        gold: The labeller's training data (``load_development()``: the packaged set and the
            extra development turns); overlap rows are looked up among them.

    Raises:
        GoldError: a held-out row comes from a conversation of ``gold`` (a leak: the labeller
            was fitted on it), or an overlap row is not one of its turns.
    """
    packaged = {(g.id, g.turn_index): g for g in gold}
    gold_ids = {g.id for g in gold}
    held, pairs = [], []
    for r in rows:
        if r.draw == "overlap":
            if (r.id, r.turn_index) not in packaged:
                raise GoldError(f"overlap turn {r.id}#{r.turn_index} is not in the packaged set")
            pairs.append((r, packaged[r.id, r.turn_index]))
        elif r.id in gold_ids:
            raise GoldError(f"held-out turn {r.id}#{r.turn_index} is from a development "
                            "conversation")
        else:
            held.append(r)
    return held, pairs


def agreement(pairs: Sequence[tuple[IndependentTurn, GoldTurn]]) -> dict[str, dict]:
    """Per behaviour on the overlap: ``n`` turns, positives in each set, raw agreement and
    Cohen's kappa (``None`` where undefined: both sets constant and equal, so chance agreement
    is 1)."""
    out = {}
    for b in BEHAVIOR_IDS:
        a = [int(b in r.behaviors) for r, _ in pairs]
        g = [int(b in p.behaviors) for _, p in pairs]
        both_constant = len(set(a)) <= 1 and len(set(g)) <= 1
        kappa = None
        if pairs and not both_constant:
            value = float(cohen_kappa_score(a, g))
            kappa = None if math.isnan(value) else value
        out[b] = {"n": len(pairs), "positives_independent": sum(a),
                  "positives_packaged": sum(g),
                  "agreement": sum(x == y for x, y in zip(a, g, strict=True)) / len(pairs)
                  if pairs else None, "kappa": kappa}
    return out


def transfer(rows: Sequence[IndependentTurn], predicted: Sequence[set[str]],
             n_bootstrap: int = 1000, seed: int = 0) -> dict[str, dict[str, Score]]:
    """Scores of ``predicted`` (label sets aligned with ``rows``) over B1-B13, on all held-out
    rows (``all``) and on the random draw only (``random``: closest to population rates)."""
    truth = [set(r.behaviors) for r in rows]
    keep = [n for n, r in enumerate(rows) if r.draw == "random"]
    return {"all": score(truth, predicted, BEHAVIOR_IDS, n_bootstrap, seed),
            "random": score([truth[n] for n in keep], [predicted[n] for n in keep],
                            BEHAVIOR_IDS, n_bootstrap, seed)}


def measure(figures: Quality, annotator: Annotator, embed: learned.Embed | None,
            params: learned.LearnedParams, n_bootstrap: int = 1000, seed: int = 0,
            path: Path | None = None, rule_behaviors: Sequence[str] | None = None) -> dict:
    """The independent set's block of ``quality.json``: the labeller the ``label`` stage uses
    (``figures.labeller``, fitted on the development data, with its abstentions; the behaviours
    ``rule_behaviors`` (default ``figures.rule_behaviors``, what ``mixed`` takes; ``()`` for the
    ``learned`` combine mode) from the rules; plus the annotator's behaviour ids when it gives
    any, as in ``mixed``) scored on the held-out turns,
    and the convention agreement on the overlap. The leak check runs against the whole
    development data (packaged set and extra development turns), whatever subset the labeller
    was fitted on."""
    meta, rows = load_independent(path)
    held, pairs = split_overlap(rows, load_development())
    gold_rows = [r.as_gold() for r in held]
    inputs = gold_inputs(gold_rows)
    taken = figures.rule_behaviors if rule_behaviors is None else tuple(rule_behaviors)
    predicted = [mixed_behaviors(p, set(i.rules.behaviors), taken) for p, i in
                 zip(figures.labeller.predict(learned.featurize(inputs, embed,
                                                                params.embed_chars)),
                     inputs, strict=True)]
    if (ids := annotated_behaviors(gold_rows, [i.rules for i in inputs], annotator)) is not None:
        predicted = [p | (a & set(BEHAVIOR_IDS)) for p, a in zip(predicted, ids, strict=True)]
    scores = transfer(held, predicted, n_bootstrap, seed)
    return {"source": meta, "turns": len(held), "random_turns": sum(r.draw == "random" for r in held),
            "overlap_turns": len(pairs), "kappa": agreement(pairs),
            "abstaining": dict(figures.abstain or {}),
            "scores": {part: {label: s.flat() for label, s in per.items()}
                       for part, per in scores.items()}}


def metrics(block: dict) -> dict[str, float]:
    """Flat MLflow metrics of :func:`measure`'s block: ``label_independent_micro_<figure>`` (all
    held-out turns), ``label_independent_random_micro_<figure>``, ``label_independent.<B>.
    <figure>``, ``label_independent_kappa.<B>`` where defined, turn counts and the number of
    abstaining behaviours."""
    out = {"label_independent_turns": float(block["turns"]),
           "label_independent_overlap_turns": float(block["overlap_turns"]),
           "label_independent_abstaining": float(len(block["abstaining"]))}
    for part, prefix in (("all", "label_independent"), ("random", "label_independent_random")):
        out.update({f"{prefix}_micro_{k}": v for k, v in block["scores"][part]["micro"].items()})
    for b in BEHAVIOR_IDS:
        out.update({f"label_independent.{b}.{k}": v
                    for k, v in block["scores"]["all"][b].items()})
        if (kappa := block["kappa"][b]["kappa"]) is not None:
            out[f"label_independent_kappa.{b}"] = kappa
    return out
