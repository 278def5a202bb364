"""Server-side episodes: the simulator state of each conversation, kept by id, with TTL and LRU cap.

An episode holds the :class:`~mimesis.simulator.runtime.UserState` (history, private reasoning,
flags) of one conversation served under ``/ep/{episode_id}/``. Episodes idle for longer than
``ttl_s`` expire; when more than ``max_episodes`` exist, or all episodes together hold more than
``max_total_bytes`` of text (:func:`state_bytes`), the least recently used is dropped. A request
still running on a dropped episode finishes normally; its result is simply not kept.

The store is used from the server's event loop only (no thread locks); each episode has an
``asyncio.Lock`` so that two calls on the same episode run one after the other.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from mimesis.simulator.runtime import UserState

# \Z, not $: "$" also matches before a final newline, which let "abc\n" in.
EPISODE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}\Z")


def state_bytes(state: UserState) -> int:
    """Bytes of text an episode holds (UTF-8): system prompt, history, reasoning, raw outputs.

    Python's object overhead comes on top (about 50 bytes a string, a few hundred a turn).
    """
    texts = [state.system_prompt, state.end_reasoning, state.scenario.goal,
             *(t.text for t in state.history), *state.private, *state.raw]
    return sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)


@dataclass
class Episode:
    """One conversation's server-side record.

    Attributes:
        id: The client's episode id.
        state: Simulator state after the last turn.
        created / updated: Wall-clock times (s since the epoch).
        last_used: Store clock time of the last access (for TTL).
        replay_key / replay: Fingerprint of the last request and its response, returned again
            when a client retries the same request (idempotent retries).
        lock: Serialises calls on this episode.
    """

    id: str
    state: UserState
    created: float
    updated: float
    last_used: float
    replay_key: str | None = None
    replay: dict | None = None
    nbytes: int = 0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class EpisodeStore:
    """Episodes by id with expiry after ``ttl_s`` idle seconds and an LRU cap of ``max_episodes``.

    Args:
        ttl_s: Idle seconds before an episode expires (> 0).
        max_episodes: Most episodes kept (≥ 1); the least recently used goes first.
        clock: Monotonic clock in seconds (injectable for tests).
        max_total_bytes: Most bytes of text (:func:`state_bytes`) of all episodes together;
            ``None``: no limit.

    Raises:
        ValueError: non-positive ``ttl_s`` or ``max_episodes``.
    """

    def __init__(self, ttl_s: float, max_episodes: int,
                 clock: Callable[[], float] = time.monotonic,
                 max_total_bytes: int | None = None) -> None:
        if ttl_s <= 0 or max_episodes < 1:
            raise ValueError("ttl_s must be > 0 and max_episodes ≥ 1")
        self.ttl_s = ttl_s
        self.max_episodes = max_episodes
        self.clock = clock
        self.max_total_bytes = max_total_bytes
        self.total_bytes = 0
        self._episodes: OrderedDict[str, Episode] = OrderedDict()
        self.expired = 0
        self.evicted = 0

    def __len__(self) -> int:
        self._expire()
        return len(self._episodes)

    def get(self, episode_id: str) -> Episode | None:
        """The live episode ``episode_id`` (marked as used), or ``None`` if unknown or expired."""
        self._expire()
        episode = self._episodes.get(episode_id)
        if episode is not None:
            episode.last_used = self.clock()
            self._episodes.move_to_end(episode_id)
        return episode

    def create(self, episode_id: str, state: UserState) -> Episode:
        """Start episode ``episode_id`` with ``state``, evicting the least recently used ones
        beyond ``max_episodes``.

        Raises:
            KeyError: the episode already exists.
        """
        self._expire()
        if episode_id in self._episodes:
            raise KeyError(f"episode {episode_id!r} exists")
        now = time.time()
        episode = Episode(episode_id, state, created=now, updated=now, last_used=self.clock())
        self._episodes[episode_id] = episode
        self.update(episode, state)
        return episode

    def update(self, episode: Episode, state: UserState) -> None:
        """Store ``state`` as ``episode``'s, account its bytes, and evict the least recently
        used *other* episodes beyond ``max_episodes`` / ``max_total_bytes``."""
        episode.state = state
        if self._episodes.get(episode.id) is episode:
            self.total_bytes -= episode.nbytes
            episode.nbytes = state_bytes(state)
            self.total_bytes += episode.nbytes
        while len(self._episodes) > 1 and (len(self._episodes) > self.max_episodes or (
                self.max_total_bytes is not None and self.total_bytes > self.max_total_bytes)):
            oldest = next(iter(self._episodes))
            if oldest == episode.id:
                self._episodes.move_to_end(oldest)
                continue
            self._drop(oldest)
            self.evicted += 1

    def delete(self, episode_id: str) -> bool:
        """Forget ``episode_id``; True when it existed."""
        return self._drop(episode_id)

    def _drop(self, episode_id: str) -> bool:
        episode = self._episodes.pop(episode_id, None)
        if episode is not None:
            self.total_bytes -= episode.nbytes
        return episode is not None

    def _expire(self) -> None:
        # Oldest-used first: stop at the first live one.
        deadline = self.clock() - self.ttl_s
        while self._episodes:
            oldest = next(iter(self._episodes.values()))
            if oldest.last_used > deadline:
                break
            self._drop(oldest.id)
            self.expired += 1
