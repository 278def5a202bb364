"""Goal adherence and opening quality of a user simulator, judge-free (docs/metrics.md).

A simulator that ignores its scenario can still look human to a C2ST. Two checks:

* :func:`goal_identifiability` — can the scenario goal be recovered from what the simulator
  wrote? The true goal is ranked among distractor goals of *other* held-out conversations by
  cosine similarity of sentence embeddings; top-1 accuracy and mean reciprocal rank (MRR).
  Real users' turns against their own goals are the ceiling (the goals were written from them).
* :func:`opening_quality` — rates of bad opening turns: role-flipped (the user talks as the
  assistant), goal-dumping (the whole goal at once), junk (tags, repeated tokens) and empty
  (nothing, or an immediate end). Role flips and goal dumps are the runtime guards' own rules
  (:mod:`mimesis.simulator.guards`), so the table counts what the runtime would flag.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from mimesis.simulator.guards import GuardParams, goal_overlap, is_assistant_like, is_junk

Embed = Callable[[list[str]], np.ndarray]

def opening_quality(openings: Sequence[tuple[str, str, bool]],
                    goal_dump_threshold: float = GuardParams().goal_dump_threshold
                    ) -> dict[str, float]:
    """Rates of bad opening turns.

    Args:
        openings: ``(goal, utterance, ended)`` per conversation's first turn.
        goal_dump_threshold: A spoken opening dumps the goal when
            :func:`~mimesis.simulator.guards.goal_overlap` (share of the goal's content words)
            is at least this (the runtime guard's setting).

    Returns:
        ``n`` and, as shares of all openings (0..1): ``empty`` (ended or blank), and of the
        spoken ones counted over all openings: ``role_flipped``
        (:func:`~mimesis.simulator.guards.is_assistant_like`), ``goal_dump``, ``junk``
        (:func:`is_junk`); ``bad`` = share with any of the four.

    Raises:
        ValueError: ``openings`` is empty.

    Source: role adherence and intent decomposition of UserLM (arXiv 2510.06552) as the runtime
    guards implement them; junk and empty: ours.
    """
    if not openings:
        raise ValueError("opening_quality needs at least one opening")
    flags = []
    for goal, text, ended in openings:
        spoken = not ended and bool(text.strip())
        flags.append({"empty": not spoken,
                      "role_flipped": spoken and is_assistant_like(text),
                      "goal_dump": spoken and goal_overlap(goal, text) >= goal_dump_threshold,
                      "junk": spoken and is_junk(text)})
    n = len(flags)
    out = {k: sum(f[k] for f in flags) / n for k in ("empty", "role_flipped", "goal_dump",
                                                     "junk")}
    out["bad"] = sum(any(f.values()) for f in flags) / n
    out["n"] = float(n)
    return out


def goal_candidates(goals: Mapping[str, str], distractors: int,
                    seed: int) -> dict[str, list[str]]:
    """For every conversation id, ``[own goal, *distractor goals]``: up to ``distractors``
    distinct goal texts of other conversations, drawn with a seed per conversation id (the same
    candidates for every row of the table)."""
    out = {}
    for cid, goal in goals.items():
        others = sorted({g for c, g in goals.items() if c != cid and g != goal})
        random.Random(f"{seed}:{cid}").shuffle(others)
        out[cid] = [goal, *others[:distractors]]
    return out


def goal_identifiability(turns: Mapping[str, Sequence[str]], candidates: Mapping[str, list[str]],
                         embed: Embed) -> dict[str, float]:
    """Rank each conversation's true goal among its candidates by embedding similarity to the
    writer's turns in that conversation.

    Args:
        turns: Conversation id -> the writer's spoken turns there (ids without turns are left
            out: the turn-loss rate counts them).
        candidates: Conversation id -> ``[true goal, *distractors]`` (:func:`goal_candidates`).
        embed: ``texts -> (n, d)`` unit-norm sentence embeddings.

    Returns:
        ``top1`` (share ranked first), ``mrr`` (mean of 1/rank), ``chance_top1`` (mean of
        1/#candidates), ``candidates`` (mean count) and ``n`` (conversations). The writer's
        turns are embedded one by one and averaged (then renormalised); a tie with a distractor
        counts against the true goal. Empty dict when no conversation has turns.

    Source: ours (docs/metrics.md, goal identifiability); MRR as in Voorhees (1999), TREC-8 QA.
    """
    ids = [c for c in turns if turns[c] and len(candidates.get(c, ())) >= 2]
    if not ids:
        return {}
    texts = [t for c in ids for t in turns[c]]
    goals = sorted({g for c in ids for g in candidates[c]})
    t_emb, g_emb = embed(texts), embed(goals)
    goal_row = {g: i for i, g in enumerate(goals)}
    ranks, chance, start = [], [], 0
    for c in ids:
        vec = t_emb[start:start + len(turns[c])].mean(axis=0)
        start += len(turns[c])
        vec = vec / max(float(np.linalg.norm(vec)), 1e-12)
        sims = g_emb[[goal_row[g] for g in candidates[c]]] @ vec
        ranks.append(1 + int(np.sum(sims[1:] >= sims[0])))
        chance.append(1.0 / len(candidates[c]))
    r = np.asarray(ranks, dtype=np.float64)
    return {"top1": float(np.mean(r == 1)), "mrr": float(np.mean(1.0 / r)),
            "chance_top1": float(np.mean(chance)),
            "candidates": float(np.mean([len(candidates[c]) for c in ids])), "n": float(len(ids))}
