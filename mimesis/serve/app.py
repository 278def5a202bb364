"""``mimesis serve``: the frozen user simulator behind an OpenAI-compatible HTTP API.

Endpoints (all JSON; errors are OpenAI-shaped ``{"error": {"message", "type", "param", "code"}}``):

* ``POST /ep/{episode_id}/v1/chat/completions`` — next user turn of an episode (state and private
  reasoning kept server-side). Point an OpenAI client's ``base_url`` at
  ``http://127.0.0.1:8000/ep/<episode_id>/v1``.
* ``POST /v1/chat/completions`` — stateless: next user turn from the request alone.
* ``POST /sim/ep/{episode_id}/v1/chat/completions``, ``POST /sim/v1/chat/completions`` — the
  same in the simulator's view (scenario as the system message, roles flipped; also chosen by
  the body field ``"view": "simulator"``; :mod:`mimesis.serve.schemas`).
* ``GET /ep/{episode_id}/private`` — the episode's reasoning, flags and raw generations.
* ``DELETE /ep/{episode_id}``, ``GET /v1/models``, ``GET /health``, ``GET /stats``.

Request bodies over ``max_body_bytes`` get 413, bodies not received within ``deadline_s`` 408;
requests over a limit of :mod:`mimesis.serve.limits` (messages, characters, scenario,
``max_tokens``, ``n``, streaming), out-of-range numbers and malformed bodies get 400 (the
connection stays open); every 4xx body names the field (``param``) and the limit. A request's
work is cancelled when it runs past ``deadline_s`` (504) or its client leaves
(:mod:`mimesis.serve.deadline`).
Loopback (``127.0.0.1``) by default; any other host needs ``api_key`` (:func:`check_bind`).
Two scopes: ``api_key`` for the agent endpoints, ``private_key`` alone for ``/private``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hmac
import logging
import re
import time
from collections.abc import Awaitable, Mapping
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mimesis.schemas import Scenario
from mimesis.serve.batching import BatchingSimulator
from mimesis.serve.config import ServeConfig, check_bind
from mimesis.serve.deadline import within_deadline
from mimesis.serve.invalid import invalid_request
from mimesis.serve.schemas import APIError, BodyTooLarge, ChatCompletionRequest, PrivateView
from mimesis.serve.service import SimulatorService

log = logging.getLogger("mimesis.serve")
OPEN_PATHS = frozenset({"/health"})
PRIVATE_PATH = re.compile(r"/ep/[^/]*/private/?")


def create_app(simulator: BatchingSimulator, config: ServeConfig | None = None,
               scenarios: Mapping[str, Scenario] | None = None) -> FastAPI:
    """The ASGI app (run it with uvicorn; the lifespan starts and stops the batcher).

    Args:
        simulator: Batched simulator over a backend (its ``max_turns`` is the turn budget).
        config: Limits and defaults (default :class:`ServeConfig`).
        scenarios: Scenarios selectable with ``scenario_id``.
    """
    config = config or ServeConfig()
    service = SimulatorService(simulator, config, scenarios)
    started = int(time.time())

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        await simulator.start()
        try:
            yield
        finally:
            await simulator.stop()

    app = FastAPI(title="mimesis user simulator", lifespan=lifespan, docs_url=None,
                  redoc_url=None, openapi_url=None)
    app.state.service = service
    _install_error_handlers(app)
    app.add_middleware(Gate, max_body_bytes=config.max_body_bytes, api_key=config.api_key,
                       private_key=config.private_key, body_timeout_s=config.deadline_s)
    app.add_middleware(CrashGuard)

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok", "model": config.model_name, "backend": simulator.backend.name,
                "episodes": len(service.store)}

    @app.get("/v1/models")
    async def models() -> dict:
        return {"object": "list", "data": [{"id": config.model_name, "object": "model",
                                            "created": started, "owned_by": "mimesis"}]}

    def bounded(request: Request, work: Awaitable[dict]) -> Awaitable[dict]:
        return within_deadline(work, request.receive, config.deadline_s)

    @app.post("/v1/chat/completions")
    async def stateless(request: Request, body: ChatCompletionRequest) -> dict:
        return await bounded(request, service.stateless(body))

    @app.post("/ep/{episode_id}/v1/chat/completions")
    async def episode(request: Request, episode_id: str, body: ChatCompletionRequest) -> dict:
        return await bounded(request, service.episode(episode_id, body))

    @app.post("/sim/v1/chat/completions")
    async def stateless_sim(request: Request, body: ChatCompletionRequest) -> dict:
        return await bounded(request, service.stateless(body, "simulator"))

    @app.post("/sim/ep/{episode_id}/v1/chat/completions")
    async def episode_sim(request: Request, episode_id: str, body: ChatCompletionRequest) -> dict:
        return await bounded(request, service.episode(episode_id, body, "simulator"))

    @app.get("/ep/{episode_id}/private")
    async def private(episode_id: str) -> PrivateView:
        return service.private(episode_id)

    @app.delete("/ep/{episode_id}")
    async def delete(episode_id: str) -> dict:
        return service.delete(episode_id)

    @app.get("/stats")
    async def stats() -> dict:
        store = service.store
        return {"batching": dataclasses.asdict(simulator.stats),
                "episodes": {"live": len(store), "expired": store.expired,
                             "evicted": store.evicted}}

    return app


class Gate:
    """ASGI middleware: API key scopes and request body limit, before any parsing.

    ``/ep/{id}/private`` needs ``private_key`` (the agents' ``api_key`` is refused there; with
    keys but no ``private_key`` it is closed); every other path but ``/health`` needs
    ``api_key`` when set. The body is read here, up to ``max_body_bytes`` (a larger declared
    ``Content-Length`` is refused without reading) and within ``body_timeout_s`` (a client that
    trickles its body gets 408 instead of holding the request open), and replayed to the app.
    """

    def __init__(self, app: ASGIApp, max_body_bytes: int, api_key: str | None = None,
                 private_key: str | None = None, body_timeout_s: float = 60.0) -> None:
        self.app, self.max_body_bytes = app, max_body_bytes
        self.api_key, self.private_key = api_key, private_key
        self.body_timeout_s = body_timeout_s

    def _refusal(self, path: str, authorization: str) -> APIError | None:
        if path in OPEN_PATHS:
            return None
        if PRIVATE_PATH.fullmatch(path):
            if self.private_key is None:
                if self.api_key is None:
                    return None  # no keys at all: loopback development
                return APIError(403, "/private is closed: the server was started without "
                                "--private-key", param="authorization", code="private_disabled")
            return None if _key_ok(authorization, self.private_key) else APIError(
                401, "/private needs the private key (Authorization: Bearer <private key>)",
                param="authorization", code="invalid_api_key")
        if self.api_key is None or _key_ok(authorization, self.api_key):
            return None
        return APIError(401, "missing or wrong API key (Authorization: Bearer <key>)",
                        param="authorization", code="invalid_api_key")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers", [])}
        refusal = self._refusal(scope["path"], headers.get("authorization", ""))
        if refusal is not None:
            await _error(refusal)(scope, receive, send)
            return
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body_bytes:
            await _error(BodyTooLarge(self.max_body_bytes))(scope, receive, send)
            return
        try:
            async with asyncio.timeout(self.body_timeout_s):
                chunks = await self._read_body(receive)
        except TimeoutError:
            await _error(APIError(408, f"the request body did not arrive within this server's "
                                  f"deadline of {self.body_timeout_s:g} s (mimesis serve "
                                  "--deadline-s)", param="body", code="request_timeout")
                         )(scope, receive, send)
            return
        except BodyTooLarge as err:
            await _error(err)(scope, receive, send)
            return
        if chunks is None:
            return  # client went away
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _read_body(self, receive: Receive) -> list[bytes] | None:
        """The body's chunks (``None``: the client left first).

        Raises:
            BodyTooLarge: more than ``max_body_bytes`` arrived.
        """
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                raise BodyTooLarge(self.max_body_bytes)
            chunks.append(chunk)
            if not message.get("more_body", False):
                return chunks


class CrashGuard:
    """ASGI middleware: an unexpected exception becomes an OpenAI-shaped 500 (``internal_error``,
    naming the exception's type; the traceback goes to the log) and the connection stays open.

    Not ``app.exception_handler(Exception)``: Starlette answers with it and then re-raises, and
    uvicorn closes the connection of a request that raised after its response started, so a
    keep-alive client's next request on that connection failed (``Connection reset by peer``).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except Exception as err:
            if started:
                raise  # half a response went out: only closing the connection is honest
            log.exception("request failed")
            await _error(APIError(500, f"internal error: {type(err).__name__}",
                                  code="internal_error"))(scope, receive, send)


def _key_ok(authorization: str, key: str) -> bool:
    return hmac.compare_digest(authorization.encode(), f"Bearer {key}".encode())


def _error(err: APIError) -> JSONResponse:
    return JSONResponse(err.body.model_dump(), status_code=err.status)


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(APIError)
    async def api_error(_: Request, err: APIError) -> JSONResponse:
        return _error(err)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, err: RequestValidationError) -> JSONResponse:
        errors: list[dict[str, Any]] = list(err.errors())
        if errors and errors[0].get("type") == "json_invalid":
            return _error(APIError(400, "request body is not valid JSON", param="body",
                                   code="invalid_json"))
        return _error(invalid_request(errors))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, err: StarletteHTTPException) -> JSONResponse:
        code, param = {404: ("not_found", "path"), 405: ("method_not_allowed", "method")}.get(
            err.status_code, (None, None))
        return _error(APIError(err.status_code, str(err.detail), param=param, code=code))
    # Any other exception: CrashGuard (500, connection kept).


def run_server(simulator: BatchingSimulator, config: ServeConfig, host: str = "127.0.0.1",
               port: int = 8000, scenarios: Mapping[str, Scenario] | None = None,
               log_level: str = "info") -> None:
    """Serve until interrupted (blocking).

    Raises:
        ValueError: a non-loopback ``host`` without an API key (:func:`check_bind`).
    """
    import uvicorn

    check_bind(host, config)
    uvicorn.run(create_app(simulator, config, scenarios), host=host, port=port,
                log_level=log_level, limit_concurrency=1024, timeout_keep_alive=30)
