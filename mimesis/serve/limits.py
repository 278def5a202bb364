"""Bounds on every dimension of a chat-completions request, checked before any tokenization.

A request's work (reading it, fitting its view into the prompt budget, generating) grows with
its size, so each dimension has a limit in :class:`~mimesis.serve.config.ServeConfig`, one
``mimesis serve`` option each. :func:`check_request` runs on the parsed body before anything
else reads it; every refusal is a 400 whose ``param`` is the field at fault and whose message
names the value, the limit and the option that sets it (docs/serving_and_scaling.md has the
defaults and the measured conversation sizes they were set from).
"""

from __future__ import annotations

from mimesis.serve.config import ServeConfig
from mimesis.serve.schemas import APIError, ChatCompletionRequest, ChatMessage


def content_chars(message: ChatMessage) -> int:
    """Characters of a message's text: the string, or the sum of its text parts (non-text parts
    count 0 here and are refused when the message is read)."""
    if message.content is None or isinstance(message.content, str):
        return len(message.content or "")
    return sum(len(part.text or "") for part in message.content)


def _too_big(param: str, value: int, unit: str, limit: int, option: str, *,
             code: str) -> APIError:
    """``<param>: <value> <unit>, over this server's limit of <limit> (mimesis serve --<option>)``."""
    return APIError(400, f"{param}: {value} {unit}, over this server's limit of {limit} "
                    f"(mimesis serve --{option})", param=param, code=code)


def check_request(body: ChatCompletionRequest, config: ServeConfig) -> None:
    """Refuse a request that exceeds a limit of ``config``; cost O(number of messages).

    Checked, in order: ``stream``, ``n``, ``max_tokens`` / ``max_completion_tokens``, the
    number of messages, each message's characters, all messages' characters, the scenario goal's
    characters. (Body bytes are checked earlier, by the app's middleware; the simulator view's
    system-message scenario when it is read, :func:`~mimesis.serve.messages.
    read_simulator_request`.)

    Raises:
        APIError: 400 naming the field (``param``), the limit and its option; codes
            ``unsupported_parameter`` (stream, n), ``max_tokens_too_large``,
            ``too_many_messages``, ``message_too_long``, ``messages_too_long``,
            ``scenario_too_long``.
    """
    if body.stream:
        raise APIError(400, "stream=true: this server does not stream; send stream=false",
                       param="stream", code="unsupported_parameter")
    if body.n not in (None, 1):
        raise APIError(400, f"n={body.n}: this server returns exactly one choice per request "
                       "(n must be 1)", param="n", code="unsupported_parameter")
    for param in ("max_completion_tokens", "max_tokens"):
        value = getattr(body, param)
        if value is not None and value > config.max_tokens_limit:
            raise APIError(400, f"{param}={value} exceeds this server's limit of "
                           f"{config.max_tokens_limit} (mimesis serve --max-tokens-limit)",
                           param=param, code="max_tokens_too_large")
    if len(body.messages) > config.max_messages:
        raise _too_big("messages", len(body.messages), "messages", config.max_messages,
                       "max-messages", code="too_many_messages")
    total = 0
    for i, message in enumerate(body.messages):
        chars = content_chars(message)
        if chars > config.max_message_chars:
            raise _too_big(f"messages.{i}.content", chars, "characters",
                           config.max_message_chars, "max-message-chars", code="message_too_long")
        total += chars
    if total > config.max_total_chars:
        raise _too_big("messages", total, "characters in all", config.max_total_chars,
                       "max-total-chars", code="messages_too_long")
    if body.scenario is not None:
        check_scenario_chars(len(body.scenario.goal), config, "scenario.goal")


def check_scenario_chars(chars: int, config: ServeConfig, param: str) -> None:
    """Refuse a scenario goal longer than ``config.max_scenario_chars``.

    Raises:
        APIError: 400 ``scenario_too_long`` with ``param``.
    """
    if chars > config.max_scenario_chars:
        raise _too_big(param, chars, "characters of scenario goal", config.max_scenario_chars,
                       "max-scenario-chars", code="scenario_too_long")
