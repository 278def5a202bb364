"""The simulator's output contract: private reasoning, utterance, end-of-conversation signal.

A simulator turn is rendered as::

    <think>{first-person reasoning}</think>
    {utterance}

and the turn after the user's last real message (when the real user stopped) as::

    <think>{why the user stops}</think>
    <|end_conversation|>

The end signal is plain text (not an added special token) so base tokenizers and LoRA adapters
need no new embeddings.
"""

from __future__ import annotations

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
END_SIGNAL = "<|end_conversation|>"
# What a trained simulator's sampler writes before the model's first token: every turn of the
# contract opens with the reasoning tag (SamplingParams.prefill).
TURN_PREFILL = THINK_OPEN


def format_target(reasoning: str, utterance: str) -> str:
    """Training target / canonical form of one simulator turn."""
    return f"{THINK_OPEN}{reasoning.strip()}{THINK_CLOSE}\n{utterance.strip()}"


def format_end(reasoning: str) -> str:
    """Target of the end-of-conversation turn."""
    return f"{THINK_OPEN}{reasoning.strip()}{THINK_CLOSE}\n{END_SIGNAL}"
