"""Settings of ``mimesis serve`` (CLI options map one to one) and scenario files."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mimesis.io import read_jsonl
from mimesis.schemas import LabeledConversation, Scenario


@dataclass(frozen=True)
class ServeConfig:
    """Server limits and defaults.

    Attributes:
        model_name: Reported as ``model`` in responses and ``/v1/models``; requests may name any
            model (agent frameworks insist on one) — the server has only this one.
        max_turns: Most user turns per episode; the next call then ends it (``max_turns``).
        default_max_tokens: New tokens of a raw generation (reasoning + utterance) when the
            request sets neither ``max_tokens`` nor ``max_completion_tokens``.
        max_tokens_limit: Largest ``max_tokens`` a request may ask for (else 400).
        temperature / top_p: Defaults when the request does not set them.
        max_body_bytes: Largest request body (else 413).
        episode_ttl_s: Idle seconds before an episode is forgotten.
        max_episodes: Most episodes kept; the least recently used is dropped first.
        batch_window_ms: How long the batcher waits for concurrent requests.
        max_batch: Most requests per generation call.
        api_key: When set, every endpoint but ``/health`` needs ``Authorization: Bearer <key>``.
        default_goal: Goal of episodes whose first call names no scenario (``None``: 400).
    """

    model_name: str = "mimesis-user-simulator"
    max_turns: int = 16
    default_max_tokens: int = 96
    max_tokens_limit: int = 512
    temperature: float = 0.8
    top_p: float = 0.95
    max_body_bytes: int = 1_000_000
    episode_ttl_s: float = 3600.0
    max_episodes: int = 10_000
    batch_window_ms: float = 10.0
    max_batch: int = 16
    api_key: str | None = None
    default_goal: str | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.default_max_tokens <= self.max_tokens_limit:
            raise ValueError("need 1 ≤ default_max_tokens ≤ max_tokens_limit")
        if self.max_body_bytes < 1024:
            raise ValueError("max_body_bytes must be ≥ 1024")
        if self.max_turns < 1 or self.max_batch < 1 or self.max_episodes < 1:
            raise ValueError("max_turns, max_batch and max_episodes must be ≥ 1")
        if self.episode_ttl_s <= 0 or self.batch_window_ms < 0:
            raise ValueError("episode_ttl_s must be > 0 and batch_window_ms ≥ 0")
        if not (0 <= self.temperature <= 2 and 0 < self.top_p <= 1):
            raise ValueError("temperature must be in [0, 2] and top_p in (0, 1]")


def load_scenarios(path: Path) -> dict[str, Scenario]:
    """Scenarios of a label split file (``data/label/test.jsonl``) by conversation id.

    Raises:
        FileNotFoundError: no such file.
        pydantic.ValidationError: a line is not a :class:`LabeledConversation`.
    """
    return {conv.id: conv.scenario for conv in read_jsonl(Path(path), LabeledConversation)}
