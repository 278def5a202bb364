"""A request's work ends when its deadline passes or its client leaves, whichever comes first.

The work of a chat-completions request (queueing in the batcher, fitting, generating) runs as an
asyncio task. Cancelling that task cancels the batcher's future of the request, and the batcher
then drops the request, or stops its running generation between decode steps
(:mod:`mimesis.serve.batching`), so the core is free for the next batch instead of finishing
work nobody will read.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TypeVar

from starlette.types import Receive

from mimesis.serve.schemas import APIError

log = logging.getLogger("mimesis.serve")
T = TypeVar("T")
CLIENT_CLOSED = 499
"""Status logged for a request whose client left (nginx's convention; nobody receives it)."""


async def client_gone(receive: Receive) -> None:
    """Return once the client disconnects (call after the body was read).

    After the body, the server's ``receive`` blocks until the connection is lost (or the
    response is complete) and then yields ``http.disconnect``.
    """
    while (await receive())["type"] != "http.disconnect":
        pass


async def within_deadline(work: Awaitable[T], receive: Receive, deadline_s: float) -> T:
    """``await work``, cancelled after ``deadline_s`` seconds or when the client disconnects.

    Args:
        work: The request's work (a coroutine).
        receive: The request's ASGI ``receive``, its body already read.
        deadline_s: Seconds the work may take.

    Returns:
        What ``work`` returns (its exceptions propagate).

    Raises:
        APIError: 504 ``deadline_exceeded`` naming the deadline; 499 ``client_closed_request``
            when the client left first (the response goes nowhere; the status is for the log).
    """
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(client_gone(receive))
    try:
        await asyncio.wait({task, gone}, timeout=deadline_s,
                           return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not task.done():
            task.cancel()
            # The cancellation reaches the batcher's future right away; no need to wait longer.
            await asyncio.gather(task, return_exceptions=True)
    if not task.cancelled():
        return task.result()
    if gone.done() and not gone.cancelled():
        log.info("client left; its request's work was cancelled")
        raise APIError(CLIENT_CLOSED, "the client closed the connection; the request's work was "
                       "cancelled", code="client_closed_request")
    raise APIError(504, f"the request took longer than this server's deadline of {deadline_s:g} "
                   "s (mimesis serve --deadline-s); its generation was cancelled",
                   code="deadline_exceeded")
