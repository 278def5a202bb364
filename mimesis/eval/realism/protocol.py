"""What the simulators are asked to write in the offline realism evaluation (docs/metrics.md).

Held-out real conversations are split into two halves *by conversation*. In each conversation the
simulator writes (a) the first user turn from the scenario alone and (b) the next user turn at a
few positions right after an agent reply, given the real history. The position after the final
agent reply is always included when the real user ended there (``conv.ended``), so termination
has real positives. Every position keeps what the real user wrote there (or that they ended) and
the behaviours their turn was labelled with, for comparison and slicing.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mimesis.schemas import LabeledConversation, Messages, Scenario, Turn
from mimesis.text import clip

FIRST, NEXT = "first", "next"


@dataclass(frozen=True)
class EvalItem:
    """One position at which a simulator writes a user turn.

    Attributes:
        conv_id: Conversation id (the C2ST group).
        half: 0 or 1, the conversation's half (two-sample metrics compare across halves).
        kind: ``first`` (scenario only) or ``next`` (after an agent reply, real history given).
        turn_index: Index the user turn would have in ``conv.turns`` (= ``len(history)``).
        scenario: The conversation's scenario (goal, behaviours, traits).
        history: Real turns before the position, unclipped.
        real_text: What the real user wrote here; ``None`` when the real user ended here.
        real_labels: Behaviour ids of the real turn's stored label (empty when it ended here).
        history_reasoning: The labelled private reasoning of each user turn in ``history``, in
            order ("" where the label has none). The simulator's view shows its own earlier
            turns with their reasoning, as in training and at run time; without labels it would
            show ``<think></think>`` on every earlier turn, a view it never trained on (measured:
            16 of 58 next turns of the CPU default's simulator then came out with empty
            reasoning).
    """

    conv_id: str
    half: int
    kind: str
    turn_index: int
    scenario: Scenario
    history: tuple[Turn, ...]
    real_text: str | None
    real_labels: tuple[str, ...]
    history_reasoning: tuple[str, ...] = ()

    @property
    def real_ended(self) -> bool:
        return self.real_text is None


def well_formed(conv: LabeledConversation) -> str | None:
    """Why ``conv`` cannot be evaluated (turns not alternating user-first), or ``None``."""
    for i, turn in enumerate(conv.turns):
        if turn.role != ("user" if i % 2 == 0 else "assistant"):
            return f"turn {i} has role {turn.role}; turns must alternate, user first"
    return None


def select_halves(convs: Sequence[LabeledConversation], max_conversations: int,
                  seed: int) -> list[tuple[LabeledConversation, int]]:
    """Sample up to ``max_conversations`` (0 = all) and assign halves 0/1 alternately in a seeded
    shuffle, so the halves differ in size by at most one."""
    pool = sorted(convs, key=lambda c: c.id)
    random.Random(seed).shuffle(pool)
    if max_conversations > 0:
        pool = pool[:max_conversations]
    return [(conv, rank % 2) for rank, conv in enumerate(pool)]


def conversation_items(conv: LabeledConversation, half: int, next_positions: int,
                       rng: random.Random) -> list[EvalItem]:
    """The first-turn item and up to ``next_positions`` next-turn items of one conversation.

    Next-turn positions are the indices right after agent replies. The one after the final reply
    is always taken when the real user ended there; a final reply after which the conversation was
    cut (``ended`` False) has no known answer and is never taken. The rest are sampled.
    """
    labels = {lab.turn_index: tuple(lab.behaviors) for lab in conv.labels}
    reasoning = {lab.turn_index: lab.reasoning for lab in conv.labels}

    def item(kind: str, index: int) -> EvalItem:
        real = conv.turns[index].text if index < len(conv.turns) else None
        earlier = tuple(reasoning.get(i, "") for i, t in enumerate(conv.turns[:index])
                        if t.role == "user")
        return EvalItem(conv.id, half, kind, index, conv.scenario, tuple(conv.turns[:index]),
                        real, labels.get(index, ()) if real is not None else (), earlier)

    after_agent = [i + 1 for i, t in enumerate(conv.turns) if t.role == "assistant"]
    inner = [p for p in after_agent if p < len(conv.turns)]
    final = [p for p in after_agent if p == len(conv.turns)] if conv.ended else []
    chosen = final[:next_positions]
    chosen += rng.sample(inner, min(len(inner), next_positions - len(chosen)))
    return [item(FIRST, 0)] + [item(NEXT, p) for p in sorted(chosen)]


def build_items(convs: Sequence[LabeledConversation], max_conversations: int,
                next_positions: int, seed: int) -> tuple[list[EvalItem], dict[str, str]]:
    """Evaluation items of the sampled conversations, and the ids skipped with their reason.

    Raises:
        ValueError: ``next_positions`` < 1 (termination needs next-turn positions).
    """
    if next_positions < 1:
        raise ValueError("next_positions must be >= 1")
    rng = random.Random(seed)
    items: list[EvalItem] = []
    skipped: dict[str, str] = {}
    for conv, half in select_halves(convs, max_conversations, seed):
        reason = well_formed(conv)
        if reason:
            skipped[conv.id] = reason
            continue
        items += conversation_items(conv, half, next_positions, rng)
    return items, skipped


def clip_history(history: Sequence[Turn], max_user_chars: int,
                 max_agent_chars: int) -> list[Turn]:
    """Turns with user/agent texts cut to the given sizes (0 = no cut); long agent replies are what
    makes prompts expensive (prefill dominates on CPU)."""
    limit = {"user": max_user_chars, "assistant": max_agent_chars}
    return [Turn(role=t.role, text=clip(t.text, limit[t.role])) for t in history]


def fit_turns(build: Callable[[list[Turn]], Messages], history: Sequence[Turn],
              count_tokens: Callable[[Messages], int], max_prompt_tokens: int) -> list[Turn]:
    """The longest recent suffix of ``history`` whose messages fit ``max_prompt_tokens``.

    Oldest (user, agent) pairs are dropped first so the system prompt (the scenario) is never cut;
    the last agent reply is always kept even when it alone overflows.

    Args:
        build: ``history -> messages`` of one simulator (trained or prompted baseline).
        history: Real turns before the position (already clipped).
        count_tokens: Prompt length in tokens of a message list.
        max_prompt_tokens: Budget; 0 = no limit.
    """
    turns = list(history)
    while (max_prompt_tokens > 0 and len(turns) > 1
           and count_tokens(build(turns)) > max_prompt_tokens):
        turns = turns[2:] if len(turns) > 2 else turns[-1:]
    return turns


def fit_history(build: Callable[[list[Turn]], Messages], history: Sequence[Turn],
                count_tokens: Callable[[Messages], int], max_prompt_tokens: int) -> Messages:
    """Messages of :func:`fit_turns`' suffix of ``history`` (same arguments)."""
    return build(fit_turns(build, history, count_tokens, max_prompt_tokens))
