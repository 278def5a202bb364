"""Chat backends of the annotator: a local Hugging Face model, or any OpenAI-compatible endpoint.

A backend turns a batch of chat prompts into completions. ``complete`` returns, per prompt, the
text the model wrote *including* the prefill when the backend supports prefills (local models
continue a started answer; chat APIs cannot, so their prompts ask for the opening words instead).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

from tqdm.auto import tqdm

from mimesis.openai_chat import ChatAPIError, ChatClient
from mimesis.schemas import Messages

GenerateFn = Callable[[Sequence[Messages], Sequence[str], int, str], list[str]]
log = logging.getLogger(__name__)


class AnnotatorError(ChatAPIError):
    """The annotator backend cannot be set up or reached (missing key, bad URL, auth, network)."""


class ChatBackend(Protocol):
    """What the annotator needs from a model."""

    name: str  # e.g. "hf:smollm2-135m", "openai:gpt-4o-mini"
    supports_prefill: bool

    def complete(self, batch: Sequence[Messages], prefills: Sequence[str], max_new_tokens: int,
                 desc: str) -> list[str]:
        """One completion per prompt, in order (prefill included where supported)."""
        ...


class HFBackend:
    """Local causal LM through a batched generate function (``ChatGenerator.generate``).

    Args:
        generate_fn: ``(batch, prefills, max_new_tokens, desc) -> texts`` returning only the new
            text after each prefill; tests inject a fake one.
        name: Recorded producer suffix, e.g. ``hf:smollm2-135m``.
    """

    supports_prefill = True

    def __init__(self, generate_fn: GenerateFn, name: str):
        self._generate = generate_fn
        self.name = name

    @classmethod
    def from_model(cls, model, tokenizer, name: str, *, temperature: float, batch_size: int,
                   max_prompt_tokens: int, repetition_penalty: float, seed: int,
                   stop_texts: Sequence[str] = ()) -> HFBackend:
        """Wrap a loaded ``(model, tokenizer)``; one ``ChatGenerator.generate`` call per batch of
        prompts, with ``max_new_tokens`` chosen per call.

        ``stop_texts`` that are single tokens (e.g. ``"."``) end a row like the EOS token does:
        a batch then stops once every row has finished its first sentence, instead of running to
        ``max_new_tokens`` for the slowest row (the model is the annotator's own copy).
        """
        from mimesis.models.generation import ChatGenerator, GenerationConfig

        # generate() falls back to the model's generation_config for settings it is not given.
        config = model.generation_config
        config.repetition_penalty = repetition_penalty
        stops = [ids[0] for text in stop_texts
                 if len(ids := tokenizer.encode(text, add_special_tokens=False)) == 1]
        if stops:
            eos = config.eos_token_id
            eos = list(eos) if isinstance(eos, list | tuple) else [eos or tokenizer.eos_token_id]
            config.eos_token_id = [*eos, *(i for i in stops if i not in eos)]

        def generate(batch: Sequence[Messages], prefills: Sequence[str], max_new_tokens: int,
                     desc: str) -> list[str]:
            config = GenerationConfig(max_new_tokens=max_new_tokens, temperature=temperature,
                                      batch_size=batch_size, max_prompt_tokens=max_prompt_tokens)
            generator = ChatGenerator(model, tokenizer, config, name=name)
            return generator.generate(batch, prefills=prefills, desc=desc, seed=seed)

        return cls(generate, name)

    def complete(self, batch: Sequence[Messages], prefills: Sequence[str], max_new_tokens: int,
                 desc: str) -> list[str]:
        if not batch:
            return []
        outputs = self._generate(batch, prefills, max_new_tokens, desc)
        if len(outputs) != len(batch):
            raise AnnotatorError(f"{self.name}: {len(outputs)} outputs for {len(batch)} prompts")
        return [p + o for p, o in zip(prefills, outputs, strict=True)]


class OpenAIBackend:
    """Any OpenAI-compatible chat-completions endpoint, through :class:`~mimesis.openai_chat.ChatClient`.

    Requests run ``concurrency`` at a time; retries and errors follow
    :mod:`mimesis.openai_chat`. A request the server rejects as invalid (400/422, e.g. a content
    filter) yields ``""`` (the caller falls back); authentication, missing-model, connection and
    timeout errors raise :class:`AnnotatorError`.

    Raises:
        AnnotatorError: the API key environment variable is unset or empty.
    """

    supports_prefill = False

    def __init__(self, base_url: str, model: str, api_key_env: str, *, timeout_s: float,
                 max_retries: int, concurrency: int, temperature: float):
        self._client = ChatClient(model, base_url, api_key_env, timeout_s=timeout_s,
                                  max_retries=max_retries, error=AnnotatorError,
                                  label=f"annotator backend 'openai:{model}'",
                                  key_hint=" (label.annotator.api_key_env)")
        self._concurrency, self._temperature = max(1, concurrency), temperature
        self.name = self._client.name

    def _one(self, messages: Messages, max_new_tokens: int) -> str:
        reply = self._client.complete(messages, max_tokens=max_new_tokens,
                                      temperature=self._temperature)
        if reply.rejected:
            log.warning("%s rejected a prompt (%s); falling back for it", self.name, reply.rejected)
        return reply.text

    def complete(self, batch: Sequence[Messages], prefills: Sequence[str], max_new_tokens: int,
                 desc: str) -> list[str]:
        with ThreadPoolExecutor(self._concurrency) as pool:
            jobs = pool.map(lambda m: self._one(m, max_new_tokens), batch)
            return list(tqdm(jobs, total=len(batch), desc=desc, disable=len(batch) < 8))


def backend_name(model: str) -> str:
    """Short model name for producer ids: a local folder path becomes its folder name."""
    return Path(model).name if ("/" in model or os.sep in model) else model
