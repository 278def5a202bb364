"""ChatML chat template with ``{% generation %}`` markers, for assistant-only SFT loss.

TRL's ``assistant_only_loss`` asks the tokenizer for an assistant-token mask
(``apply_chat_template(..., return_assistant_tokens_mask=True)``), which only templates with
``{% generation %}…{% endgeneration %}`` blocks can give. SmolLM2's own template renders plain
ChatML without them; :func:`chatml_template` renders the same text, with the markers around every
assistant message's content *and* its ``<|im_end|>`` (so the model is trained to stop), and is
append-only: earlier messages, ``<think>`` blocks included, render the same whatever follows
(docs/pitfalls.md #8).
"""

from __future__ import annotations

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
# SmolLM2-Instruct's template inserts this system message when the chat has none.
SMOLLM2_DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"

_DEFAULT_SYSTEM_BLOCK = (
    "{%- if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\n' + default_system + '<|im_end|>\\n' }}"
    "{%- endif %}"
)

_BODY = (
    "{%- for message in messages %}"
    "{DEFAULT_SYSTEM}"
    "{%- if message['role'] == 'assistant' %}"
    "{{ '<|im_start|>assistant\\n' }}"
    "{%- generation %}{{ message['content'] + '<|im_end|>' }}{%- endgeneration %}"
    "{{ '\\n' }}"
    "{%- else %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{%- endif %}"
)


def chatml_template(default_system: str | None = None) -> str:
    """Jinja source of the ChatML template with generation markers.

    Args:
        default_system: System message inserted when a chat starts without one (SmolLM2 does
            this); ``None`` inserts nothing.

    Returns:
        The template string, to assign to ``tokenizer.chat_template``.

    Raises:
        ValueError: ``default_system`` contains a quote or backslash (it is embedded in Jinja).
    """
    if default_system is None:
        return _BODY.replace("{DEFAULT_SYSTEM}", "")
    if any(c in default_system for c in "'\\"):
        raise ValueError("default_system must not contain quotes or backslashes")
    block = "{%- set default_system = '" + default_system + "' %}" + _DEFAULT_SYSTEM_BLOCK
    return _BODY.replace("{DEFAULT_SYSTEM}", block)


def apply_chatml(tokenizer, default_system: str | None = None) -> None:
    """Give ``tokenizer`` the ChatML training template and ChatML end/pad tokens, in place.

    ``eos_token`` becomes ``<|im_end|>`` (what a turn ends with, so generation stops there and TRL
    checks it is inside the loss mask). The pad token is kept when it is set and differs from
    ``<|im_end|>``, else ``<|endoftext|>`` when the vocabulary has it: a pad distinct from the
    end-of-turn token keeps collators that mask padding from masking the turn ends too.

    Raises:
        ValueError: the vocabulary lacks ``<|im_start|>`` or ``<|im_end|>`` as single tokens (not
            a ChatML model; adding tokens would need new, untrained embeddings).
    """
    vocab = tokenizer.get_vocab()
    missing = [t for t in (IM_START, IM_END) if t not in vocab]
    if missing:
        raise ValueError(f"tokenizer has no ChatML tokens {missing}: use a ChatML base model")
    tokenizer.chat_template = chatml_template(default_system)
    tokenizer.eos_token = IM_END
    if tokenizer.pad_token is None or tokenizer.pad_token == IM_END:
        tokenizer.pad_token = "<|endoftext|>" if "<|endoftext|>" in vocab else IM_END
