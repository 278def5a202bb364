"""The rollout engine against scripted fakes: masks, batching, refilling, truncation.

The fake agent picks its reply from the episode's opening message and its turn number only, and
the fake user model from its view, so an episode plays the same whatever batch it is in: the
batched and sequential paths must then give identical records.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace

import pytest
from transformers import AutoTokenizer

from mimesis.envs import make
from mimesis.models.base import base_dir
from mimesis.models.engine.sampling import Sample
from mimesis.models.engine.tokens import Transcript, encode
from mimesis.rollout.engine import (
    LiveEpisode,
    RolloutEngine,
    enforce_token_budget,
    turns_left_note,
)
from mimesis.rollout.records import Episode, RolloutParams, ScenarioSpec
from mimesis.schemas import Scenario
from mimesis.simulator.runtime import UserSimulator

REPLIES = ["The suburbs, ideally.", "Under 250 dollars per night works for me.",
           "Free parking would be great.", "Honestly any of those sounds good to me."]


@pytest.fixture(scope="module")
def tok():
    return AutoTokenizer.from_pretrained(base_dir("tiny-llama"))


class ScriptedAgent:
    """Token-level fake policy: ``script(opening, turn) -> text``; logs every call."""

    def __init__(self, tok, script: Callable[[str, int], str]) -> None:
        self.tok, self.script = tok, script
        self.calls: list[list[tuple[str, int]]] = []
        self.sampled: dict[tuple[str, int], list[int]] = {}

    def __call__(self, prompts, limits) -> list[Sample]:
        batch, out = [], []
        for prompt, limit in zip(prompts, limits, strict=True):
            text = self.tok.decode(prompt, skip_special_tokens=False)
            opening = text.split("<|im_start|>user\n", 1)[1].split("<|im_end|>", 1)[0]
            turn = text.count("<|im_start|>assistant") - 1
            ids = (encode(self.tok, self.script(opening, turn)) + [self.tok.eos_token_id])[:limit]
            self.sampled[(opening, turn)] = ids
            batch.append((opening, turn))
            out.append(Sample(ids, [-0.25 - 0.01 * j for j in range(len(ids))]))
        self.calls.append(batch)
        return out


class FakeUserModel:
    """``generate_fn`` of the simulator: reasoning + a reply chosen by the user turn number."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def __call__(self, views: list[list[dict[str, str]]]) -> list[str]:
        self.calls.append(len(views))
        return [f"<think>secret plan {len(v)}</think>\n{REPLIES[(len(v) - 2) // 2 % 4]}"
                for v in views]


def opening(env: str, seed: int, max_turns: int = 3) -> str:
    return make(env, max_turns=max_turns).reset(seed=seed)[0]


def engine(tok, agent, user_model, **params) -> RolloutEngine:
    sim = UserSimulator(user_model, max_turns=8)
    return RolloutEngine(agent, tok, sim, RolloutParams(**params), progress=False)


def travel_plans() -> dict[str, list[str]]:
    """Seed 1 stops at once, seed 2 talks until the turn limit, seed 3 searches then finishes."""
    return {opening("TravelGym", 1): ["[finish]"],
            opening("TravelGym", 2): ["[action] Which area do you prefer?",
                                      "[action] What is your budget?", "[action] Parking?"],
            opening("TravelGym", 3): ["[search] restaurant", "[action] Any cuisine you like?",
                                      "[finish]"]}


def by_plan(plans: dict[str, list[str]]) -> Callable[[str, int], str]:
    return lambda first, turn: plans[first][turn]


def segments(e: Episode) -> list[tuple[int, list[int]]]:
    """Maximal runs of equal mask: ``[(mask, ids), …]``."""
    runs: list[tuple[int, list[int]]] = []
    for token, m in zip(e.completion_ids, e.env_mask, strict=True):
        if runs and runs[-1][0] == m:
            runs[-1][1].append(token)
        else:
            runs.append((m, [token]))
    return runs


def test_masks_on_a_multi_turn_episode(tok) -> None:
    env = make("FunctionGym", max_turns=3)
    env.reset(seed=1)
    script = ["[search] test", "[action] What is f(1, 2, 3, 4)?", f"[answer] {env.task.expected:g}"]
    agent, user_model = ScriptedAgent(tok, lambda _, turn: script[turn]), FakeUserModel()
    [e] = engine(tok, agent, user_model, group_size=1, max_turns=3).run(
        [ScenarioSpec(env="FunctionGym", seed=1)])
    assert (e.termination, e.reward, e.truncated) == ("answer", 1.0, False)
    runs = segments(e)
    assert [m for m, _ in runs] == [1, 0, 1, 0, 1]
    # Agent tokens are exactly the sampled ids, turn by turn, with their log-probs.
    sampled = [ids for (_, turn), ids in sorted(agent.sampled.items(), key=lambda kv: kv[0][1])]
    assert [ids for m, ids in runs if m == 1] == sampled
    assert all((lp < 0) == (m == 1) for lp, m in zip(e.logprobs, e.env_mask, strict=True))
    assert [len(t) for t in (e.env_mask, e.logprobs, e.turn_ids)] == [len(e.completion_ids)] * 3
    n = [len(ids) for _, ids in runs]
    assert e.turn_ids == [0] * (n[0] + n[1]) + [1] * (n[2] + n[3]) + [2] * n[4]
    # Injected tokens: the tool result, then the user's reply; the reasoning stays private.
    tool_text, user_text = (tok.decode(ids) for m, ids in runs if m == 0)
    assert "<|im_start|>tool\nTest case: a=9, b=3, c=5, d=7" in tool_text
    assert f"<|im_start|>user\n{REPLIES[0]}{turns_left_note(1)}<|im_end|>" in user_text
    assert "secret plan" not in tok.decode(e.prompt_ids + e.completion_ids)
    assert [t.user_reasoning for t in e.turns] == [None, "secret plan 2", None]
    # The full sequence is the template's rendering of the whole conversation.
    full = tok.apply_chat_template(e.messages, tokenize=True)["input_ids"]
    assert full[:len(e.prompt_ids) + len(e.completion_ids)] == e.prompt_ids + e.completion_ids
    assert tok.decode(full[len(e.prompt_ids) + len(e.completion_ids):]) == "\n"
    assert e.prompt_ids == tok.apply_chat_template(
        e.messages[:1], tokenize=True, add_generation_prompt=True)["input_ids"]


def test_one_call_per_step_serves_every_waiting_episode_and_slots_refill(tok) -> None:
    agent, user_model = ScriptedAgent(tok, by_plan(travel_plans())), FakeUserModel()
    eng = engine(tok, agent, user_model, group_size=2, max_concurrent=4, max_turns=3)
    specs = [ScenarioSpec(env="TravelGym", seed=s) for s in (1, 2, 3)]
    records = eng.run(specs)
    assert [len(c) for c in agent.calls] == eng.stats.agent_batches == [4, 4, 4, 2]
    assert user_model.calls == eng.stats.user_batches == [2, 2, 2]
    assert sum(eng.stats.agent_batches) == sum(len(e.turns) for e in records)
    # Call 2: the two seed-1 episodes ended after one turn; the queued seed-3 episodes took their
    # slots and share the call with the seed-2 episodes' second turn.
    plans = list(travel_plans())
    assert sorted(agent.calls[1]) == sorted([(plans[1], 1)] * 2 + [(plans[2], 0)] * 2)
    assert [e.group_id for e in records] == [0, 0, 1, 1, 2, 2]
    assert [e.index for e in records] == list(range(6))
    assert [e.termination for e in records] == ["finish"] * 2 + ["max_turns"] * 2 + ["finish"] * 2
    ids = [e.scenario_id for e in records]
    assert ids[0::2] == ids[1::2] and len(set(ids)) == 3

    seq = eng.sequential()
    agent.calls.clear()
    user_model.calls.clear()
    assert [r.model_dump() for r in seq.run(specs)] == [r.model_dump() for r in records]
    assert set(seq.stats.agent_batches) == {1} and set(user_model.calls) == {1}
    assert len(seq.stats.agent_batches) == sum(len(e.turns) for e in records)


@pytest.mark.parametrize("budget", [9, 24, 40, 57])
def test_truncation_is_the_same_in_batched_and_sequential_paths(tok, budget: int) -> None:
    agent, user_model = ScriptedAgent(tok, by_plan(travel_plans())), FakeUserModel()
    specs = [ScenarioSpec(env="TravelGym", seed=s) for s in (1, 2, 3)]
    batched = engine(tok, agent, user_model, group_size=2, max_concurrent=6, max_turns=3,
                     max_completion_tokens=budget)
    records = batched.run(specs)
    sequential = batched.sequential().run(specs)
    assert [r.model_dump() for r in sequential] == [r.model_dump() for r in records]
    cut = [e for e in records if e.termination == "max_tokens"]
    assert cut, "the budget should cut some episode"
    for e in records:
        assert len(e.completion_ids) <= budget
    for e in cut:
        assert len(e.completion_ids) == budget and e.truncated and e.reward == 0.0
        last_turn_cut = e.env_mask[-1] == 1
        # A turn the budget cut never reached the env: its record has no action kind.
        assert (e.turns[-1].kind is None) == last_turn_cut


def test_budget_rule_scores_the_episode_as_it_stands(tok) -> None:
    transcript = Transcript.start(tok, [{"role": "user", "content": "hi"}])
    ids = encode(tok, "[action] one two three four five")
    transcript.add_agent(ids, [-1.0] * len(ids))
    env = SimpleNamespace(score=lambda: 0.25)
    scenario = Scenario(goal="find the rule", annotator="test")
    info = {"env": "FakeGym", "task_id": "t1", "scenario": scenario}
    user = UserSimulator(FakeUserModel()).init_state(scenario)
    live = LiveEpisode(0, ScenarioSpec(env="FakeGym", seed=0), 3, env, info, user, transcript)
    assert not enforce_token_budget(live, len(transcript.completion_ids) + 1)
    assert enforce_token_budget(live, 4)
    e = live.record
    assert (e.termination, e.truncated, e.reward, e.completion_ids) == (
        "max_tokens", True, 0.25, transcript.completion_ids)
    assert len(e.completion_ids) == 4 and live.phase == "done"
    assert not enforce_token_budget(live, 2)  # an ended episode is never cut again
