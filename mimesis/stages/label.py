"""Stage ``label``: tag every user turn with the 13 behaviours and the style traits, and write the
private reasoning, the scenario goal and the end-of-conversation reasoning.

Reads:  ``<curate>/{train,val,test}.jsonl`` (``Conversation``).
Writes: ``<out>/{train,val,test}.jsonl`` (``LabeledConversation``), ``rejects.jsonl`` (``Reject``:
        invalid, duplicate or unlabellable conversations, with a reason), ``counts.json`` (per
        split: input = labelled + rejected + not_sampled, plus label frequencies and producers).
Run:    ``python -m mimesis.stages.label --curate data/curate --out data/label``

Per split, ``max_conversations`` conversations are sampled with the seed (the rest are counted as
``not_sampled``) and cut to their first ``max_user_turns`` user turns. Rules
(``mimesis.behaviors.rules``) label every turn; the annotator (``label.annotator``: a local HF
model or an OpenAI-compatible endpoint) writes reasoning for ``reasoning_splits``, goals for all
splits, end reasoning for conversations that really ended, and optionally behaviour ids, with one
batched call per prompt kind. Every label, reasoning and goal records its producer.

Every run also measures the labellers on the development data (``gold.load_development``: the
packaged hand-labelled set plus the extra development turns, 750 in all;
``mimesis.behaviors.quality``: rules, annotator and union on its held-out test part, the learned
labeller and ``mixed`` by grouped cross-validation and on the test part; per-label and micro
precision/recall/F1 with bootstrap CIs), logs the figures to MLflow, writes them to
``<out>/quality.json``, and, with ``combine: mixed`` or ``learned``, labels with the learned
labeller fitted on the whole set (``mixed``: its behaviours, plus the annotator's when it gives
any; each trait from the labeller better on the dev part). Behaviours whose cross-validated
precision on that set is below ``learned.precision_floor`` abstain. The labeller is then scored
on the independent set (``mimesis.behaviors.independent``: turns from other conversations,
labelled blind to it), with Cohen's kappa per behaviour between the two sets' labels on their
overlap; ``quality.json`` carries it as ``independent``, MLflow as ``label_independent_*``.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from mimesis.behaviors import independent, learned, quality
from mimesis.behaviors.annotator import AnnotatorParams, make_annotator
from mimesis.behaviors.gold import load_development
from mimesis.behaviors.labeling import COMBINE_MODES, STAGE, Outcome, label_conversations
from mimesis.behaviors.learned import LearnedParams
from mimesis.behaviors.report import label_frequency, log_to_mlflow, reconcile
from mimesis.io import read_jsonl, write_json, write_jsonl
from mimesis.params import build, stage_params
from mimesis.runtime_env import configure_environment
from mimesis.schemas import Conversation, Reject
from mimesis.tracking import stage_run

SPLITS = ("train", "val", "test")

__all__ = ["AnnotatorParams", "LabelParams", "main", "run"]


@dataclass(frozen=True)
class LabelParams:
    """Parameters of the ``label`` stage (params.yaml ``label:``)."""

    # Conversations sampled per split with the seed; 0 = all.
    max_conversations: dict[str, int] = field(
        default_factory=lambda: {"train": 40, "val": 8, "test": 24})
    max_user_turns: int = 4  # label the first N user turns (+ reply); 0 = all. Cut => ended=False
    reasoning_splits: list[str] = field(default_factory=lambda: list(SPLITS))
    combine: str = "mixed"  # mixed (behaviours union, traits rules|learned per dev) | learned | union | rules | annotator
    trait_min_share: float = 0.5  # terse/typo_rich enter the scenario at this share of turns
    annotator: AnnotatorParams = field(default_factory=AnnotatorParams)
    learned: LearnedParams = field(default_factory=LearnedParams)
    n_bootstrap: int = 1000  # resamples of the labelled turns for the CIs of the figures
    seed: int = 13
    profile: str = "default"

    def __post_init__(self) -> None:
        if unknown := (set(self.max_conversations) | set(self.reasoning_splits)) - set(SPLITS):
            raise ValueError(f"unknown splits {sorted(unknown)}; use {SPLITS}")
        if min(self.max_conversations.values(), default=0) < 0 or self.max_user_turns < 0:
            raise ValueError("max_conversations and max_user_turns must be >= 0")
        if self.combine not in COMBINE_MODES:
            raise ValueError(f"combine {self.combine!r} not in {COMBINE_MODES}")
        if not 0 < self.trait_min_share <= 1:
            raise ValueError("trait_min_share must be in (0, 1]")
        if self.n_bootstrap < 1:
            raise ValueError("n_bootstrap must be >= 1")


def make_embedder() -> learned.Embed:
    """Sentence embeddings for the learned labeller (MiniLM, <= 128 tokens per text)."""
    from mimesis.models.embeddings import MiniLMEmbedder

    model = MiniLMEmbedder(max_length=128, batch_size=64)
    return lambda texts: model.embed(texts, desc="label embed")


def run(curate_dir: Path, out_dir: Path, params: LabelParams) -> Path:
    """Label the curated splits in ``curate_dir``; write the outputs to ``out_dir``."""
    start = time.time()
    with stage_run(STAGE, dataclasses.asdict(params)):
        inputs, input_rejects = load_inputs(curate_dir)
        sampled, not_sampled = sample(inputs, params.max_conversations, params.seed)
        annotator = make_annotator(params.annotator, params.seed)
        embed = make_embedder() if params.learned.embeddings else None
        figures = quality.measure(load_development(), annotator, embed, params.learned,
                                  params.n_bootstrap, params.seed)
        taken = figures.rule_behaviors if params.combine == "mixed" else ()
        transfer = independent.measure(figures, annotator, embed, params.learned,
                                       params.n_bootstrap, params.seed, rule_behaviors=taken)
        outcome = label_conversations(
            [c for split in SPLITS for c in sampled[split]], annotator,
            max_user_turns=params.max_user_turns, reasoning_splits=params.reasoning_splits,
            combine_mode=params.combine, trait_min_share=params.trait_min_share,
            learn=_learner(figures.labeller, embed, params.learned),
            rule_traits=figures.rule_traits if params.combine == "mixed" else (),
            rule_behaviors=taken)
        out_dir.mkdir(parents=True, exist_ok=True)
        write_json(out_dir / "quality.json", {**quality.table(figures), "independent": transfer})
        for split in SPLITS:
            write_jsonl(out_dir / f"{split}.jsonl", outcome.labelled.get(split, []))
        rejects = [r for split in SPLITS for r in input_rejects[split]] + outcome.rejects
        write_jsonl(out_dir / "rejects.jsonl", rejects)
        counts = summarise(inputs, input_rejects, not_sampled, outcome)
        counts["seconds"] = round(time.time() - start, 1)
        write_json(out_dir / "counts.json", counts)
        log_to_mlflow(counts, {t.name: t.source for t in annotator.templates.values()})
        mlflow_log_quality(figures, transfer)
    print_summary(counts)
    print_quality(figures)
    print_independent(transfer)
    return out_dir


def _learner(labeller: learned.LearnedLabeller, embed: learned.Embed | None,
             params: LearnedParams):
    return lambda items: labeller.predict(learned.featurize(items, embed, params.embed_chars))


def mlflow_log_quality(figures: quality.Quality, transfer: dict) -> None:
    """The labellers' figures on the labelled set and on the independent set as metrics,
    ``quality.json`` and the kappa table (``independent_kappa.json``) as artifacts."""
    import mlflow

    mlflow.log_metrics({**quality.metrics(figures), **independent.metrics(transfer)})
    mlflow.log_dict({**quality.table(figures), "independent": transfer}, "quality.json")
    mlflow.log_dict(transfer["kappa"], "independent_kappa.json")


def print_independent(transfer: dict) -> None:
    """Micro P/R (95% CI) on the independent set, the abstaining behaviours and the kappas."""
    m = transfer["scores"]["all"]["micro"]
    print(f"label independent ({transfer['turns']} turns): behaviors P {m['precision']:.2f} "
          f"[{m['precision_lo']:.2f}, {m['precision_hi']:.2f}] R {m['recall']:.2f} "
          f"[{m['recall_lo']:.2f}, {m['recall_hi']:.2f}]; abstaining: "
          f"{sorted(transfer['abstaining']) or 'none'}")
    kappas = {b: k["kappa"] for b, k in transfer["kappa"].items() if k["kappa"] is not None}
    print(f"label kappa on {transfer['overlap_turns']} overlap turns: "
          + ", ".join(f"{b} {k:.2f}" for b, k in kappas.items()))


def print_quality(figures: quality.Quality) -> None:
    """One line per part and labeller: micro P/R/F1 (95% CI) over B1-B13 and over the traits."""
    sizes = {p: len(k) for p, k in (figures.rows or {}).items()}
    for part, by_name in figures.scores.items():
        for name, groups in by_name.items():
            cells = []
            for group, per in groups.items():
                m = per["micro"]
                cells.append(f"{group} P {m.precision:.2f} {_ci(m, 'precision')} "
                             f"R {m.recall:.2f} {_ci(m, 'recall')} F1 {m.f1:.2f} {_ci(m, 'f1')}")
            print(f"label gold {part} ({sizes.get(part, '?')} turns) {name:9s}: "
                  + "; ".join(cells))
    print(f"label mixed takes from the rules: {list(figures.rule_traits) or 'no trait'}, "
          f"{list(figures.rule_behaviors) or 'no behaviour'}")


def _ci(s, name: str) -> str:
    lo, hi = s.ci[name]
    return f"[{lo:.2f}, {hi:.2f}]"


def load_inputs(curate_dir: Path) -> tuple[dict[str, list[Conversation]], dict[str, list[Reject]]]:
    """Valid conversations per split, and per split a reject for each invalid, misfiled or
    repeated record.

    Raises:
        FileNotFoundError: a split file is missing (run the curate stage first).
    """
    inputs: dict[str, list[Conversation]] = {s: [] for s in SPLITS}
    rejects: dict[str, list[Reject]] = {s: [] for s in SPLITS}
    seen: set[str] = set()
    for split in SPLITS:
        path = curate_dir / f"{split}.jsonl"
        if not path.is_file():
            raise FileNotFoundError(f"{path} not found: run the curate stage first")
        for row in read_jsonl(path):
            checked = _check(row, split, seen)
            if isinstance(checked, Reject):
                rejects[split].append(checked)
            else:
                inputs[split].append(checked)
    return inputs, rejects


def _check(row: object, split: str, seen: set[str]) -> Conversation | Reject:
    rid = str(row.get("id", "?")) if isinstance(row, dict) else "?"
    try:
        conv = Conversation.model_validate(row)
    except ValidationError as exc:
        return Reject(id=rid, stage=STAGE, reason="invalid_record", detail=str(exc)[:300])
    if conv.split not in (None, split):
        return Reject(id=rid, stage=STAGE, reason="split_mismatch",
                      detail=f"record says {conv.split!r}, file is {split!r}")
    if conv.id in seen:
        return Reject(id=rid, stage=STAGE, reason="duplicate_id", detail=f"again in {split}")
    seen.add(conv.id)
    return conv.model_copy(update={"split": split})


def sample(inputs: dict[str, list[Conversation]], limits: dict[str, int],
           seed: int) -> tuple[dict[str, list[Conversation]], dict[str, int]]:
    """Up to ``limits[split]`` conversations per split (0 or missing = all), drawn with a
    per-split RNG seeded by ``seed`` and kept in input order; also the count left out."""
    sampled, left_out = {}, {}
    for split, convs in inputs.items():
        n = limits.get(split, 0)
        keep = (range(len(convs)) if n <= 0 or n >= len(convs)
                else sorted(random.Random(f"{seed}:{split}").sample(range(len(convs)), n)))
        sampled[split] = [convs[i] for i in keep]
        left_out[split] = len(convs) - len(sampled[split])
    return sampled, left_out


def summarise(inputs: dict[str, list[Conversation]], input_rejects: dict[str, list[Reject]],
              not_sampled: dict[str, int], outcome: Outcome) -> dict:
    """The content of counts.json; checks that every input record is accounted for.

    Raises:
        RuntimeError: the counts of a split do not reconcile.
    """
    split_of = {c.id: s for s, convs in inputs.items() for c in convs}
    late = Counter(split_of[r.id] for r in outcome.rejects)
    splits = {s: {"input": len(inputs[s]) + len(input_rejects[s]),
                  "labelled": len(outcome.labelled.get(s, [])),
                  "rejected": len(input_rejects[s]) + late[s],
                  "not_sampled": not_sampled[s],
                  "truncated": outcome.truncated.get(s, 0),
                  "user_turns": sum(len(c.labels) for c in outcome.labelled.get(s, []))}
              for s in SPLITS}
    reconcile(splits)
    reasons = Counter(r.reason for rs in input_rejects.values() for r in rs)
    reasons.update(r.reason for r in outcome.rejects)
    return {"splits": splits, "reject_reasons": dict(reasons),
            "producers": {k: dict(v) for k, v in outcome.producers.items()},
            "label_frequency": {s: label_frequency(outcome.labelled.get(s, [])) for s in SPLITS}}


def print_summary(counts: dict) -> None:
    """One line per split plus fallback use and run time."""
    for split, c in counts["splits"].items():
        print(f"label {split:5s}: " + ", ".join(f"{k}={v}" for k, v in c.items()))
    for kind, producers in counts["producers"].items():
        print(f"label {kind} producers: {producers}")
    print(f"label rejects: {counts['reject_reasons'] or 'none'}; {counts['seconds']} s")


def load_params(params_path: Path = Path("params.yaml")) -> LabelParams:
    """This stage's params from ``params_path`` (active profile applied).

    Raises:
        mimesis.params.ParamsError: a missing section, an unknown key or an invalid value.
    """
    return build(LabelParams, stage_params(STAGE, params_path), STAGE)


def main(argv: list[str] | None = None) -> None:
    configure_environment()
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--curate", type=Path, default=Path("data/curate"),
                        help="curate stage output folder")
    parser.add_argument("--out", type=Path, default=Path("data/label"))
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    args = parser.parse_args(argv)
    params = load_params(Path(args.params))
    run(args.curate, args.out, params)


if __name__ == "__main__":
    main()
