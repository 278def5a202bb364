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
        api_key: The agents' key: when set, every endpoint but ``/health`` and ``/private``
            needs ``Authorization: Bearer <key>``. Required off loopback.
        private_key: The only key that reads ``GET /ep/{id}/private`` (hidden goal, reasoning);
            must differ from ``api_key``. When any key is set and this one is not, ``/private``
            is closed (403); with no key at all (loopback only) everything is open.
        default_goal: Goal of episodes whose first call names no scenario (``None``: 400).
        max_episode_bytes: Most bytes of text one episode may hold (UTF-8 of the system
            prompt, history, reasoning, raw generations); a call on a fuller episode gets 400.
            One call can add at most two raw generations beyond it (a resample).
        max_total_bytes: Most bytes all episodes together may hold; beyond it the least
            recently used episodes are dropped (as beyond ``max_episodes``).
        max_messages: Most entries of ``messages`` in one request (else 400).
        max_message_chars: Most characters of one message's text (else 400).
        max_total_chars: Most characters of all messages' text together (else 400).
        max_scenario_chars: Most characters of a scenario goal (``scenario.goal``, or the
            system message in the simulator view; else 400).
        deadline_s: Seconds a request may take, queueing and generation included; then its
            work is cancelled and the client gets 504 ``deadline_exceeded``. A request body
            not received within it gets 408.

    The request limits are checked before any tokenization or model call; docs/
    serving_and_scaling.md has the figures the defaults were set from.
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
    private_key: str | None = None
    default_goal: str | None = None
    max_episode_bytes: int = 256 * 1024
    max_total_bytes: int = 256 * 1024 * 1024
    max_messages: int = 256
    max_message_chars: int = 32_000
    max_total_chars: int = 200_000
    max_scenario_chars: int = 4000
    deadline_s: float = 300.0

    def __post_init__(self) -> None:
        # An empty key is no key: "--api-key ''" must not look like auth.
        object.__setattr__(self, "api_key", self.api_key or None)
        object.__setattr__(self, "private_key", self.private_key or None)
        if self.private_key is not None and self.private_key == self.api_key:
            raise ValueError("private_key must differ from api_key: agents must not read "
                             "/private")
        if not 1024 <= self.max_episode_bytes <= self.max_total_bytes:
            raise ValueError("need 1024 ≤ max_episode_bytes ≤ max_total_bytes")
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
        if min(self.max_messages, self.max_message_chars, self.max_total_chars,
               self.max_scenario_chars) < 1:
            raise ValueError("max_messages, max_message_chars, max_total_chars and "
                             "max_scenario_chars must be ≥ 1")
        if not self.deadline_s > 0:
            raise ValueError("deadline_s must be > 0")


LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


def check_bind(host: str, config: ServeConfig) -> None:
    """Refuse to serve off loopback without an agent key.

    Raises:
        ValueError: ``host`` is not loopback and ``config.api_key`` is empty.
    """
    if host not in LOOPBACK and not config.api_key:
        raise ValueError(f"refusing to serve on {host} without an API key: anyone who can "
                         "reach it could drive episodes; pass --api-key (and --private-key "
                         "for /private), or bind 127.0.0.1")


def load_scenarios(path: Path) -> dict[str, Scenario]:
    """Scenarios of a label split file (``data/label/test.jsonl``) by conversation id.

    Raises:
        FileNotFoundError: no such file.
        pydantic.ValidationError: a line is not a :class:`LabeledConversation`.
    """
    return {conv.id: conv.scenario for conv in read_jsonl(Path(path), LabeledConversation)}
