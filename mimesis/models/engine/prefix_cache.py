"""Keys/values of token sequences kept for reuse by later prompts that start the same way.

Two kinds of sharing, both by longest common token prefix:

- across turns: an episode's next prompt extends its previous prompt and sample;
- across episodes: the G episodes of a scenario share their whole opening prompt, and every
  simulator prompt shares the system-prompt template. :meth:`PrefixCache.shared_prefixes` finds
  the prefixes several prompts *of one call* share beyond what is cached, so the sampler can
  prefill each once before the batch (automatic prefix caching, as vLLM does) — otherwise a
  batched call would prefill them once per row while one-at-a-time calls reuse them from
  earlier episodes.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import numpy as np
import torch

KV = list[tuple[torch.Tensor, torch.Tensor]]  # per layer: keys, values, each [heads, seq, dim]


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    """Length of the longest common prefix of two id arrays."""
    m = min(len(a), len(b))
    diff = np.flatnonzero(a[:m] != b[:m])
    return int(diff[0]) if diff.size else m


class PrefixCache:
    """Least-recently-used store of ``(token ids, keys/values)``.

    Args:
        capacity: Entries kept (0 = store nothing).
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[int, tuple[np.ndarray, KV]] = OrderedDict()
        self._next = 0
        self.hits = self.reused_tokens = 0

    def __len__(self) -> int:
        return len(self._entries)

    def match(self, prompt: Sequence[int]) -> tuple[int | None, int]:
        """``(entry key, length)`` of the longest cached prefix of ``prompt`` (no side effect)."""
        ids = np.asarray(prompt, dtype=np.int64)
        best, best_n = None, 0
        for key, (cached, _) in self._entries.items():
            n = common_prefix(cached, ids)
            if n > best_n:
                best, best_n = key, n
        return best, best_n

    def take(self, prompts: Sequence[Sequence[int]]) -> list[tuple[int, KV | None]]:
        """Cached prefix of each prompt: ``(n, keys/values of its first n tokens)``.

        ``n`` is at most ``len(prompt) - 1``, so one token is left to compute the next-token
        logits. Entries wholly inside some prompt are dropped afterwards: the sequence stored
        after this call extends them.
        """
        out: list[tuple[int, KV | None]] = []
        superseded = set()
        for prompt in prompts:
            key, n = self.match(prompt)
            if key is None or min(n, len(prompt) - 1) <= 0:
                out.append((0, None))
                continue
            cached, kv = self._entries[key]
            if n == len(cached):
                superseded.add(key)
            n = min(n, len(prompt) - 1)
            self._entries.move_to_end(key)
            self.hits, self.reused_tokens = self.hits + 1, self.reused_tokens + n
            out.append((n, [(k[:, :n], v[:, :n]) for k, v in kv]))
        for key in superseded:
            del self._entries[key]
        return out

    def store(self, ids: Sequence[int], kv: KV) -> None:
        """Keep ``kv`` (``[heads, len(ids), dim]`` per layer); evicts the oldest beyond capacity."""
        if self.capacity == 0 or not ids:
            return
        self._entries[self._next] = (np.asarray(ids, dtype=np.int64), kv)
        self._next += 1
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    def shared_prefixes(self, prompts: Sequence[Sequence[int]], min_shared: int) -> list[list[int]]:
        """Prefixes that several ``prompts`` share, at least ``min_shared`` tokens beyond their
        cached prefix (one level of the prompts' prefix tree; call again after storing them).

        Prompts sorted by their ids form runs whose neighbours share ≥ that much; a run's prefix
        is the shortest neighbour overlap inside it, capped one token short of every prompt.
        """
        if self.capacity == 0 or len(prompts) < 2:
            return []
        ids = sorted(tuple(p) for p in prompts)  # duplicates kept: G copies of one prompt share
        arrays = [np.asarray(p, dtype=np.int64) for p in ids]
        cached = [self.match(p)[1] for p in ids]
        prefixes, run_start, run_shared = [], None, 0
        for j in range(1, len(arrays) + 1):
            joined, shared = False, 0
            if j < len(arrays):
                shared = min(common_prefix(arrays[j - 1], arrays[j]),
                             len(arrays[j - 1]) - 1, len(arrays[j]) - 1)
                joined = shared >= max(cached[j - 1], cached[j]) + min_shared
            if joined and run_start is None:
                run_start, run_shared = j - 1, shared
            elif joined:
                run_shared = min(run_shared, shared)
            elif run_start is not None:
                prefixes.append(list(ids[run_start][:run_shared]))
                run_start = None
        return prefixes
