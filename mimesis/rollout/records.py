"""What a rollout takes in (:class:`ScenarioSpec`, :class:`RolloutParams`) and gives back
(:class:`Episode`, one record per episode)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mimesis.schemas import Scenario

Termination = Literal["answer", "finish", "user_end", "max_turns", "max_tokens"]
# The env's ``info["outcome"]`` at the end of an episode -> the record's termination reason.
# ``max_tokens`` is the engine's own (see ``mimesis.rollout.engine.enforce_token_budget``).
OUTCOME_TERMINATION: dict[str, Termination] = {
    "answered": "answer", "finished": "finish", "user_ended": "user_end", "truncated": "max_turns",
}


class ScenarioSpec(BaseModel):
    """One scenario: a registered environment and the reset arguments that pick its task.

    The same spec always gives the same task (``reset(seed=…)`` is deterministic), so the G
    episodes of a group play the same task. ``to_prompt``/``from_prompt`` carry a spec through a
    TRL dataset's ``prompt`` column (TRL hands ``rollout_func`` nothing but the prompts).

    Attributes:
        env: Registry name (``FunctionGym``, ``TravelGym``, …).
        seed: ``env.reset(seed=…)``.
        options: ``env.reset(options=…)``, e.g. ``{"index": 3}`` for a fixed task list.
        env_kwargs: Extra constructor arguments (``max_turns`` comes from the rollout params).
    """

    model_config = ConfigDict(frozen=True)

    env: str
    seed: int
    options: dict[str, Any] = Field(default_factory=dict)
    env_kwargs: dict[str, Any] = Field(default_factory=dict)

    def to_prompt(self) -> str:
        """Compact JSON of the spec (a dataset ``prompt`` value)."""
        return json.dumps(self.model_dump(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_prompt(cls, prompt: str) -> ScenarioSpec:
        """Inverse of :meth:`to_prompt`.

        Raises:
            TypeError: ``prompt`` is not a string (e.g. a chat prompt).
            pydantic.ValidationError: a string that is not a spec's JSON (a ``ValueError``).
        """
        if not isinstance(prompt, str):
            raise TypeError("rollout prompts must be ScenarioSpec JSON strings "
                             f"(ScenarioSpec.to_prompt()), got {type(prompt).__name__}")
        return cls.model_validate_json(prompt)


def _default_obs_roles() -> dict[str, str]:
    return {"user": "user", "tool": "tool", "env": "tool"}


@dataclass(frozen=True)
class RolloutParams:
    """Settings of the rollout engine.

    Attributes:
        group_size: Episodes per scenario (GRPO's G) for :meth:`RolloutEngine.run`.
        max_concurrent: Episodes in flight at once; a queue refills slots as episodes end.
            1 is the sequential baseline (one episode at a time, batch 1).
        max_turns: Agent messages per episode (passed to the environment).
        max_new_tokens: New tokens per agent turn.
        max_completion_tokens: Completion budget per episode (agent + injected tokens).
        obs_roles: Chat role of each ``info["obs_source"]`` in the agent's chat; env notes go in
            as ``tool`` messages (feedback of the system, not words of the user).
        system_prompt: Optional system message opening the agent's chat.
    """

    group_size: int = 4
    max_concurrent: int = 16
    max_turns: int = 8
    max_new_tokens: int = 96
    max_completion_tokens: int = 1024
    obs_roles: dict[str, str] = field(default_factory=_default_obs_roles)
    system_prompt: str | None = None

    def __post_init__(self) -> None:
        for name in ("group_size", "max_concurrent", "max_turns", "max_new_tokens",
                     "max_completion_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        missing = {"user", "tool", "env"} - set(self.obs_roles)
        if missing:
            raise ValueError(f"obs_roles lacks {sorted(missing)}")


class TurnRecord(BaseModel):
    """One agent turn and what came back.

    Attributes:
        agent_text: The agent's message as the env received it (special tokens removed).
        kind: Parsed action kind (``action``, ``search``, ``answer``, ``finish``); ``None`` when
            the token budget cut the turn before it reached the env.
        to_user: What was sent to the user (``None``: not an action to the user).
        obs: What the agent saw next (a tool result, an env note, or the user's reply).
        obs_source: ``env``, ``tool`` or ``user``.
        user_reasoning: The simulator's private reasoning behind its reply (or behind ending the
            conversation); ``None`` when the turn went to no user. Never shown to the agent.
        user_flags: Parser/guard flags of the user's reply.
    """

    agent_text: str
    kind: str | None = None
    to_user: str | None = None
    obs: str = ""
    obs_source: str = "env"
    user_reasoning: str | None = None
    user_flags: list[str] = Field(default_factory=list)


class Episode(BaseModel):
    """The record of one episode (one GRPO completion).

    Token fields (``P`` prompt tokens, ``C`` completion tokens; see :mod:`mimesis.models.engine.tokens`):

    Attributes:
        prompt_ids: ``[P]`` the agent's opening chat, template + generation prompt.
        completion_ids: ``[C]`` agent turns and injected env/tool/user tokens; ends with the last
            agent turn (EOS-terminated unless that turn hit ``max_new_tokens``) or, for
            ``max_tokens``, wherever the budget cut it. ``C <= max_completion_tokens``.
        env_mask: ``[C]`` 1 = sampled by the agent (in the loss), 0 = injected.
        logprobs: ``[C]`` the agent's sampling log-probability per token; 0.0 where mask is 0.
        turn_ids: ``[C]`` agent turn index per token (turn k = agent message k + its response).
        scenario_id: ``<env>:<task id>``.
        group_id: Index of the scenario in the rollout call; the G episodes of a scenario share it.
        index: Position of the episode in the call (the order of the returned list).
        reward: The env's reward (see ``enforce_token_budget`` for ``max_tokens``).
        termination: Why it ended.
        truncated: Ended by a limit (``max_turns`` or ``max_tokens``), not by a decision.
        messages: The agent's chat; ``prompt_ids + completion_ids`` tokenise its rendering.
        turns: One :class:`TurnRecord` per agent turn.
        user_end_reason: The simulator's ``end_reason`` when it ended the conversation.
        user_flags: Every simulator flag of the episode.
    """

    scenario_id: str
    group_id: int
    index: int
    env: str
    task_id: str
    spec: ScenarioSpec
    scenario: Scenario
    prompt_ids: list[int]
    completion_ids: list[int]
    env_mask: list[int]
    logprobs: list[float]
    turn_ids: list[int]
    reward: float
    termination: Termination
    truncated: bool
    messages: list[dict[str, str]]
    turns: list[TurnRecord]
    user_end_reason: str | None = None
    user_flags: list[str] = Field(default_factory=list)

    @property
    def agent_tokens(self) -> int:
        """Number of agent-sampled tokens."""
        return sum(self.env_mask)
