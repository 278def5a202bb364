"""Role flipping: the one place where a conversation is seen from the user simulator's side.

In the simulator's chat, the *real user* is the ``assistant`` role (what the model writes) and
the *agent* (the LLM the user talked to) is the ``user`` role (what the model reads). The system
message holds the scenario.
"""

from __future__ import annotations

from mimesis.format import format_end, format_target
from mimesis.schemas import LabeledConversation
from mimesis.simulator.prompts import render_system_prompt
from mimesis.text import clip


def flip_roles(conv: LabeledConversation, max_user_chars: int = 0,
               max_agent_chars: int = 0) -> list[dict[str, str]]:
    """Chat messages for training the simulator on ``conv``.

    Returns ``[system, assistant(user turn 1), user(agent reply 1), assistant(user turn 2), …]``
    where every assistant message is ``<think>reasoning</think>\\nutterance`` and, when the real
    user ended the conversation (``conv.ended``) after an agent reply, a final assistant message
    carries the end-of-conversation signal.

    Args:
        conv: A labelled conversation (turns alternate, user first).
        max_user_chars: Clip each user utterance to this many characters (0 = no clip).
        max_agent_chars: Clip each agent reply to this many characters (0 = no clip).

    Raises:
        ValueError: a user turn has no label.
    """
    by_turn = {lab.turn_index: lab for lab in conv.labels}
    messages = [{"role": "system", "content": render_system_prompt(conv.scenario)}]
    for i, turn in enumerate(conv.turns):
        if turn.role == "user":
            if i not in by_turn:
                raise ValueError(f"{conv.id}: user turn {i} has no label")
            text = format_target(by_turn[i].reasoning, clip(turn.text, max_user_chars))
            messages.append({"role": "assistant", "content": text})
        else:
            messages.append({"role": "user", "content": clip(turn.text, max_agent_chars)})
    if conv.ended and conv.turns[-1].role == "assistant":
        messages.append({"role": "assistant", "content": format_end(conv.end_reasoning)})
    return messages
