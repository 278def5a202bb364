"""Deterministic train/val/test split by conversation id.

Conversations are ranked by ``sha256(f"{seed}:{id}")`` and cut at the requested fractions: the
first ``round(n * test)`` ids go to test, the next ``round(n * val)`` to val, the rest to train
(each at least 1 when n ≥ 3). The rank of an id never depends on the other ids, so adding
conversations only moves the few ids that sit next to a cut point — unlike a shuffle, which
reassigns everything — while split sizes still match the fractions exactly.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

SPLITS = ("train", "val", "test")


def id_rank_key(conv_id: str, seed: int) -> str:
    """Hex sha256 of ``"<seed>:<id>"``: the id's position in the split order."""
    return hashlib.sha256(f"{seed}:{conv_id}".encode()).hexdigest()


def split_sizes(n: int, val_fraction: float, test_fraction: float) -> dict[str, int]:
    """Sizes of each split for ``n`` conversations.

    Raises:
        ValueError: fewer than 3 conversations, or no room left for train (every split must be
            non-empty).

    >>> split_sizes(100, 0.1, 0.2)
    {'train': 70, 'val': 10, 'test': 20}
    """
    if n < 3:
        raise ValueError(f"need at least 3 conversations to fill train/val/test, got {n}")
    test = max(1, round(n * test_fraction))
    val = max(1, round(n * val_fraction))
    if n - val - test < 1:
        raise ValueError(f"val {val_fraction} + test {test_fraction} leave no train data at n={n}")
    return {"train": n - val - test, "val": val, "test": test}


def assign_splits(
    ids: Iterable[str], val_fraction: float, test_fraction: float, seed: int
) -> dict[str, str]:
    """Map each conversation id to ``train`` / ``val`` / ``test``.

    Args:
        ids: Unique conversation ids (order does not matter).
        val_fraction: Share of conversations in val, in (0, 1).
        test_fraction: Share of conversations in test, in (0, 1).
        seed: Changes the order, hence the assignment.

    Raises:
        ValueError: duplicate ids or fewer than 3 ids.
    """
    ids = list(ids)
    if len(set(ids)) != len(ids):
        raise ValueError("conversation ids must be unique before splitting")
    sizes = split_sizes(len(ids), val_fraction, test_fraction)
    ranked = sorted(ids, key=lambda i: id_rank_key(i, seed))
    test_end = sizes["test"]
    val_end = test_end + sizes["val"]
    return {
        i: ("test" if r < test_end else "val" if r < val_end else "train")
        for r, i in enumerate(ranked)
    }
