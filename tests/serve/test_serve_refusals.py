"""Every refusal ``mimesis serve`` can answer, walked over HTTP: each 4xx body is OpenAI-shaped and
names the field (``param``) and, for a limit, the limit's value."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import httpx
import pytest
from test_serve_api import ScriptedUser
from test_serve_deadline import read_response
from test_serve_limits import CountingBackend, history, serve

from mimesis.serve.config import ServeConfig

SERVE_DIR = Path(__file__).resolve().parents[2] / "mimesis" / "serve"
G = {"scenario": {"goal": "fly to Oslo"}}
CONFIG = ServeConfig(max_body_bytes=8192, max_messages=8, max_message_chars=2000,
                     max_total_chars=3000, max_scenario_chars=60, max_tokens_limit=32,
                     default_max_tokens=16, max_episode_bytes=2048, deadline_s=1.0,
                     default_goal=None)
TALK = [{"role": "assistant", "content": "hi"}]
# (code, method, path, json body, status, the limit its message must name)
CASES = [
    ("invalid_json", "POST", "/v1/chat/completions", b'{"messages": [', 400, None),
    ("invalid_value", "POST", "/v1/chat/completions", {"messages": [], "top_p": 5, **G}, 400,
     None),
    ("request_too_large", "POST", "/v1/chat/completions", {"messages": [{
        "role": "assistant", "content": "x" * 9000}]}, 413, "8192"),
    ("unsupported_parameter", "POST", "/v1/chat/completions", {"messages": [], "n": 2, **G},
     400, "n must be 1"),
    ("max_tokens_too_large", "POST", "/v1/chat/completions", {"messages": [],
                                                              "max_tokens": 64, **G}, 400, "32"),
    ("too_many_messages", "POST", "/v1/chat/completions", {"messages": history(9), **G}, 400,
     "8"),
    ("message_too_long", "POST", "/v1/chat/completions", {"messages": [
        {"role": "assistant", "content": "x" * 2001}], **G}, 400, "2000"),
    ("messages_too_long", "POST", "/v1/chat/completions", {"messages": [
        {"role": "user", "content": "x" * 1600}, {"role": "assistant", "content": "y" * 1600}],
        **G}, 400, "3000"),
    ("scenario_too_long", "POST", "/v1/chat/completions", {"messages": [], "scenario": {
        "goal": "g" * 61}}, 400, "60"),
    ("unsupported_content", "POST", "/v1/chat/completions", {"messages": [{
        "role": "assistant", "content": [{"type": "image_url"}]}], **G}, 400, None),
    ("agent_message_missing", "POST", "/v1/chat/completions", {"messages": [
        {"role": "user", "content": "hello"}], **G}, 400, None),
    ("conflicting_parameters", "POST", "/v1/chat/completions", {
        "messages": [], "scenario_id": "x", **G}, 400, None),
    ("unknown_scenario", "POST", "/v1/chat/completions", {"messages": [], "scenario_id": "x"},
     400, None),
    ("scenario_required", "POST", "/v1/chat/completions", {"messages": []}, 400, None),
    ("invalid_episode_id", "POST", "/ep/bad%20id/v1/chat/completions", {"messages": [], **G},
     400, None),
    ("episode_not_found", "POST", "/ep/never/v1/chat/completions", {"messages": [
        {"role": "user", "content": "hello"}, *TALK], **G}, 404, None),
    ("history_mismatch", "POST", "/ep/started/v1/chat/completions", {"messages": [
        {"role": "user", "content": "not what was said"}, *TALK]}, 409, None),
    ("scenario_mismatch", "POST", "/ep/started/v1/chat/completions", {"messages": [], "scenario": {
        "goal": "another goal"}}, 409, None),
    ("episode_too_large", "POST", "/ep/started/v1/chat/completions", {"messages": [
        {"role": "user", "content": "turn 0"}, {"role": "assistant", "content": "z" * 1900}]},
     400, "2048"),
    ("invalid_body", "POST", "/v1/chat/completions", [{"role": "assistant", "content": "hi"}],
     400, "JSON object with a 'messages' list"),
    ("not_found", "GET", "/nowhere", None, 404, None),
    ("method_not_allowed", "GET", "/v1/chat/completions", None, 405, None),
]
KEYED = [("invalid_api_key", "POST", "/v1/chat/completions", {"messages": [], **G}, 401, None),
         ("private_disabled", "GET", "/ep/x/private", None, 403, None)]
# A prompt budget of 10 words: the system prompt alone is over it.
TIGHT = [("context_length_exceeded", "POST", "/v1/chat/completions", {"messages": [
    {"role": "assistant", "content": "w " * 200}], **G}, 400, "10")]
# Not client refusals: 5xx (server side; tests/serve/test_serve_deadline.py, test_serve_batching.py),
# 499 (logged for a client that left; nobody receives it), 408 (test_serve_deadline.py).
NOT_WALKED = {"internal_error", "generation_failed", "deadline_exceeded",
              "client_closed_request", "request_timeout"}


def _check(http: httpx.Client, case: tuple) -> None:
    code, method, path, body, status, limit = case
    kwargs = ({"content": body, "headers": {"content-type": "application/json"}}
              if isinstance(body, bytes) else {"json": body} if body is not None else {})
    r = http.request(method, path, **kwargs)
    assert r.status_code == status, (code, r.status_code, r.text)
    error = r.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}, code
    assert error["code"] == code and error["type"] == "invalid_request_error"
    assert error["message"] and error["param"], (code, error)
    if limit is not None:
        assert limit in error["message"], (code, error["message"])


def test_every_refusal_names_its_field_and_limit() -> None:
    backend = CountingBackend(ScriptedUser(end_at=99), max_prompt_tokens=100)
    with serve(backend, CONFIG) as base, httpx.Client(base_url=base, timeout=30) as http:
        opened = http.post("/ep/started/v1/chat/completions", json={"messages": [], **G})
        assert opened.status_code == 200
        for case in CASES:
            _check(http, case)
    with serve(backend, ServeConfig(api_key="k")) as base, httpx.Client(base_url=base) as http:
        for case in KEYED:
            _check(http, case)
    tight = CountingBackend(ScriptedUser(end_at=99), max_prompt_tokens=10)
    with serve(tight, CONFIG) as base, httpx.Client(base_url=base) as http:
        for case in TIGHT:
            _check(http, case)


def test_the_walk_covers_every_refusal_code_in_the_server() -> None:
    source = "\n".join(p.read_text() for p in SERVE_DIR.glob("*.py"))
    codes = set(re.findall(r'code="([a-z_]+)"', source)) | {"not_found", "method_not_allowed"}
    walked = {case[0] for case in CASES + KEYED + TIGHT}
    assert codes - walked - NOT_WALKED == set()
    assert walked <= codes


def test_a_slow_body_gets_a_named_408() -> None:
    with serve(CountingBackend(ScriptedUser()), ServeConfig(deadline_s=0.3)) as base:
        host, port = base.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                         b"Content-Length: 50\r\n\r\n{")
            reply = read_response(sock)
    assert " 408 " in reply.split("\r\n")[0] and '"param":"body"' in reply
    assert "0.3 s" in reply


@pytest.mark.parametrize("option", ["max_messages", "max_message_chars", "max_total_chars",
                                    "max_scenario_chars", "deadline_s", "max_tokens_limit",
                                    "max_body_bytes"])
def test_serve_options_default_to_the_config(option) -> None:
    import inspect

    from mimesis.cli import serve as serve_command

    assert inspect.signature(serve_command).parameters[option].default == getattr(
        ServeConfig(), option)


HI = {"role": "user", "content": "I need a flight"}
# (body, status, code, param, words the message must hold)
WORDED = [
    ([HI], 400, "invalid_body", "body", ["JSON object with a 'messages' list", "got a list"]),
    ("fly me to Oslo", 400, "invalid_body", "body", ["JSON object", "got a string"]),
    ({"messages": "hi"}, 400, "invalid_body", "messages", ["'messages' list", "a string"]),
    ({"messages": [HI, {"role": "assistant", "content": 42}], **G}, 400, "invalid_value",
     "messages.1.content", ["messages.1.content must be a string or a list of text parts",
                            "got a number (42)"]),
    ({"messages": [{"role": "assistant", "content": {"text": "hi"}}], **G}, 400,
     "invalid_value", "messages.0.content", ["messages.0.content", "got an object"]),
    ({"messages": [HI, {"role": "assistant", "content": [7]}], **G}, 400, "invalid_value",
     "messages.1.content.0", ["messages.1.content.0 must be a content part", "a number (7)"]),
    ({"messages": [{"role": "assistant", "content": [{"type": "image_url", "image_url": {
        "url": "https://x/y.png"}}]}], **G}, 400, "unsupported_content", "messages.0.content.0",
     ["messages.0.content.0", "'image_url'", "text only"]),
    ({"messages": [{"role": "assistant", "content": [{"type": "text"}]}], **G}, 400,
     "invalid_value", "messages.0.content.0", ["messages.0.content.0", '"text" string']),
    ({"messages": [{"role": "robot", "content": "hi"}], **G}, 400, "invalid_value",
     "messages.0.role", ["messages.0.role must be one of system, developer, user, assistant",
                         "'robot'"]),
    ({"messages": [{"content": "hi"}], **G}, 400, "invalid_value", "messages.0.role",
     ["messages.0.role", "missing"]),
]


def test_malformed_bodies_and_messages_are_refused_in_our_own_words() -> None:
    with serve(CountingBackend(ScriptedUser()), CONFIG) as base, httpx.Client(
            base_url=base, timeout=30) as http:
        for body, status, code, param, words in WORDED:
            r = http.post("/v1/chat/completions", json=body)
            assert r.status_code == status, (body, r.text)
            error = r.json()["error"]
            assert (error["code"], error["param"]) == (code, param), (body, error)
            assert all(w in error["message"] for w in words), (body, error["message"])
            assert "Input should" not in error["message"]  # pydantic's wording stays inside
        parts = http.post("/v1/chat/completions", json={"messages": [HI, {
            "role": "assistant", "content": [{"type": "text", "text": "Which day?"}]}], **G})
        assert parts.status_code == 200, parts.text  # text parts are the OpenAI format


def test_another_scenario_in_an_episode_says_to_start_a_new_episode_id() -> None:
    with serve(CountingBackend(ScriptedUser()), CONFIG) as base, httpx.Client(
            base_url=base, timeout=30) as http:
        assert http.post("/ep/trip/v1/chat/completions", json={
            "messages": [], **G}).status_code == 200
        r = http.post("/ep/trip/v1/chat/completions", json={
            "messages": [], "scenario": {"goal": "rent a car in Rome"}})
    assert r.status_code == 409 and r.json()["error"]["code"] == "scenario_mismatch"
    assert "start a new episode id" in r.json()["error"]["message"]
