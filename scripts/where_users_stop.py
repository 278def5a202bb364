"""How predictable is it, from what a user simulator can see, where real users stop?

Every agent reply of the curated train split is one position; the positive class is "the real
user sent nothing after this reply" (the reply is the conversation's last turn). A logistic
regression on surface features of the position (user turns so far, the reply's length, whether
it ends in or holds a question, a code block, an "anything else?" closing, the last user turn's
length and question mark, the opening's length, a thanks-like last user turn) is fitted on the
train split and scored on the test split: ROC AUC, and the F1 of "end" at a few thresholds
beside always-end. It bounds what a termination rule on such features can reach in the realism
table's termination F1 (docs/metrics.md). It also prints how often the run-time guard's
off-topic, restart and junk rules (``mimesis.simulator.guards``) flag *real* user turns of the
labelled splits (openings against their own goals): each guard's false-alarm rate.

Run after ``dvc repro label``: ``python scripts/where_users_stop.py`` (reads ``data/curate`` and
``data/label``; a few seconds).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import f1_score, roc_auc_score

from mimesis.simulator.guards import content_words, goal_overlap, is_junk, repeats_earlier

_CLOSING = re.compile(r"anything else|let me know|hope (?:this|that) helps", re.IGNORECASE)
_THANKS = re.compile(r"\s*(?:thanks|thank you|ok|great)\b", re.IGNORECASE)


def positions(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Features (one row per agent reply) and targets (the user stopped after it)."""
    feats, ends = [], []
    for line in path.open():
        turns = json.loads(line)["turns"]
        for i, turn in enumerate(turns):
            if turn["role"] != "assistant":
                continue
            reply, user = turn["text"], turns[i - 1]["text"]
            k = min((i + 1) // 2, 6)
            feats.append([float(k == j) for j in range(1, 7)] + [
                np.log1p(len(reply)), reply.rstrip().endswith("?"), "?" in reply[-300:],
                "```" in reply, bool(_CLOSING.search(reply[-300:])), np.log1p(len(user)),
                user.rstrip().endswith("?"), np.log1p(len(turns[0]["text"])),
                bool(_THANKS.match(user))])
            ends.append(i == len(turns) - 1)
    return np.asarray(feats, float), np.asarray(ends)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--curate", type=Path, default=Path("data/curate"))
    ap.add_argument("--label", type=Path, default=Path("data/label"))
    args = ap.parse_args(argv)
    x_tr, y_tr = positions(args.curate / "train.jsonl")
    x_te, y_te = positions(args.curate / "test.jsonl")
    p = LogisticRegression(max_iter=2000).fit(x_tr, y_tr).predict_proba(x_te)[:, 1]
    print(f"positions: train {len(y_tr)} (end rate {y_tr.mean():.3f}), "
          f"test {len(y_te)} (end rate {y_te.mean():.3f})")
    print(f"test ROC AUC {roc_auc_score(y_te, p):.3f}; F1 of always-end "
          f"{f1_score(y_te, np.ones_like(y_te)):.3f}")
    for tau in (0.2, 0.25, 0.3, 0.4):
        print(f"  end when p >= {tau}: ends at {(p >= tau).mean():.3f} of positions, "
              f"F1 {f1_score(y_te, p >= tau):.3f}")
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
