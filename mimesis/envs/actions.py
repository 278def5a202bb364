"""Parse the agent's tagged actions (``[action]``, ``[search]``, ``[answer]``, ``[finish]``).

The tag set follows the UserRL gyms (SalesforceAIResearch/UserRL, Apache-2.0). The parser is
tolerant because small policies rarely emit the exact format:

- tags are matched case-insensitively, with optional spaces inside the brackets, optional
  markdown emphasis around them (``**[Answer]**``) and an optional colon after them;
- private reasoning in ``<think>…</think>`` is removed first (it must never reach the user), and
  so is an unclosed ``<think>`` block (the agent was cut while thinking);
- text before the first tag is the agent's preamble and is dropped; the action's content runs
  from the first tag to the next tag (a second tag in one message is ignored);
- a message with no tag at all is an ``[action]``: it is sent to the user as it is, which is
  what a chat model that ignores the format is doing anyway.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

ActionKind = Literal["action", "search", "answer", "finish"]
ACTION_KINDS: tuple[ActionKind, ...] = ("action", "search", "answer", "finish")

_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)
_TAG = re.compile(r"[*_`]*\[\s*(action|search|answer|finish)\s*\][*_`]*\s*:?", re.IGNORECASE)


@dataclass(frozen=True)
class Action:
    """One parsed agent action.

    Attributes:
        kind: ``action`` (talk to the user), ``search`` (tool), ``answer`` (final answer) or
            ``finish`` (give up / end).
        content: The text after the tag, stripped (empty for a bare ``[finish]``).
        tagged: False when the message had no tag and was read as ``[action]``.
    """

    kind: ActionKind
    content: str
    tagged: bool


def parse_action(text: str) -> Action:
    """Parse one agent message into an :class:`Action`.

    Args:
        text: The agent's raw message.

    Returns:
        The parsed action; never raises (an empty message is an empty ``[action]``).

    Examples:
        >>> parse_action("[answer] 42")
        Action(kind='answer', content='42', tagged=True)
        >>> parse_action("<think>ask first</think>**[Action]**: What is f(1, 2, 3, 4)?")
        Action(kind='action', content='What is f(1, 2, 3, 4)?', tagged=True)
        >>> parse_action("Let me guess. [ANSWER] Lion [finish]")
        Action(kind='answer', content='Lion', tagged=True)
        >>> parse_action("Do you prefer morning flights?")
        Action(kind='action', content='Do you prefer morning flights?', tagged=False)
    """
    body = _THINK.sub("", text)
    match = _TAG.search(body)
    if match is None:
        return Action("action", body.strip(), tagged=False)
    kind: ActionKind = match.group(1).lower()  # type: ignore[assignment]
    rest = body[match.end() :]
    following = _TAG.search(rest)
    content = rest[: following.start()] if following else rest
    return Action(kind, content.strip(), tagged=True)


def is_valid_action(text: str) -> bool:
    """Format compliance of one agent message: it carries a tag, and an ``[action]``,
    ``[search]`` or ``[answer]`` has content (a bare ``[finish]`` is complete).

    >>> is_valid_action("[answer] 42"), is_valid_action("[finish]"), is_valid_action("[action]")
    (True, True, False)
    >>> is_valid_action("Do you prefer morning flights?")
    False
    """
    act = parse_action(text)
    return act.tagged and (act.kind == "finish" or bool(act.content))
