"""The one OpenAI-compatible chat client: key from the environment, timeouts, retries, errors.

Every caller that talks to an OpenAI-compatible chat-completions endpoint goes through
:class:`ChatClient` (the official ``openai`` package): the annotator's and the coach's ``openai``
backend (:class:`mimesis.behaviors.backends.OpenAIBackend`), the TurtleGym LLM judge
(:class:`mimesis.envs.turtle_judge.OpenAIJudge`) and the ``openai`` unseen and training users
(:class:`mimesis.users.chat.OpenAIUser`).

Errors, one rule for all callers:

- the API key's environment variable is unset or empty: the caller's :class:`ChatAPIError`
  subclass, raised when the client is built (before any request);
- the server rejects a request as invalid (400/422, e.g. a content filter):
  :attr:`ChatReply.rejected` holds why, ``text`` is ``""``; the caller decides (fall back,
  resample, or raise);
- connection errors, timeouts, 408/409/429 and 5xx are retried ``max_retries`` times with
  backoff by the ``openai`` client; when retries run out, and on authentication or unknown-model
  errors, the caller's :class:`ChatAPIError` subclass is raised, naming the endpoint and the
  ``openai`` exception type (e.g. ``AuthenticationError``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from mimesis.schemas import Messages

DEFAULT_HOST = "api.openai.com"


class ChatAPIError(RuntimeError):
    """An OpenAI-compatible endpoint cannot be set up or reached (missing key, auth, network).

    Callers subclass it so their own error type names who failed (``AnnotatorError``,
    ``TurtleJudgeError``, ``UserEndpointError``).
    """


@dataclass(frozen=True)
class ChatReply:
    """One chat completion.

    Attributes:
        text: The first choice's content (``""`` when rejected or when the reply has no choice).
        model: The model id the endpoint reports having served (``""`` if it reports none).
        rejected: Why the server refused the request as invalid (400/422); ``""`` if accepted.
        finish_reason: The first choice's ``finish_reason`` (``""`` if none), e.g. ``mimesis
            serve``'s ``end_conversation``.
    """

    text: str
    model: str = ""
    rejected: str = ""
    finish_reason: str = ""


class ChatClient:
    """A chat-completions client for one model at one OpenAI-compatible endpoint.

    Args:
        model: Model id at the endpoint.
        base_url: Endpoint base URL (``""``: api.openai.com).
        api_key_env: Name of the environment variable holding the API key (never the key).
        timeout_s: Per-request timeout, seconds.
        max_retries: Client retries with backoff (connection errors, 408/409/429, 5xx).
        error: The :class:`ChatAPIError` subclass to raise.
        label: Who is calling, for error messages (default ``openai:<model>``).
        key_hint: Appended to the missing-key message (e.g. the params key that names the
            variable).
        client: A ready ``openai.OpenAI``-like client (tests); skips the key lookup.

    Raises:
        ChatAPIError: (as ``error``) ``api_key_env`` is unset or empty and no ``client`` given.
    """

    def __init__(self, model: str, base_url: str = "", api_key_env: str = "OPENAI_API_KEY", *,
                 timeout_s: float = 60.0, max_retries: int = 3,
                 error: type[ChatAPIError] = ChatAPIError, label: str = "", key_hint: str = "",
                 client: Any = None) -> None:
        import openai  # lazy: offline runs never need the package loaded

        self.model, self.name = model, f"openai:{model}"
        self.host = base_url or DEFAULT_HOST
        self._error, self._label, self._openai = error, label or self.name, openai
        if client is None:
            key = os.environ.get(api_key_env, "")
            if not key:
                raise error(f"{self._label} needs an API key in the environment variable "
                            f"{api_key_env!r}{key_hint}; it is unset or empty")
            client = openai.OpenAI(base_url=base_url or None, api_key=key, timeout=timeout_s,
                                   max_retries=max_retries)
        self.client = client

    def complete(self, messages: Messages, *, max_tokens: int, temperature: float,
                 top_p: float | None = None, seed: int | None = None,
                 extra_body: dict[str, Any] | None = None) -> ChatReply:
        """One completion of ``messages`` (``top_p``, ``seed`` and ``extra_body`` — extra JSON
        body fields such as ``mimesis serve``'s ``scenario`` — are sent only when given).

        Raises:
            ChatAPIError: (as ``error``) the endpoint failed after retries, or refused the key
                or the model.
        """
        errors = self._openai
        extra: dict[str, Any] = {k: v for k, v in (("top_p", top_p), ("seed", seed),
                                                   ("extra_body", extra_body)) if v is not None}
        try:
            response = self.client.chat.completions.create(
                model=self.model, messages=messages, max_tokens=max_tokens,
                temperature=temperature, **extra)
        except (errors.BadRequestError, errors.UnprocessableEntityError) as exc:
            return ChatReply("", rejected=f"{type(exc).__name__}: {exc}")
        except errors.APIError as exc:  # auth, unknown model, rate limit after retries, network
            raise self._error(f"{self._label} at {self.host} failed: "
                              f"{type(exc).__name__}: {exc}") from exc
        choices = response.choices or []
        text = (choices[0].message.content or "") if choices else ""
        finish = (getattr(choices[0], "finish_reason", "") or "") if choices else ""
        return ChatReply(text, model=(getattr(response, "model", "") or "").strip(),
                         finish_reason=str(finish))
