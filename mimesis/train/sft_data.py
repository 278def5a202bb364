"""SFT rows for the user simulator: one role-flipped conversation per row, fitted to a length.

A row is ``{"id": ..., "messages": [system, assistant(user turn), user(agent turn), ...]}`` (the
conversational format TRL's ``SFTTrainer`` tokenises with the chat template and, with
``assistant_only_loss``, masks to the assistant role = the real user's turns).

Long conversations are fitted to ``max_length`` tokens by clipping agent replies harder first
(what the simulator reads matters less than what it learns to write), then user turns. What still
does not fit loses whole middle exchanges, earliest first (``elided``: the opening turn and the
end-of-conversation turn are the rarest, most valuable targets); failing that, trailing messages
(``cut``: the end turn is lost).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from mimesis.schemas import LabeledConversation, Messages, Reject
from mimesis.simulator.roles import flip_roles

_MIN_AGENT_CHARS = 120
_MIN_USER_CHARS = 200


@dataclass(frozen=True)
class FitResult:
    """A fitted row (or ``None``) and how it was fitted: ``fits``, ``clipped``, ``elided``,
    ``cut``, or a reject reason (``too_long``)."""

    messages: Messages | None
    outcome: str
    n_tokens: int


def n_tokens(tokenizer, messages: Messages) -> int:
    """Length in tokens of ``messages`` rendered with the tokenizer's chat template."""
    rendered = tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True)
    return len(rendered["input_ids"])


def _clip_schedule(max_user_chars: int, max_agent_chars: int) -> list[tuple[int, int]]:
    """Clip limits to try in order: the configured ones, then halving agent, then user, limits."""
    user = max_user_chars or 4000
    agent = max_agent_chars or 4000
    schedule = [(max_user_chars, max_agent_chars)]
    while agent > _MIN_AGENT_CHARS:
        agent = max(_MIN_AGENT_CHARS, agent // 2)
        schedule.append((user, agent))
    while user > _MIN_USER_CHARS:
        user = max(_MIN_USER_CHARS, user // 2)
        schedule.append((user, agent))
    return schedule


def fit_conversation(conv: LabeledConversation, tokenizer, max_length: int,
                     max_user_chars: int, max_agent_chars: int) -> FitResult:
    """Role-flipped messages of ``conv`` that render to at most ``max_length`` tokens.

    Raises:
        ValueError: from ``flip_roles`` (a user turn without a label).
    """
    messages: Messages = []
    for i, (user_chars, agent_chars) in enumerate(_clip_schedule(max_user_chars,
                                                                 max_agent_chars)):
        messages = flip_roles(conv, user_chars, agent_chars)
        length = n_tokens(tokenizer, messages)
        if length <= max_length:
            return FitResult(messages, "fits" if i == 0 else "clipped", length)
    # Drop whole middle exchanges (agent reply + the user turn answering it), earliest first:
    # the opening turn and the ending stay, and every kept user turn keeps its real preceding
    # agent reply.
    head, pairs = messages[:2], [messages[i:i + 2] for i in range(2, len(messages), 2)]
    if all(len(p) == 2 and p[1]["role"] == "assistant" for p in pairs):
        for drop in range(1, len(pairs)):
            elided = head + [m for pair in pairs[drop:] for m in pair]
            length = n_tokens(tokenizer, elided)
            if length <= max_length:
                return FitResult(elided, "elided", length)
    # Last resort: drop trailing messages until a prefix ending on a user turn fits.
    for end in range(len(messages) - 1, 1, -1):
        prefix = messages[:end]
        if prefix[-1]["role"] == "assistant":
            length = n_tokens(tokenizer, prefix)
            if length <= max_length:
                return FitResult(prefix, "cut", length)
    return FitResult(None, "too_long", length)


def build_rows(convs: Iterable[LabeledConversation], tokenizer, max_length: int,
               max_user_chars: int, max_agent_chars: int, limit: int = 0,
               stage: str = "train_user") -> tuple[list[dict], list[Reject], dict[str, int]]:
    """SFT rows for the first ``limit`` usable conversations (0 = all).

    Returns:
        ``(rows, rejects, counts)``: rows ``{"id", "messages"}``; one :class:`Reject` for every
        conversation not in ``rows`` (``too_long``, ``unlabeled_turn``, ``over_limit``); counts
        of each fitting outcome and reject reason, plus ``tokens`` (sum of rendered lengths).
    """
    rows: list[dict] = []
    rejects: list[Reject] = []
    counts: Counter[str] = Counter()
    for conv in convs:
        if limit and len(rows) >= limit:
            rejects.append(Reject(id=conv.id, stage=stage, reason="over_limit",
                                  detail=f"only the first {limit} usable conversations are used"))
            counts["over_limit"] += 1
            continue
        try:
            fit = fit_conversation(conv, tokenizer, max_length, max_user_chars, max_agent_chars)
        except ValueError as err:
            rejects.append(Reject(id=conv.id, stage=stage, reason="unlabeled_turn",
                                  detail=str(err)))
            counts["unlabeled_turn"] += 1
            continue
        counts[fit.outcome] += 1
        if fit.messages is None:
            rejects.append(Reject(id=conv.id, stage=stage, reason="too_long",
                                  detail=f"first user turn alone exceeds {max_length} tokens"))
            continue
        counts["tokens"] += fit.n_tokens
        rows.append({"id": conv.id, "messages": fit.messages})
    return rows, rejects, dict(counts)
