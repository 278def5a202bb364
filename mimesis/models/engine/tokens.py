"""Token sequences of multi-turn rollouts, assembled at message level with the chat template.

An episode's sequence is ``prompt_ids + completion_ids``: the prompt is the agent's opening chat
rendered with ``add_generation_prompt=True``; the completion alternates agent turns and injected
messages::

    completion = a_0  e_0  a_1  e_1  …  a_K
    a_k = the ids the agent sampled for turn k, verbatim (env_mask 1, its log-probabilities)
    e_k = what the template puts between a_k and a_(k+1): the end of turn k's assistant block,
          the environment/tool/user message and the next generation prompt (env_mask 0)

``e_k`` is the *text difference* between two renderings of the conversation with the tokenizer's
own template — after appending the message and before it — and is then tokenised on its own
(docs/pitfalls.md #10: no hand-written ChatML). That is only correct when rendering is append-only:
every earlier part of the conversation renders the same once more messages follow. Templates that
drop earlier ``<think>`` blocks (Qwen3-style) or otherwise rewrite history break this
(docs/pitfalls.md #8), so each step asserts it and raises :class:`TemplateDriftError` instead of
producing shifted tokens.

Turn indices: the tokens of ``a_k`` and ``e_k`` carry index ``k`` (agent turn ``k`` and the
observation it caused: one environment transition), for per-turn credit assignment.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from mimesis.schemas import Messages


class TemplateDriftError(RuntimeError):
    """The chat template re-renders earlier turns differently once later messages are added."""


def render(tokenizer, messages: Messages, add_generation_prompt: bool) -> str:
    """``tokenizer.apply_chat_template`` as text (the only way this package renders a chat)."""
    return tokenizer.apply_chat_template(messages, tokenize=False,
                                         add_generation_prompt=add_generation_prompt)


def encode(tokenizer, text: str) -> list[int]:
    """Token ids of already-templated ``text`` (no BOS/EOS added: the template has them)."""
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def _drift(where: str, expected: str, got: str) -> TemplateDriftError:
    at = next((i for i, (a, b) in enumerate(zip(expected, got, strict=False)) if a != b),
              min(len(expected), len(got)))
    return TemplateDriftError(
        f"chat template is not append-only ({where}): earlier text renders differently at char "
        f"{at}: expected {expected[at:at + 60]!r}, rendered {got[at:at + 60]!r}. Templates that "
        "drop earlier <think> blocks or rewrite history cannot be tokenised turn by turn "
        "(docs/pitfalls.md #8); use an append-only template such as "
        "mimesis.models.chat_template.chatml_template().")


@dataclass
class Transcript:
    """One episode's agent-side chat and its token sequence, grown turn by turn.

    Build it with :meth:`start`; then alternate :meth:`add_agent` (sampled ids) and
    :meth:`add_message` (an injected message). ``text`` is always the exact text of
    ``prompt_ids + completion_ids``.

    Attributes:
        messages: The agent's chat (``assistant`` = the agent; others are injected).
        prompt_ids: Rendered opening chat with the generation prompt, shape ``[P]``.
        completion_ids: Everything after the prompt, shape ``[C]``.
        env_mask: ``[C]``; 1 = sampled by the agent, 0 = injected by the template/env/user.
        logprobs: ``[C]``; the agent's log-probability of each sampled token, 0.0 elsewhere.
        turn_ids: ``[C]``; agent turn index of each token (see the module docstring).
        turns: Number of agent turns added.
    """

    tokenizer: object
    messages: Messages
    prompt_ids: list[int]
    text: str
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    turn_ids: list[int] = field(default_factory=list)
    turns: int = 0

    @classmethod
    def start(cls, tokenizer, messages: Messages) -> Transcript:
        """The transcript of the opening chat ``messages`` (ends with a non-agent message)."""
        text = render(tokenizer, messages, add_generation_prompt=True)
        return cls(tokenizer, [dict(m) for m in messages], encode(tokenizer, text), text)

    def ids(self) -> list[int]:
        """``prompt_ids + completion_ids``: the context of the agent's next turn."""
        return self.prompt_ids + self.completion_ids

    def add_agent(self, ids: Sequence[int], logprobs: Sequence[float]) -> str:
        """Append the agent's sampled turn; returns its text (the ``assistant`` content).

        Args:
            ids: The sampled ids, ending with the tokenizer's EOS when the turn stopped there.
            logprobs: One log-probability per id.

        Raises:
            ValueError: lengths differ, or the last message is already the agent's.
        """
        if len(ids) != len(logprobs):
            raise ValueError(f"{len(ids)} ids but {len(logprobs)} logprobs")
        if self.messages[-1]["role"] == "assistant":
            raise ValueError("two agent turns in a row: add the injected message first")
        ids = list(ids)
        eos = self.tokenizer.eos_token_id
        content_ids = ids[:-1] if ids and ids[-1] == eos else ids
        content = self.tokenizer.decode(content_ids, skip_special_tokens=False)
        self.messages.append({"role": "assistant", "content": content})
        self.text += self.tokenizer.decode(ids, skip_special_tokens=False)
        self.completion_ids += ids
        self.env_mask += [1] * len(ids)
        self.logprobs += [float(x) for x in logprobs]
        self.turn_ids += [self.turns] * len(ids)
        self.turns += 1
        return content

    def add_message(self, message: dict[str, str]) -> list[int]:
        """Append an injected (user/tool/env) message and the next generation prompt.

        Returns:
            The injected ids (also appended to ``completion_ids`` with mask 0).

        Raises:
            TemplateDriftError: the template does not render the earlier conversation as it was
                tokenised (docs/pitfalls.md #8).
        """
        before = render(self.tokenizer, self.messages, add_generation_prompt=False)
        if not before.startswith(self.text):
            raise _drift("the agent's last turn", self.text, before)
        self.messages.append(dict(message))
        after = render(self.tokenizer, self.messages, add_generation_prompt=True)
        if not after.startswith(before):
            raise _drift("after a new message", before, after)
        injected = encode(self.tokenizer, after[len(self.text):])
        turn = max(self.turns - 1, 0)
        self.completion_ids += injected
        self.env_mask += [0] * len(injected)
        self.logprobs += [0.0] * len(injected)
        self.turn_ids += [turn] * len(injected)
        self.text = after
        return injected

    def cut(self, max_tokens: int) -> bool:
        """Keep the first ``max_tokens`` completion tokens; True when something was cut."""
        if len(self.completion_ids) <= max_tokens:
            return False
        for name in ("completion_ids", "env_mask", "logprobs", "turn_ids"):
            setattr(self, name, getattr(self, name)[:max_tokens])
        self.text = self.tokenizer.decode(self.ids(), skip_special_tokens=False)
        return True
