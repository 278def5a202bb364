"""tau2-bench's own ``Orchestrator`` runs real airline/retail tasks with :class:`MimesisUser` as the
user: the end of our episode reaches tau2 as ``###STOP###`` (``USER_STOP``), and no private
reasoning is stored in tau2's messages (it stays on the user for audits).

Offline: tau2's shipped task files, a scripted agent, and either the tiny frozen simulator folder
(random weights: its episodes end on the turn budget) or a scripted ``generate_fn`` that writes a
recognisable secret into its reasoning and ends with ``<|end_conversation|>``.
"""

from __future__ import annotations

import pytest

from mimesis.integrations.tau2 import STOP, USER_NAME, MimesisUser
from mimesis.simulator.runtime import UserSimulator
from tests.serve.test_serve_api import ScriptedUser, live_server
from tests.serve.test_serve_frozen import build_frozen_tiny

# isort: split
# After mimesis.integrations.tau2, which makes tau2's orchestrator importable without litellm.
from tau2.agent.base import LocalAgent
from tau2.data_model.message import AssistantMessage, ToolCall
from tau2.data_model.simulation import TerminationReason
from tau2.orchestrator.orchestrator import Orchestrator
from tau2.registry import registry

SECRET = "SECRET-REASONING"


class ScriptedAgent(LocalAgent):
    """Calls tau2's ``calculate`` tool once, then answers every user message politely."""

    def get_init_state(self, message_history=None) -> dict:
        return {"n": 0}

    def generate_next_message(self, message, state):
        state["n"] += 1
        if state["n"] == 1:
            call = ToolCall(id="c1", name="calculate", arguments={"expression": "2 + 2"})
            return AssistantMessage(role="assistant", tool_calls=[call], cost=0.0), state
        return AssistantMessage(role="assistant", content=f"Understood (step {state['n']}). "
                                "Could you tell me more?", cost=0.0), state


OPENINGS = ["Hi, I want to cancel my reservation EHGLP3.", "My user id is emma_kim_9957."]


def secret_user(views: list[list[dict[str, str]]]) -> list[str]:
    """Two turns with a secret in the reasoning, then the end signal."""
    out = []
    for view in views:
        n = sum(m["role"] == "assistant" for m in view)
        out.append(f"<think>{SECRET} {n}: I will stop now</think>\n<|end_conversation|>" if n >= 2
                   else f"<think>{SECRET} {n}</think>\n{OPENINGS[n]}")
    return out


def run_task(domain: str, index: int, user: MimesisUser):
    environment = registry.get_env_constructor(domain)()
    task = registry.get_tasks_loader(domain)()[index]
    agent = ScriptedAgent(tools=environment.get_tools(), domain_policy=environment.get_policy())
    orchestrator = Orchestrator(domain=domain, agent=agent, user=user, environment=environment,
                                task=task, max_steps=40, seed=7)
    return orchestrator.run(), orchestrator


def assert_no_reasoning(run, user: MimesisUser) -> None:
    stored = [m.model_dump_json() for m in run.messages]
    assert not any("<think>" in s or "</think>" in s or SECRET in s for s in stored)
    assert not any(t.reasoning and t.reasoning in s for t in user.turns for s in stored)


def test_tau2_lists_the_mimesis_user() -> None:
    assert registry.get_user_constructor(USER_NAME) is MimesisUser


def test_stop_is_honoured_and_reasoning_is_kept_out_of_tau2() -> None:
    user = MimesisUser(instructions="Cancel reservation EHGLP3.",
                       simulator=UserSimulator(secret_user, max_turns=8))
    run, _ = run_task("airline", 0, user)
    assert run.termination_reason == TerminationReason.USER_STOP
    user_msgs = [m for m in run.messages if m.role == "user"]
    assert [m.content for m in user_msgs] == [*OPENINGS, STOP]
    assert any(m.role == "tool" for m in run.messages)  # the orchestrator ran the agent's tool
    assert_no_reasoning(run, user)
    assert [t.reasoning for t in user.turns][:2] == [f"{SECRET} 0", f"{SECRET} 1"]
    assert user.turns[-1].ended and user.turns[-1].end_reason == "end_signal"


@pytest.mark.slow
@pytest.mark.parametrize(("domain", "index"), [("airline", 1), ("retail", 0)])
def test_frozen_tiny_simulator_completes_tau2_tasks(tmp_path, domain, index) -> None:
    sim_dir = build_frozen_tiny(tmp_path / "simulator")
    constructor = registry.get_user_constructor(USER_NAME)
    task = registry.get_tasks_loader(domain)()[index]
    user = constructor(instructions=str(task.user_scenario), llm=str(sim_dir),
                       llm_args={"max_turns": 2, "max_new_tokens": 12})
    run, _ = run_task(domain, index, user)
    assert run.termination_reason == TerminationReason.USER_STOP
    assert run.messages[-1].role == "user" and run.messages[-1].content == STOP
    assert user.turns[-1].ended and user.turns[-1].end_reason is not None
    assert_no_reasoning(run, user)


def test_served_simulator_behind_tau2(monkeypatch) -> None:
    monkeypatch.setenv("MIMESIS_API_KEY", "unused")
    with live_server(ScriptedUser(end_at=2)) as base:
        user = MimesisUser(instructions="Return an order.", llm=base, llm_args={"seed": 1})
        run, orchestrator = run_task("retail", 0, user)
        assert run.termination_reason == TerminationReason.USER_STOP
        assert [m.content for m in run.messages if m.role == "user"] == [
            "turn 0", "turn 1", STOP]
        stored = " ".join(m.model_dump_json() for m in run.messages)
        assert "secret" not in stored and "<think>" not in stored
        record = user.fetch_private(orchestrator.user_state)  # audit: the server kept it
        assert record["ended"] and record["end_reason"] == "end_signal"
        assert [t.reasoning for t in user.turns][:2] == [
            f"secret about {user.scenario.goal.splitlines()[0]} #{n}" for n in (0, 1)]
