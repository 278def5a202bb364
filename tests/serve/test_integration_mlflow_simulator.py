"""MLflow's ``ConversationSimulator`` plays its test cases against an agent with the frozen
simulator as the user, through ``mimesis serve`` on the tiny frozen model: the documented
example, run as written. The server ends its episodes after 3 user turns, so the conversations
stop there (the user's end, not MLflow's turn cap), every agent turn is an MLflow trace with
the conversation's session, and what the agent received is exactly the server's utterances,
never their reasoning.
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from test_serve_frozen import frozen_dir, served, served_with_banner  # noqa: F401  (fixtures)

from mimesis.integrations.mlflow_simulator import (
    MimesisConversationSimulator,
    MimesisSimulatedUser,
)

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
USERS: list[MimesisSimulatedUser] = []


class RecordedUser(MimesisSimulatedUser):
    """Keeps every instance, so the test can read each episode's private record."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        USERS.append(self)


def test_the_documented_example_runs_against_mimesis_serve(served, monkeypatch) -> None:  # noqa: F811
    docs = (ROOT / "docs/tracking.md").read_text()
    example = re.search(r"```python\n(# mlflow-simulator-example.*?)```", docs,
                        re.DOTALL).group(1)
    monkeypatch.setenv("MIMESIS_BASE_URL", served)
    # The example sets MIMESIS_API_KEY with setdefault; set here, it is restored after the test
    # (a leaked key makes every later `mimesis serve` of this process's children require it).
    monkeypatch.setenv("MIMESIS_API_KEY", "unused")
    namespace: dict = {}
    exec(compile(example, "docs/tracking.md", "exec"), namespace)  # noqa: S102
    conversations = namespace["traces"]
    assert len(conversations) == 2 and all(conversations)


def test_the_user_ends_the_conversation_and_keeps_its_reasoning(served, monkeypatch) -> None:  # noqa: F811
    monkeypatch.setenv("MIMESIS_API_KEY", "unused")
    received: list[list[dict]] = []

    def predict_fn(messages: list[dict], **kwargs) -> str:
        received.append([dict(m) for m in messages])
        return f"Noted ({len(messages)} messages). What else matters to you?"

    USERS.clear()
    simulator = MimesisConversationSimulator(
        [{"goal": "find a cheap hotel in Lisbon"},
         {"goal": "book a table for four", "persona": "a hurried parent"}],
        max_turns=6, base_url=served, max_tokens=24, seed=7, user_agent_class=RecordedUser)
    conversations = simulator.simulate(predict_fn)
    assert len(conversations) == 2 and len(USERS) == 2
    assert all(u.ended for u in USERS)  # every conversation ended by the simulated user
    assert all(1 <= len(traces) <= 3 for traces in conversations)  # server: --max-turns 3
    for traces in conversations:
        sessions = {t.info.trace_metadata["mlflow.trace.session"] for t in traces}
        assert len(sessions) == 1
    for user in USERS:
        private = httpx.get(f"{served}/ep/{user.episode_id}/private").json()
        said = [t["utterance"] for t in private["turns"]]
        # the agent got every turn the server sent in this episode, as sent, and nothing else
        assert any([m["content"] for m in chat if m["role"] == "user"] == said
                   for chat in received), (said, received)
        for turn in private["turns"]:
            assert "<think>" not in turn["utterance"]
            if turn["reasoning"].strip():
                assert all(turn["reasoning"] not in m["content"] for c in received for m in c)
