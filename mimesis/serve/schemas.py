"""Wire format of ``mimesis serve``: OpenAI chat-completions requests and responses, plus errors.

The request is the OpenAI one, in one of two conventions (:data:`View`), chosen explicitly by
the path prefix ``/sim`` or the body field ``view``:

* ``agent`` (default; ``/v1/…``, ``/ep/{id}/v1/…``): seen from the *agent's* side
  (``assistant`` = the agent, ``user`` = the simulated user's earlier turns; ``system`` = the
  agent's own instructions, not read);
* ``simulator`` (``/sim/v1/…``, ``/sim/ep/{id}/v1/…``, or ``"view": "simulator"``): seen from
  the *simulator's* side, as tau2-bench's user simulator sends it: the ``system`` message is the
  scenario (the goal; text inside ``<scenario>…</scenario>`` when there is such a block),
  ``assistant`` = the simulated user's earlier turns, ``user`` = the agent's messages.

Optional extra body fields pick the scenario of an episode (send them with the OpenAI client's
``extra_body``; in the simulator view instead of a system message, not with one):

* ``scenario``: ``{"goal": str, "behaviors": ["B3", ...], "traits": ["terse", ...]}``;
* ``scenario_id``: the id of a conversation in the server's scenario file (``--scenarios``).

Both views read into the same episode state (:mod:`mimesis.serve.messages`), so the same episode
and seed give the same turn, with the same guarantees (reasoning never in a response, the end
signal below).

The response is a ``chat.completion`` whose single choice holds the simulated user's next message,
without its private reasoning, and an extra ``mimesis`` object (episode id, turn, end reason,
flags — never reasoning). The end of the conversation is ``finish_reason`` =
:data:`END_FINISH_REASON` with content :data:`~mimesis.format.END_SIGNAL`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from mimesis.behaviors.catalog import BEHAVIOR_IDS, TRAIT_IDS
from mimesis.format import END_SIGNAL
from mimesis.schemas import Scenario

END_FINISH_REASON = "end_conversation"
"""``finish_reason`` of the response that ends the conversation (content: ``END_SIGNAL``)."""
STOP_FINISH_REASON = "stop"
"""``finish_reason`` of every other response."""
END_CONTENT = END_SIGNAL
View = Literal["agent", "simulator"]
"""Request conventions: the agent's messages, or the simulator's (scenario as system message,
roles flipped)."""
MAX_SEED = 2**63 - 1
"""Largest ``seed`` (torch and vLLM take a signed 64-bit one; larger ones get a 400)."""


class ContentPart(BaseModel):
    """One part of a list-valued message content; only ``type: text`` parts are readable."""

    model_config = ConfigDict(extra="allow")
    type: str
    text: str | None = None


class ChatMessage(BaseModel):
    """One message of the agent's conversation (OpenAI shape; unknown fields are ignored).

    ``system``/``developer`` messages are the agent's own instructions and ``tool``/``function``
    messages are tool results: a real user sees neither, so the simulator does not either.
    """

    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None
    name: str | None = None


class ScenarioIn(BaseModel):
    """A scenario sent by the client (``extra_body={"scenario": {...}}``)."""

    model_config = ConfigDict(extra="forbid")
    goal: str = Field(min_length=1)  # length: ServeConfig.max_scenario_chars
    behaviors: list[str] = Field(default_factory=list)
    traits: list[str] = Field(default_factory=list)

    @field_validator("goal")
    @classmethod
    def _goal_not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("goal is blank")
        return v.strip()

    @field_validator("behaviors")
    @classmethod
    def _known_behaviors(cls, v: list[str]) -> list[str]:
        _no_repeats(v)
        unknown = sorted(set(v) - set(BEHAVIOR_IDS))
        if unknown:
            raise ValueError(f"unknown behaviour ids {unknown}; known: {list(BEHAVIOR_IDS)}")
        return v

    @field_validator("traits")
    @classmethod
    def _known_traits(cls, v: list[str]) -> list[str]:
        _no_repeats(v)
        unknown = sorted(set(v) - set(TRAIT_IDS))
        if unknown:
            raise ValueError(f"unknown traits {unknown}; known: {list(TRAIT_IDS)}")
        return v

    def to_scenario(self) -> Scenario:
        return Scenario(goal=self.goal, behaviors=self.behaviors, traits=self.traits,
                        annotator="client")


def _no_repeats(ids: list[str]) -> None:
    """Repeats are refused, so a list is never longer than the catalogue it names."""
    if len(set(ids)) != len(ids):
        raise ValueError(f"repeated ids in a list of {len(ids)}; send each id once")


class ChatCompletionRequest(BaseModel):
    """``POST .../v1/chat/completions`` body. Fields OpenAI clients add and we do not use are
    ignored; ``stream`` other than false and ``n`` other than 1 are rejected by the server."""

    model_config = ConfigDict(extra="ignore")
    model: str | None = None
    messages: list[ChatMessage]
    max_tokens: int | None = Field(default=None, ge=1, le=2**31 - 1)
    max_completion_tokens: int | None = Field(default=None, ge=1, le=2**31 - 1)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    n: int | None = Field(default=None, ge=0, le=128)
    stream: bool | None = None
    seed: int | None = Field(default=None, ge=0, le=MAX_SEED)
    scenario: ScenarioIn | None = None
    scenario_id: str | None = Field(default=None, min_length=1, max_length=256)
    view: View | None = None


class ResponseMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str


class Choice(BaseModel):
    index: int = 0
    message: ResponseMessage
    finish_reason: str
    logprobs: None = None


class Usage(BaseModel):
    """Token counts: prompt = the simulator's view, completion = its raw generations (reasoning
    included), summed over a resample when a guard asked for one."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class PromptFit(BaseModel):
    """How the simulator's view of this turn was fitted into the prompt budget."""

    dropped_messages: int = 0  # older messages of the view left out (whole exchanges)
    left_out_chars: int = 0  # characters left out of the middle of the agent's last message


class EpisodeInfo(BaseModel):
    """Public facts of the episode after this turn (never reasoning)."""

    episode_id: str | None
    turn: int
    ended: bool
    end_reason: str | None
    flags: list[str]
    prompt: PromptFit = Field(default_factory=PromptFit)


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: Usage
    mimesis: EpisodeInfo


class PrivateTurn(BaseModel):
    """One user turn the agent saw, with the reasoning it did not see."""

    index: int
    utterance: str
    reasoning: str
    flags: list[str]


class PrivateView(BaseModel):
    """``GET /ep/{id}/private``: what the simulated user thought (for CSD coaches and audits)."""

    episode_id: str
    scenario: Scenario
    turns: list[PrivateTurn]
    ended: bool
    end_reason: str | None
    end_reasoning: str
    flags: list[str]
    raw: list[str]
    created: float
    updated: float


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorBody(BaseModel):
    """OpenAI-style error body: ``{"error": {"message", "type", "param", "code"}}``."""

    error: ErrorDetail


class APIError(Exception):
    """An error answered as an OpenAI-style JSON body with ``status``.

    Args:
        status: HTTP status (4xx for the client's fault).
        message: Human-readable explanation.
        param: The request field at fault, dotted (``messages.2.content``), if any.
        code: Machine-readable code (``episode_not_found``, ``max_tokens_too_large``, …).
        type: OpenAI error type; ``invalid_request_error`` for 4xx, ``server_error`` for 5xx.
    """

    def __init__(self, status: int, message: str, param: str | None = None,
                 code: str | None = None, type: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = ErrorBody(error=ErrorDetail(
            message=message, param=param, code=code,
            type=type or ("invalid_request_error" if status < 500 else "server_error")))


class BodyTooLarge(APIError):
    """The request body exceeds the server's limit (HTTP 413)."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body larger than this server's limit of {limit} bytes "
                         "(mimesis serve --max-body-bytes)", param="body",
                         code="request_too_large")
