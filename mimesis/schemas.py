"""Record schemas shared by all stages (pydantic v2).

Files between stages are JSON Lines; one line = one record of these models.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator

Role = Literal["user", "assistant"]
# A chat as chat templates and chat APIs take it: [{"role": ..., "content": ...}, ...].
Messages = list[dict[str, str]]
Split = Literal["train", "val", "test"]


class Turn(BaseModel):
    """One message. ``role`` is ``user`` (the human) or ``assistant`` (the LLM being talked to)."""

    role: Role
    text: str

    @field_validator("text")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("empty turn text")
        return v


class Conversation(BaseModel):
    """A real human–LLM conversation after normalisation.

    Attributes:
        id: Stable conversation id (ShareGPT id without its ``_k`` chunk suffix).
        source: Dataset name, e.g. ``sharegpt``.
        source_ids: Original record ids joined into this conversation (``abc_0``, ``abc_1``, …).
        turns: Alternating turns, user first.
        split: ``train`` / ``val`` / ``test`` once split, else ``None``.
        language: ISO code from the language detector.
    """

    id: str
    source: str = "sharegpt"
    source_ids: list[str] = Field(default_factory=list)
    turns: list[Turn]
    split: Split | None = None
    language: str | None = None

    def user_turns(self) -> list[tuple[int, Turn]]:
        return [(i, t) for i, t in enumerate(self.turns) if t.role == "user"]


class Reject(BaseModel):
    """An input record that did not reach a stage's output, and why."""

    id: str
    stage: str
    reason: str
    detail: str = ""


class TurnLabel(BaseModel):
    """Labels and private reasoning of one user turn.

    Attributes:
        turn_index: Index of the user turn in ``Conversation.turns``.
        behaviors: Behaviour ids ``B1``..``B13`` (multi-label; usually empty).
        traits: Plain style traits: ``terse``, ``typo_rich``, ``pasted_content``, ``thanks_and_leave``.
        sources: For every label in ``behaviors`` and ``traits``, the producers that assigned it
            (``rules`` and/or ``annotator:<backend>:<model>``).
        reasoning: First-person, 1–2 sentence private thought before writing the turn.
        reasoning_annotator: Producer of ``reasoning``.
    """

    turn_index: int
    behaviors: list[str] = Field(default_factory=list)
    traits: list[str] = Field(default_factory=list)
    sources: dict[str, list[str]] = Field(default_factory=dict)
    reasoning: str
    reasoning_annotator: str


class Scenario(BaseModel):
    """What the user simulator is told: the user's goal (never the first message verbatim) and the
    behaviour directives seen in the conversation."""

    goal: str
    behaviors: list[str] = Field(default_factory=list)
    traits: list[str] = Field(default_factory=list)
    annotator: str
    # The goal's instructions to the simulator (how to play the user, never a fact the user
    # states), for the directive-copy guard; envs fill it (``UserEnv.user_directives``). Left
    # out of the JSON when empty, so label data and its hashes do not change.
    directives: list[str] = Field(default_factory=list, exclude_if=lambda v: not v)


class LabeledConversation(Conversation):
    """A conversation with its scenario, per-user-turn labels and the end-of-conversation reasoning.

    ``ended`` is True when the real user stopped after the last assistant turn (the conversation
    was not cut by a length cap), so the end-of-conversation signal is a real target.
    """

    scenario: Scenario
    labels: list[TurnLabel]
    end_reasoning: str
    end_reasoning_annotator: str
    ended: bool = True
