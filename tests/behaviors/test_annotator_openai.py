"""The OpenAI-compatible annotator backend against a local HTTP stub (no network)."""

from __future__ import annotations

import pytest

from mimesis.behaviors.annotator import (
    Annotator,
    AnnotatorParams,
    ConversationView,
    TurnView,
    make_annotator,
)
from mimesis.behaviors.backends import AnnotatorError, OpenAIBackend
from mimesis.behaviors.fallbacks import FALLBACK

KEY_ENV = "MIMESIS_TEST_ANNOTATOR_KEY"


@pytest.fixture
def stub(openai_stub, monkeypatch):
    server, url = openai_stub
    server.reply = lambda body: "I want the report in plain words."
    monkeypatch.setenv(KEY_ENV, "sk-test")
    return server, url


def params(base_url: str, **kw) -> AnnotatorParams:
    return AnnotatorParams(backend="openai", model="stub-model", base_url=base_url,
                           api_key_env=KEY_ENV, timeout_s=5, max_retries=0, concurrency=2, **kw)


def test_reasoning_through_the_endpoint(stub):
    server, url = stub
    ann = make_annotator(params(url, reasoning_max_new_tokens=11))
    assert ann.producer == "annotator:openai:stub-model"
    turns = [TurnView(utterance="summarise the quarterly report", first=True)] * 3
    out = ann.reasonings(turns)
    assert [o.text for o in out] == ["I want the report in plain words."] * 3
    assert {o.producer for o in out} == {"annotator:openai:stub-model"}
    body = server.requests[0]
    assert body["model"] == "stub-model" and body["max_tokens"] == 11
    assert body["messages"][-1]["role"] == "user"
    assert "summarise the quarterly report" in body["messages"][-1]["content"]
    assert server.headers[0]["authorization"] == "Bearer sk-test"


def test_goal_copied_by_the_endpoint_is_replaced(stub):
    server, url = stub
    first = "Plan a three day trip to Lisbon with museums and cheap food"
    server.reply = lambda body: "You want " + first.lower()
    [goal] = make_annotator(params(url)).goals([ConversationView(user_turns=(first,))])
    assert goal.producer == FALLBACK and first.lower() not in goal.text.lower()


def test_missing_key_is_a_clear_error(monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    with pytest.raises(AnnotatorError, match=KEY_ENV):
        make_annotator(params("http://127.0.0.1:9/v1"))


def test_auth_failure_raises_with_endpoint_in_message(stub):
    server, url = stub
    server.status = 401
    ann = make_annotator(params(url))
    with pytest.raises(AnnotatorError, match="AuthenticationError") as info:
        ann.reasonings([TurnView(utterance="hi there friend")])
    assert url in str(info.value)


def test_rejected_prompt_falls_back_and_records_it(stub):
    server, url = stub
    server.status = 400
    [out] = make_annotator(params(url)).reasonings([TurnView(utterance="hi there", first=True)])
    assert out.producer == FALLBACK and out.text.startswith("I ")


def test_server_errors_are_retried(stub):
    server, url = stub
    server.fail_first = 1
    backend = OpenAIBackend(url, "stub-model", KEY_ENV, timeout_s=5, max_retries=1,
                            concurrency=1, temperature=0.0)
    [out] = Annotator(backend, params(url)).reasonings([TurnView(utterance="report", first=True)])
    assert out.text == "I want the report in plain words." and len(server.requests) == 2


def test_unreachable_endpoint_raises(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test")
    ann = make_annotator(params("http://127.0.0.1:9/v1"))
    with pytest.raises(AnnotatorError, match="APIConnectionError"):
        ann.reasonings([TurnView(utterance="hi")])
