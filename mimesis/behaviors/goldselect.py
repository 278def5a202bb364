"""Choose the real user turns of the hand-labelled set (``mimesis/behaviors/data/gold.jsonl``)
and print them for reading; provenance of how the set was drawn.

Two draws from the curated *train* split, never the same conversation twice:

- ``random``: user turns drawn uniformly (seeded) among the first ``MAX_TURN`` user turns of every
  conversation;
- ``enriched``: later user turns (never the opening turn) whose user words match
  ``ENRICH_CUES``, a keyword list written for this selection (not the project's rule lexicon),
  aimed at the rare behaviours (corrections, complaints, switches, refusals, added constraints).
  This biases the enriched draw toward explicitly worded behaviours: silent topic switches or
  unworded hidden criteria are under-represented there, which is why the random draw exists.

Run: ``python -m mimesis.behaviors.goldselect --curate data/curate --out /tmp/gold_candidates``
writes ``candidates.jsonl`` (full records) and ``batch_NN.txt`` (clipped views, 25 turns each).
"""

from __future__ import annotations

import argparse
import random
import re
from pathlib import Path

from mimesis.io import read_jsonl, write_jsonl

MAX_TURN = 8  # user turns considered per conversation (the label stage reads the first 4-12)
TURN_CHARS, CONTEXT_CHARS = 6000, 3000  # stored clip of the turn and of each context turn
ENRICH_CUES = re.compile(
    r"(?i)\b(?:actually|instead|also add|and also|one more thing|oh and|must|without|"
    r"don'?t (?:use|want|include)|no,|not what|wrong|incorrect|you said|i said|i told you|"
    r"as i said|i asked|still|again|why (?:did|do|are|is) you|stupid|useless|idiot|"
    r"never ?mind|forget (?:it|that|about)|hurry|quick(?:ly)?|asap|urgent|just (?:do|give|write|"
    r"pick)|whatever|can'?t you|you (?:didn'?t|did not|forgot|missed|keep)|change (?:it|that|the)|"
    r"different (?:question|topic)|anyway|new (?:question|topic|task)|but (?:i|you)|"
    r"only|shorter|longer|too (?:long|short|formal|casual))\b"
)
# Batch 2 (seed 13): cues for the behaviours batch 1 found rare (B3-B11, B13), not the explicit
# revisions batch 1's cues favoured (B2). A later user turn qualifies when its first 400
# characters match RARE_CUES, or when the agent reply before it refused/declared something
# impossible (B4) or ended on a question to the user (B3).
RARE_CUES = re.compile(
    r"(?i)\b(?:you said|you told|you just|you were|you are wrong|that'?s (?:wrong|not|incorrect)|"
    r"not what i|i (?:said|told|asked|already)|again|still (?:not|doesn'?t|wrong|the same)|"
    r"forget (?:it|that|about)|never ?mind|nevermind|skip (?:it|that)|let'?s (?:move|change|go)|"
    r"moving on|different (?:question|topic)|new (?:question|topic|task)|unrelated|by the way|"
    r"btw|anyway|stupid|useless|dumb|idiot|terrible|lazy|seriously|come on|ugh|wtf|"
    r"just (?:do|give|write|pick|answer|tell)|whatever|i don'?t care|doesn'?t matter|"
    r"why (?:did|do|can'?t|won'?t) you|can'?t you|you (?:didn'?t|forgot|missed|keep|failed|"
    r"misunderstood)|without (?:using|any)|no (?:apps?|libraries|internet|code)|but i (?:want|"
    r"need|said)|i (?:know|believe|read|heard) (?:that|it)|it is known|pretend|you can|"
    r"you have access|you must|hurry|asap|urgent|quick)\b|\?{2,}|!{2,}"
)
AGENT_REFUSES = re.compile(
    r"(?i)\b(?:i'?m sorry,? but|i (?:cannot|can'?t|am unable|am not able)|as an ai|"
    r"not (?:possible|able to)|i don'?t have (?:access|the ability)|unable to (?:provide|browse|"
    r"access))"
)


def rare_hit(turns: list[dict], i: int) -> bool:
    """Batch 2's enrichment test for user turn ``i`` (never the opening turn)."""
    if i == 0 or turns[i]["role"] != "user":
        return False
    agent = turns[i - 1]["text"]
    return bool(RARE_CUES.search(turns[i]["text"][:400]) or AGENT_REFUSES.search(agent[:600])
                or agent.rstrip().endswith("?"))


def _view(turns: list[dict], index: int) -> dict:
    prev_agent = turns[index - 1]["text"] if index >= 1 else ""
    prev_user = turns[index - 2]["text"] if index >= 2 else ""
    return {"text": turns[index]["text"][:TURN_CHARS], "prev_user": prev_user[:CONTEXT_CHARS],
            "prev_agent": prev_agent[:CONTEXT_CHARS], "turn_index": index,
            "user_turn_number": index // 2 + 1, "text_chars": len(turns[index]["text"])}


def select(curate_dir: Path, n_random: int, n_enriched: int, seed: int,
           exclude: frozenset[str] = frozenset(), cues: str = "general") -> list[dict]:
    """The chosen turns, each a dict with ``id``, ``draw`` and its :func:`_view` fields.

    Raises:
        ValueError: the train split has too few conversations or cue matches for the request.
    """
    convs = [c for c in read_jsonl(curate_dir / "train.jsonl")
             if c["turns"] and c["turns"][0]["role"] == "user" and c["id"] not in exclude]
    rng = random.Random(seed)
    order = list(range(len(convs)))
    rng.shuffle(order)
    if len(order) < n_random + n_enriched:
        raise ValueError(f"{len(order)} train conversations < {n_random + n_enriched} requested")
    chosen, used = [], set()
    for k in order:
        if len(chosen) == n_random:
            break
        turns = convs[k]["turns"]
        users = [i for i, t in enumerate(turns) if t["role"] == "user"][:MAX_TURN]
        chosen.append({"id": convs[k]["id"], "draw": "random", **_view(turns, rng.choice(users))})
        used.add(k)
    for k in order:
        if len(chosen) == n_random + n_enriched:
            break
        if k in used:
            continue
        turns = convs[k]["turns"]
        if cues == "rare":
            hits = [i for i in range(1, min(len(turns), 2 * MAX_TURN)) if rare_hit(turns, i)]
        else:
            hits = [i for i, t in enumerate(turns) if t["role"] == "user" and i > 0
                    and i < 2 * MAX_TURN and ENRICH_CUES.search(t["text"][:400])]
        if hits:
            chosen.append({"id": convs[k]["id"], "draw": "enriched",
                           **_view(turns, rng.choice(hits))})
    if len(chosen) < n_random + n_enriched:
        raise ValueError(f"only {len(chosen) - n_random} cue matches for {n_enriched} requested")
    rng.shuffle(chosen)  # the labeller reads both draws mixed, not knowing which is which
    return chosen


def _clip(text: str, head: int, tail: int) -> str:
    return text if len(text) <= head + tail else f"{text[:head]} [...] {text[-tail:]}"


def render(rows: list[dict], start: int) -> str:
    """Plain-text views of ``rows`` (numbered from ``start``) for reading."""
    out = []
    for n, r in enumerate(rows, start):
        out.append(f"=== #{n} id={r['id']} user_turn={r['user_turn_number']} "
                   f"chars={r['text_chars']}\n--- prev user: {_clip(r['prev_user'], 300, 100)}\n"
                   f"--- prev agent: {_clip(r['prev_agent'], 450, 250)}\n"
                   f"--- USER: {_clip(r['text'], 700, 250)}\n")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    from mimesis.runtime_env import configure_environment

    configure_environment()
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--curate", type=Path, default=Path("data/curate"))
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--n-random", type=int, default=170)
    parser.add_argument("--n-enriched", type=int, default=130)
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--exclude", type=Path, default=None,
                        help="a labelled set whose conversations are not drawn again")
    parser.add_argument("--cues", choices=("general", "rare"), default="general")
    args = parser.parse_args(argv)
    exclude = frozenset(r["id"] for r in read_jsonl(args.exclude)) if args.exclude else frozenset()
    rows = select(args.curate, args.n_random, args.n_enriched, args.seed, exclude, args.cues)
    write_jsonl(args.out / "candidates.jsonl", rows)
    for b in range(0, len(rows), 25):
        (args.out / f"batch_{b // 25:02d}.txt").write_text(render(rows[b:b + 25], b))
    print(f"{len(rows)} turns -> {args.out}")


if __name__ == "__main__":
    main()
