"""A request body that does not parse, refused in this server's words instead of pydantic's.

FastAPI validates the body against :class:`~mimesis.serve.schemas.ChatCompletionRequest`; its
errors speak of union branches and model classes ("Input should be a valid dictionary or
instance of ChatMessage"). :func:`invalid_request` turns the first one into a 400 that says what
the body must be and what was sent, naming the message index (``messages.3.content``).
"""

from __future__ import annotations

from typing import Any

from mimesis.serve.schemas import APIError


def invalid_request(errors: list[dict[str, Any]]) -> APIError:
    """A 400 in this server's words for a body that does not parse as
    :class:`~mimesis.serve.schemas.ChatCompletionRequest` (``errors``: pydantic's, as FastAPI
    reports them).

    The body's shape (``invalid_body``) and each message (``invalid_value``, naming the message
    index and what was sent) get their own wording; other fields keep pydantic's message, with
    the field named.
    """
    located = [([p for p in e.get("loc", ()) if p != "body"], e) for e in errors] or [([], {})]
    loc, first = located[0]
    got = _kind(first.get("input"))
    missing = first.get("type") == "missing"
    if not loc:
        return APIError(400, f"{_BODY}, got {'nothing' if missing else got}", param="body",
                        code="invalid_body")
    if loc == ["messages"]:
        return APIError(400, f"{_BODY}; {'it has none' if missing else f'its messages is {got}'}",
                        param="messages", code="invalid_body")
    if loc[0] == "messages" and isinstance(loc[1], int):
        param, message = _message_error(f"messages.{loc[1]}", loc[2:], located)
        return APIError(400, message, param=param, code="invalid_value")
    param = ".".join(map(str, loc))
    return APIError(400, f"{first.get('msg', 'invalid value')} ({param})", param=param,
                    code="invalid_value")


_BODY = "the request body must be a JSON object with a 'messages' list"
_ROLES = "system, developer, user, assistant, tool, function"
_TEXT_PART = '{"type": "text", "text": "..."}'


def _message_error(where: str, rest: list, located: list[tuple[list, dict]]) -> tuple[str, str]:
    """``(param, message)`` for the first error of message ``where`` (``rest``: its location
    inside the message)."""
    first = located[0][1]
    got, missing = _kind(first.get("input")), first.get("type") == "missing"
    if not rest:
        return where, (f'{where} must be a message object ({{"role": ..., "content": ...}}), '
                       f"got {got}")
    if rest[0] == "role":
        return f"{where}.role", (f"{where}.role must be one of {_ROLES}; "
                                 + ("it is missing" if missing else f"got {got}"))
    if rest[0] != "content":
        param = f"{where}.{'.'.join(map(str, rest))}"
        return param, f"{first.get('msg', 'invalid value')} ({param})"
    # content: pydantic tried str (input: the content), then list[ContentPart] (a bad part j)
    for loc, error in located:
        if len(loc) >= 5 and isinstance(loc[4], int):
            param = f"{where}.content.{loc[4]}"
            seen = f", got {_kind(error.get('input'))}" if len(loc) == 5 else ""
            return param, f"{param} must be a content part such as {_TEXT_PART}{seen}"
    return f"{where}.content", (f"{where}.content must be a string or a list of text parts "
                                f"({_TEXT_PART}), got {got}")


def _kind(value: Any) -> str:
    """A JSON value's kind, for error messages (``a number (5)``, ``a list``, ...)."""
    if isinstance(value, bool):
        return f"{str(value).lower()} (a boolean)"
    if isinstance(value, int | float):
        return f"a number ({value!r})"
    if isinstance(value, str):
        return f"a string ({value[:40]!r})"
    return {list: "a list", dict: "an object", type(None): "null"}.get(type(value), "a value")
