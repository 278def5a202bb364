"""The model-backed users: an OpenAI-compatible endpoint (:class:`OpenAIUser`) and a local
model prompted as a user (:class:`PromptedUser`), each a ``generate_fn`` behind
:class:`~mimesis.simulator.runtime.UserSimulator` (built by
:func:`mimesis.users.factory.make_user`).

* ``openai`` — the official ``openai`` client (:class:`mimesis.openai_chat.ChatClient`); a batch
  is sent as concurrent requests, ``concurrency`` at a time. Chat APIs answer a user message, so
  an opening turn (no agent message yet) gets :data:`OPENING_CUE` as one.
* ``prompted`` — a local model (``load_base`` name or HF folder) with a ``prompt_style``
  (:data:`PROMPT_STYLES`), sampled with :class:`~mimesis.models.engine.sampling.TokenSampler`
  (``ChatGenerator`` for sliding-window models), loaded on first use.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from mimesis.openai_chat import ChatAPIError, ChatClient
from mimesis.schemas import Messages, Scenario
from mimesis.simulator.baseline import render_prompted_system_prompt
from mimesis.simulator.prompts import render_system_prompt
from mimesis.users.spec import UserSpec

PROMPT_STYLES: dict[str, Callable[[Scenario], str]] = {
    "prompted_user": render_prompted_system_prompt, "user_simulator": render_system_prompt}
OPENING_CUE = "(The conversation starts now: write your first message to the assistant.)"


class UserEndpointError(ChatAPIError):
    """A user's endpoint cannot be set up or reached (missing API key, endpoint failure)."""


def api_messages(view: Messages) -> Messages:
    """The simulator's view as a chat API request: a view that does not end with a message to
    answer (the opening turn) gets :data:`OPENING_CUE` as the user message."""
    return list(view) if view[-1]["role"] == "user" else [
        *view, {"role": "user", "content": OPENING_CUE}]


class OpenAIUser:
    """``generate_fn`` over an OpenAI-compatible endpoint: one request per chat, concurrently.

    A request the server rejects as invalid (400/422, e.g. a content filter) yields ``""`` (the
    runtime resamples once, then ends the episode ``empty_turn``); other API errors raise.

    Args:
        config: The user (``model``, ``base_url``, ``api_key_env``, sampling, concurrency).
        forbidden: Lower-cased model names of the training simulator; a response reporting one
            raises (the endpoint serves the training simulator under another name).
        client: An ``openai.OpenAI``-like client (tests); default built from ``config``.
        label: Who is calling, in error messages (default ``user '<name>' (openai)``).
        key_hint: Appended to the missing-key message (what names the variable).

    Raises:
        UserEndpointError: the key variable is unset or empty (no client given).
    """

    def __init__(self, config: UserSpec, forbidden: set[str] | None = None, client=None, *,
                 label: str = "", key_hint: str = "") -> None:
        self.config, self.forbidden = config, forbidden or set()
        self.client = ChatClient(config.model, config.base_url, config.api_key_env,
                                 timeout_s=config.timeout_s, max_retries=config.max_retries,
                                 error=UserEndpointError,
                                 label=label or f"user {config.name!r} (openai)",
                                 key_hint=key_hint, client=client)
        self.seed: int | None = None

    def check(self) -> None:
        """One 1-token request, so an unreachable or misaddressed endpoint fails before any
        work. The request is valid for both kinds of endpoint: a chat model, and ``mimesis
        serve``'s simulator view, where the system message is the scenario goal.

        Raises:
            UserEndpointError: unreachable, or the minimal request was refused (4xx).
        """
        reply = self.client.complete(
            [{"role": "system", "content": "You want help writing a short birthday message."},
             {"role": "user", "content": "Hello! How can I help you today?"}],
            max_tokens=1, temperature=0.0)
        if reply.rejected:
            raise UserEndpointError(
                f"{self.client.host} refused a minimal request ({reply.rejected}); for `mimesis "
                f"serve`, --endpoint is its simulator view, http://HOST:PORT/sim/v1")

    def reseed(self, seed: int) -> None:
        """Send ``seed`` with every request from now on (the endpoint's best-effort
        reproducibility; the OpenAI API and vLLM honour it, sampling stays the server's)."""
        self.seed = seed

    def __call__(self, batch: Sequence[Messages]) -> list[str]:
        if not batch:
            return []
        with ThreadPoolExecutor(min(self.config.concurrency, len(batch))) as pool:
            return list(pool.map(self._one, batch))

    def _one(self, view: Messages) -> str:
        c = self.config
        reply = self.client.complete(api_messages(view), max_tokens=c.max_new_tokens,
                                     temperature=c.temperature, top_p=c.top_p, seed=self.seed)
        if reply.model.lower() in self.forbidden:
            raise ValueError(f"user {c.name!r}: the endpoint answered as "
                             f"{reply.model.lower()!r}, the training simulator; it cannot be an "
                             "unseen user")
        return reply.text


class PromptedUser:
    """``generate_fn`` of a local model prompted as a user, loaded on first call (a registry
    costs nothing until used); :meth:`reseed` restarts its sampling, :meth:`release` drops the
    weights."""

    def __init__(self, config: UserSpec) -> None:
        self.config = config
        self.model = None
        self.seed = config.seed
        self.sampler = None  # TokenSampler once loaded (None for the ChatGenerator fallback)
        self._generate: Callable[[Sequence[Messages]], list[str]] | None = None

    def reseed(self, seed: int) -> None:
        """Restart sampling from ``seed``: a fresh ``TokenSampler`` (new generator, empty KV
        cache) on the loaded weights, or this seed for the next load / ``ChatGenerator`` call."""
        from mimesis.users.reseed import fresh_sampler

        self.seed = seed
        if self.sampler is not None:
            self.sampler = fresh_sampler(self.sampler, seed)
            self._generate = self.sampler.chat

    def __call__(self, batch: Sequence[Messages]) -> list[str]:
        if self._generate is None:
            self._load()
        return self._generate(batch)

    def _load(self) -> None:
        import torch

        from mimesis.models.base import load_base
        from mimesis.models.engine.sampling import SamplingParams, TokenSampler

        c = self.config
        model, tokenizer = load_base(c.model, dtype=c.dtype)
        if torch.cuda.is_available():
            model.to("cuda")
        model.requires_grad_(False)
        try:
            self.sampler = TokenSampler(model, tokenizer, SamplingParams(
                temperature=c.temperature, top_p=c.top_p, max_new_tokens=c.max_new_tokens,
                batch_size=c.batch_size), seed=self.seed)
            self._generate = self.sampler.chat
        except ValueError:  # sliding-window attention: plain transformers generate
            from mimesis.models.generation import ChatGenerator, GenerationConfig

            generator = ChatGenerator(model, tokenizer, GenerationConfig(
                max_new_tokens=c.max_new_tokens, temperature=c.temperature, top_p=c.top_p,
                batch_size=c.batch_size), name=f"hf:{c.model}")
            self._generate = lambda batch: generator.generate(batch, desc=c.name, seed=self.seed)
        self.model = model

    def release(self) -> None:
        """Drop the model (reloaded on the next call)."""
        self.model, self.sampler, self._generate = None, None, None
