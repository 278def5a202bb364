"""How predictable is it, from what a user simulator can see, where real users stop?

Every agent reply of the curated train split is one position; the positive class is "the real
user sent nothing after this reply" (the reply is the conversation's last turn). A logistic
regression on surface features of the position (user turns so far, the reply's length, whether
it ends in or holds a question, a code block, an "anything else?" closing, the last user turn's
length and question mark, the opening's length, a thanks-like last user turn) is fitted on the
train split and scored on the test split: ROC AUC, and the F1 of "end" at a few thresholds
beside always-end. It bounds what a termination rule on such features can reach in the realism
table's termination F1 (docs/metrics.md).

It then scores the same model on the positions the realism evaluation takes
(:func:`~mimesis.eval.realism.protocol.conversation_items`: per test conversation, cut after
``--max-user-turns`` user turns as the label stage cuts them, the reply after which the real
user ended plus sampled others, ``--next-positions`` in all). For a target pair "false-end
rate ≤ ``--max-false-end``" (each false end is a lost turn) and "termination F1 ≥
``--target-f1``" it prints the true-end rate the pair needs at that false-end rate beside the
model's, and the ROC AUC an equal-variance binormal end score would need for it. A second model reads the words: TF-IDF
(1-2 grams) of the reply's last 1,500 characters, the last user turn and the opening, plus the
turn count (``--text``; about a minute). It also prints how often the run-time guard's
off-topic, restart and junk rules (``mimesis.simulator.guards``) flag *real* user turns of the
labelled splits (openings against their own goals): each guard's false-alarm rate.

Run after ``dvc repro label``: ``python scripts/where_users_stop.py`` (reads ``data/curate`` and
``data/label``; a few seconds).
"""

from __future__ import annotations

import argparse
import json
import random
import re
from pathlib import Path

import numpy as np
from scipy.stats import norm
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import f1_score, roc_auc_score, roc_curve

from mimesis.simulator.guards import content_words, goal_overlap, is_junk, repeats_earlier

_CLOSING = re.compile(r"anything else|let me know|hope (?:this|that) helps", re.IGNORECASE)
_THANKS = re.compile(r"\s*(?:thanks|thank you|ok|great)\b", re.IGNORECASE)


def _replies(turns: list[dict], max_user_turns: int, next_positions: int,
             rng: random.Random) -> list[int]:
    """Indices of the agent replies the realism evaluation would take from a conversation cut
    after ``max_user_turns`` user turns (as the label stage cuts them): its own rule,
    :func:`~mimesis.eval.realism.protocol.conversation_items`."""
    from types import SimpleNamespace

    from mimesis.eval.realism.protocol import NEXT, conversation_items

    replies = [i for i, t in enumerate(turns) if t["role"] == "assistant"]
    cut = turns[:2 * max_user_turns]
    conv = SimpleNamespace(id="", scenario=None, labels=[], ended=len(replies) <= max_user_turns,
                           turns=[SimpleNamespace(**t) for t in cut])
    return [it.turn_index - 1 for it in conversation_items(conv, 0, next_positions, rng)
            if it.kind == NEXT]


def positions(path: Path, max_user_turns: int = 0, next_positions: int = 0,
              seed: int = 0) -> tuple[np.ndarray, np.ndarray, list[tuple[str, str, str]]]:
    """Features (one row per agent reply), targets (the user stopped after it) and the texts
    the TF-IDF model reads (reply, last user turn, opening).

    With ``next_positions`` > 0, only the replies the realism evaluation would take
    (:func:`_replies`)."""
    rng = random.Random(seed)
    feats, ends, texts = [], [], []
    for line in path.open():
        turns = json.loads(line)["turns"]
        replies = ([i for i, t in enumerate(turns) if t["role"] == "assistant"]
                   if not next_positions else
                   _replies(turns, max_user_turns, next_positions, rng))
        for i in replies:
            reply, user = turns[i]["text"], turns[i - 1]["text"]
            k = min((i + 1) // 2, 6)
            feats.append([float(k == j) for j in range(1, 7)] + [
                np.log1p(len(reply)), reply.rstrip().endswith("?"), "?" in reply[-300:],
                "```" in reply, bool(_CLOSING.search(reply[-300:])), np.log1p(len(user)),
                user.rstrip().endswith("?"), np.log1p(len(turns[0]["text"])),
                bool(_THANKS.match(user))])
            ends.append(i == len(turns) - 1)
            texts.append((reply[-1500:], user[-600:], turns[0]["text"][:600]))
    return np.asarray(feats, float), np.asarray(ends), texts


def text_auc(tr: tuple, ev: tuple) -> float:
    """ROC AUC on ``ev`` of a logistic regression on TF-IDF of the three texts + turn counts."""
    from scipy import sparse
    from sklearn.feature_extraction.text import TfidfVectorizer

    vecs = [TfidfVectorizer(min_df=3, max_features=50000, ngram_range=(1, 2), sublinear_tf=True)
            for _ in range(3)]

    def matrix(part: tuple, fit: bool):
        x, _, texts = part
        cols = [(v.fit_transform if fit else v.transform)([t[k] for t in texts])
                for k, v in enumerate(vecs)]
        return sparse.hstack([*cols, sparse.csr_matrix(x[:, :6])]).tocsr()

    model = LogisticRegression(C=0.3, max_iter=3000).fit(matrix(tr, True), tr[1])
    return float(roc_auc_score(ev[1], model.predict_proba(matrix(ev, False))[:, 1]))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--curate", type=Path, default=Path("data/curate"))
    ap.add_argument("--label", type=Path, default=Path("data/label"))
    ap.add_argument("--max-user-turns", type=int, default=4, help="label.max_user_turns")
    ap.add_argument("--next-positions", type=int, default=2, help="evaluate_user.next_positions")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-false-end", type=float, default=0.10)
    ap.add_argument("--target-f1", type=float, default=0.5)
    ap.add_argument("--text", action="store_true", help="also the TF-IDF model")
    args = ap.parse_args(argv)
    train = positions(args.curate / "train.jsonl")
    (x_tr, y_tr, _), (x_te, y_te, _) = train, positions(args.curate / "test.jsonl")
    p = LogisticRegression(max_iter=2000).fit(x_tr, y_tr).predict_proba(x_te)[:, 1]
    print(f"positions: train {len(y_tr)} (end rate {y_tr.mean():.3f}), "
          f"test {len(y_te)} (end rate {y_te.mean():.3f})")
    print(f"test ROC AUC {roc_auc_score(y_te, p):.3f}; F1 of always-end "
          f"{f1_score(y_te, np.ones_like(y_te)):.3f}")
    for tau in (0.2, 0.25, 0.3, 0.4):
        print(f"  end when p >= {tau}: ends at {(p >= tau).mean():.3f} of positions, "
              f"F1 {f1_score(y_te, p >= tau):.3f}")
    ev = positions(args.curate / "test.jsonl", args.max_user_turns, args.next_positions,
                   args.seed)
    x_ev, y_ev, _ = ev
    q = LogisticRegression(max_iter=2000).fit(x_tr, y_tr).predict_proba(x_ev)[:, 1]
    prior = y_ev.mean()
    fpr, tpr, _ = roc_curve(y_ev, q)
    reach = float(np.interp(args.max_false_end, fpr, tpr))
    f1 = [2 * prior * t / (prior * t + prior + (1 - prior) * f) for f, t in zip(fpr, tpr)]
    ok = [v for v, f in zip(f1, fpr) if f <= args.max_false_end]
    # F1 = 2πt / (πt + π + (1-π)f) >= target at f = max_false_end, solved for t
    need = (args.target_f1 * (prior + (1 - prior) * args.max_false_end)
            / (prior * (2 - args.target_f1)))
    auc_need = norm.cdf((norm.ppf(need) - norm.ppf(args.max_false_end)) / np.sqrt(2))
    print(f"realism-evaluation positions ({args.next_positions} per conversation, cut at "
          f"{args.max_user_turns} user turns): {len(y_ev)}, end rate {prior:.3f}; ROC AUC "
          f"{roc_auc_score(y_ev, q):.3f}")
    print(f"  at false-end rate {args.max_false_end}: true-end rate {reach:.3f}, best F1 with "
          f"false ends <= {args.max_false_end}: {max(ok):.3f}; F1 >= {args.target_f1} needs a "
          f"true-end rate >= {need:.3f} there (binormal ROC AUC >= {auc_need:.3f})")
    if args.text:
        print(f"  TF-IDF of the reply, last user turn and opening: ROC AUC "
              f"{text_auc(train, ev):.3f}")
    for split in ("train", "val", "test"):
        convs = [json.loads(line) for line in (args.label / f"{split}.jsonl").open()]
        scored = [c for c in convs if content_words(c["scenario"]["goal"])]
        off = sum(goal_overlap(c["scenario"]["goal"], c["turns"][0]["text"]) == 0.0
                  for c in scored)
        users = [[t["text"] for t in c["turns"] if t["role"] == "user"] for c in convs]
        turns = sum(len(u) for u in users)
        restarts = sum(repeats_earlier(u[k], u[:k]) for u in users for k in range(1, len(u)))
        junk = sum(is_junk(t) for u in users for t in u)
        print(f"{split}: real openings flagged off-topic against their own goal {off}/"
              f"{len(scored)}; real user turns flagged restart {restarts}/{turns}, "
              f"junk {junk}/{turns}")


if __name__ == "__main__":
    main()
