"""Exact and near-duplicate detection on the user's side of conversations.

A user simulator learns from what users write, so duplicates are judged on user text only:
two shares of the same prompts with different (regenerated) answers are duplicates.

- Exact: identical sequence of user turns after case-folding and collapsing whitespace.
- Near: MinHash (Broder 1997) over word ``SHINGLE_WORDS``-gram shingles of the normalised user
  text, indexed by datasketch's MinHashLSH at ``threshold``; an LSH candidate counts only when
  its estimated Jaccard similarity is ≥ ``threshold`` too (LSH alone admits false positives).

Conversations are checked in order and the first one of a duplicate cluster is kept, so the
result is deterministic for a given input order, ``num_perm`` and ``seed``.
"""

from __future__ import annotations

import hashlib
import re

from datasketch import MinHash, MinHashLSH

from mimesis.schemas import Conversation

SHINGLE_WORDS = 3
_SPACE = re.compile(r"\s+")


def normalized_user_text(conv: Conversation) -> str:
    """User turns, case-folded, whitespace collapsed, joined by a record separator."""
    return "\x1e".join(_SPACE.sub(" ", t.text).strip().casefold() for _, t in conv.user_turns())


def shingles(text: str, k: int = SHINGLE_WORDS) -> set[bytes]:
    """Word k-grams of ``text`` as UTF-8 bytes; a text shorter than k words is one shingle.

    >>> sorted(shingles("a b c d", k=3))
    [b'a b c', b'b c d']
    """
    words = text.replace("\x1e", " ").split()
    if len(words) <= k:
        return {" ".join(words).encode()}
    return {" ".join(words[i : i + k]).encode() for i in range(len(words) - k + 1)}


class Deduplicator:
    """Stateful duplicate checker: call :meth:`check` on conversations in a fixed order.

    Args:
        threshold: Jaccard similarity in (0, 1] at or above which a conversation is a near
            duplicate of an earlier kept one.
        num_perm: MinHash permutations (more = more accurate estimates, slower).
        seed: MinHash permutation seed.
    """

    def __init__(self, threshold: float, num_perm: int, seed: int) -> None:
        self.threshold = threshold
        self._template = MinHash(num_perm=num_perm, seed=seed)
        self._lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
        self._exact: dict[str, str] = {}
        self._hashes: dict[str, MinHash] = {}

    def minhash(self, text: str) -> MinHash:
        """MinHash of ``text``'s shingles (permutations shared with every other call)."""
        m = self._template.copy()
        m.update_batch(sorted(shingles(text)))
        return m

    def check(self, conv: Conversation) -> tuple[str, str] | None:
        """Check ``conv`` against the conversations kept so far.

        Returns:
            ``(reason, detail)`` with reason ``exact_duplicate_of:<id>`` or
            ``near_duplicate_of:<id>`` naming the kept conversation; None when ``conv`` is new,
            in which case it is remembered as kept.
        """
        text = normalized_user_text(conv)
        key = hashlib.sha256(text.encode()).hexdigest()
        if key in self._exact:
            return f"exact_duplicate_of:{self._exact[key]}", "identical user turns"
        m = self.minhash(text)
        best: tuple[str, float] | None = None
        for cand in sorted(self._lsh.query(m)):
            sim = m.jaccard(self._hashes[cand])
            if sim >= self.threshold and (best is None or sim > best[1]):
                best = (cand, sim)
        if best is not None:
            detail = f"estimated user-text Jaccard {best[1]:.2f} >= {self.threshold}"
            return f"near_duplicate_of:{best[0]}", detail
        self._exact[key] = conv.id
        self._hashes[conv.id] = m
        self._lsh.insert(conv.id, m)
        return None
