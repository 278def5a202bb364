"""The pluggable training user: an OpenAI-compatible endpoint (loopback stub) and the prompted
base model behind the same runtime as the frozen simulator — reasoning stripped before the
agent sees it, the end signal ending the episode."""

from __future__ import annotations

from pathlib import Path

import pytest

from mimesis.rl.agent_training import AgentRLParams
from mimesis.stages.train_agent import arm_user
from mimesis.users.chat import PromptedUser, UserEndpointError
from mimesis.users.factory import describe
from mimesis.users.frozen import FrozenUser
from mimesis.users.spec import UserSamplingParams, UserSpec, parse_arms


def _frozen(meta: dict | None = None) -> FrozenUser:
    from mimesis.simulator.runtime import UserSimulator

    return FrozenUser(UserSimulator(lambda batch: ["hi"] * len(batch)), None, None,
                      {"base_model": "tiny-llama"} if meta is None else meta, "f" * 64, Path("."))


def _params(**kw) -> AgentRLParams:
    return AgentRLParams(envs=["FunctionGym"], max_turns=3, user=UserSamplingParams(
        max_new_tokens=8), **kw)


def _agent():
    from mimesis.models.base import load_base
    from mimesis.models.engine.sampling import SamplingParams, TokenSampler

    model, tok = load_base("tiny-llama")
    return TokenSampler(model, tok, SamplingParams(max_new_tokens=6), seed=0), tok


def test_openai_endpoint_user_trains_behind_the_runtime(openai_stub, monkeypatch):
    from mimesis.rollout.engine import RolloutEngine
    from mimesis.rollout.records import RolloutParams, ScenarioSpec

    stub, url = openai_stub
    monkeypatch.setenv("MIMESIS_TEST_KEY", "secret")
    def reply(body):  # the simulator's view: its own earlier turns are `assistant`
        if any(m["role"] == "assistant" for m in body["messages"]):
            return "<|end_conversation|>"
        return "<think>I only want the value, my rule is hidden</think>f = 12"

    stub.reply = reply
    arm = UserSpec(name="grpo-served", kind="openai", model="mimesis-user-simulator",
                   prompt_style="user_simulator", base_url=url, api_key_env="MIMESIS_TEST_KEY")
    simulator = arm_user(arm, _frozen(), _params())
    agent, tok = _agent()
    engine = RolloutEngine(agent, tok, simulator, RolloutParams(
        group_size=1, max_concurrent=2, max_turns=3, max_new_tokens=6), progress=False)
    episodes = engine.play([(ScenarioSpec(env="FunctionGym", seed=s), s) for s in (1, 2)])
    assert len(stub.requests) >= 2
    first = stub.requests[0]
    assert first["model"] == "mimesis-user-simulator"
    system = first["messages"][0]
    assert system["role"] == "system" and "secret rule" in system["content"]  # the scenario
    assert stub.headers[0]["authorization"] == "Bearer secret"
    for ep in episodes:
        user_turns = [t for t in ep.turns if t.obs_source == "user"]
        assert user_turns and user_turns[0].obs == "f = 12"  # reasoning stripped
        assert "rule is hidden" in user_turns[0].user_reasoning  # and kept privately
        assert all("rule is hidden" not in m["content"] for m in ep.messages)  # not in its chat
    # the end signal ends the episode (the agent's untagged messages all go to the user)
    assert [ep.termination for ep in episodes] == ["user_end", "user_end"]


def test_prompted_user_is_the_simulators_base_model_with_the_baseline_prompt():
    from mimesis.schemas import Scenario
    from mimesis.simulator.baseline import render_prompted_system_prompt

    sim = arm_user(UserSpec(name="grpo-prompted", kind="prompted"), _frozen(), _params())
    assert isinstance(sim.generate_fn, PromptedUser)
    assert sim.generate_fn.config.model == "tiny-llama"  # the frozen simulator's base
    state = sim.init_state(Scenario(goal="Book a cheap flight to Lisbon", annotator="hand"))
    assert state.system_prompt == render_prompted_system_prompt(state.scenario)
    reply, state = sim.next_message(None, state)
    assert isinstance(reply, str) and sim.generate_fn.model is not None
    assert describe(UserSpec(name="grpo-prompted", kind="prompted"), _frozen()) == {
        "kind": "prompted", "model": "tiny-llama", "prompt_style": "prompted_user"}


def test_frozen_arm_is_the_frozen_runtime_and_bad_arms_are_refused():
    frozen = _frozen()
    assert arm_user(UserSpec(name="grpo"), frozen, _params()) is frozen.simulator
    with pytest.raises(ValueError, match="unknown keys"):
        parse_arms([{"name": "a", "usr": "frozen"}])
    with pytest.raises(ValueError, match="no model"):
        arm_user(UserSpec(name="p", kind="prompted"), _frozen({}), _params())

    with pytest.raises(UserEndpointError, match="NO_SUCH_KEY"):
        arm_user(UserSpec(name="o", kind="openai", model="m", api_key_env="NO_SUCH_KEY"),
                 frozen, _params())
