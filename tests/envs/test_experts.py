"""Scripted experts (mimesis.rl.experts): each reaches its env's success threshold with a
cooperative user, survives a user who reveals nothing, acts only on what an agent sees, and
plays through the rollout engine with the token layout of a sampled rollout."""

from __future__ import annotations

import dataclasses
import re

import pytest
from transformers import AutoTokenizer

from mimesis.envs import make
from mimesis.envs.function.rules import evaluate_rule, format_number
from mimesis.envs.registry import success_threshold, task_indices
from mimesis.envs.travel.gym import preference_text
from mimesis.envs.travel.tasks import PRICE, kind_label
from mimesis.models.base import base_dir
from mimesis.models.engine.sampling import Sample
from mimesis.models.engine.tokens import encode, render
from mimesis.rl.experts import ExpertPolicy, experts
from mimesis.rollout.engine import AgentView, RolloutEngine, ViewTurn, policy_turn_ids
from mimesis.rollout.records import RolloutParams, ScenarioSpec
from mimesis.simulator.runtime import UserSimulator


# ----------------------------------------------------------------------- scripted users
# These play the *user*: they read the hidden task, as a cooperative person would answer.
def function_user(task, message: str) -> str:
    out = [f"f({m.group(1)}) = "
           f"{format_number(evaluate_rule(task.rule, [float(v) for v in m.group(1).split(',')]))}"
           for m in re.finditer(r"f\(([^)]*)\)", message)]
    return ", ".join(out) or "Please give four numbers."


def _asked_preferences(task, message: str) -> list[str]:
    """The preferences ``message`` asks about (an open question: those that are not hidden)."""
    low, out = message.lower(), []
    for a in task.aspects:
        for p in a.preferences:
            key = "budget" if p.attr == PRICE else p.attr
            open_question = kind_label(a.kind) in low and "matters" in low and not p.hidden
            if open_question or key in low:
                out.append(preference_text(a.kind, p))
    return out


def travel_user(task, message: str) -> str:
    out = _asked_preferences(task, message)
    return "; ".join(out) + "." if out else "No strong preference."


def turtle_user(task, message: str, said: list[str]) -> str:
    facts = [f.text for f in task.key_facts if f.text not in said]
    return f"Yes. {facts[0]}" if facts else "Irrelevant."


def persuade_user(task, message: str) -> str:
    if "1 to 7" not in message:
        return "I have my reasons."
    return f"Fair point. My stance: {7 if task.direction == 'agree' else 1}/7"


def tau_user(task, message: str) -> str:
    if "yes/no" in message:
        return "Yes, please."
    ins = task.task.user_scenario.instructions
    text = " ".join(str(x) for x in (ins.known_info, ins.reason_for_call) if x)
    for a, b in ((r"\b[Yy]ou are\b", "I am"), (r"\b[Yy]our\b", "my"), (r"\b[Yy]ou\b", "I")):
        text = re.sub(a, b, text)
    return text


def silent_user(task, message: str) -> str:
    return "I don't know."


def play(env, user, seed: int = 0, options: dict | None = None, expert=None):
    """One episode of ``env`` by its expert (views built as the engine builds them)."""
    expert = expert or experts()[env.name]()
    prompt, _ = env.reset(seed=seed, options=options)
    turns: list[ViewTurn] = []
    said: list[str] = []
    while True:
        message = expert.act(AgentView(env.name, prompt, env.max_turns, tuple(turns)))
        obs, reward, terminated, truncated, info = env.step(message)
        source = info["obs_source"]
        if info["to_user"] is not None:
            reply = (user(env.task, info["to_user"], said) if user is turtle_user
                     else user(env.task, info["to_user"]))
            said.append(reply.removeprefix("Yes. "))
            obs, reward, terminated, truncated, info = env.observe_user(reply)
            source = "user"
        turns.append(ViewTurn(message, source, obs))
        if terminated or truncated:
            return reward, [t.agent for t in turns], info


def _training_indices(env_name: str, n: int) -> list[int]:
    return task_indices(len(make(env_name).tasks), "train")[:n]


# ----------------------------------------------------------------------- competence
@pytest.mark.parametrize("max_turns", [3, 8])
def test_function_expert_fits_the_rule_from_the_users_values(max_turns):
    env = make("FunctionGym", max_turns=max_turns)
    for seed in range(6):
        reward, messages, info = play(env, function_user, seed)
        assert reward >= success_threshold("FunctionGym"), (seed, messages)
        assert messages[0] == "[search] test" and info["outcome"] == "answered"


@pytest.mark.parametrize("max_turns", [3, 10])
def test_travel_expert_picks_the_best_option_from_stated_preferences(max_turns):
    env = make("TravelGym", max_turns=max_turns)
    for seed in range(6):
        reward, messages, _ = play(env, travel_user, seed)
        assert reward >= success_threshold("TravelGym"), (seed, messages)


def one_at_a_time_user(task, message: str) -> str:
    """States one preference per reply, as the travel user's goal tells it to: the first one the
    message asks about."""
    out = _asked_preferences(task, message)
    return out[0] + "." if out else "No strong preference."


def test_travel_expert_asks_again_about_what_a_partial_answer_left_out():
    env = make("TravelGym", max_turns=5)
    for seed in range(4):
        _, messages, _ = play(env, one_at_a_time_user, seed)
        questions = [m for m in messages if m.startswith("[action]")]
        assert len(questions) == 3, messages  # one about everything, then one at a time
        assert "what do you prefer for" in questions[0]
        assert all("preference for the" in q or "budget" in q for q in questions[1:]), messages
        assert questions[1] != questions[2]


def test_turtle_expert_explains_with_what_the_user_revealed():
    env = make("TurtleGym", max_turns=5)
    for index in _training_indices("TurtleGym", 5):
        reward, messages, _ = play(env, turtle_user, options={"index": index})
        assert reward >= success_threshold("TurtleGym"), (index, messages)
        assert all(m.startswith("[action] ") for m in messages[:-1])


@pytest.mark.parametrize("max_turns", [3, 6])
def test_persuade_expert_argues_asks_for_a_rating_and_finishes(max_turns):
    env = make("PersuadeGym", max_turns=max_turns)
    for index in _training_indices("PersuadeGym", 5):
        reward, messages, info = play(env, persuade_user, options={"index": index})
        assert reward >= success_threshold("PersuadeGym"), (index, messages)
        assert messages[-1] == "[finish]" and info["outcome"] == "finished"


@pytest.mark.parametrize("task_id", ["retail-11", "retail-16", "retail-51", "airline-9"])
def test_tau_expert_authenticates_confirms_and_changes_the_database(task_id):
    env = make("TauGym", max_turns=20)
    index = next(i for i, t in enumerate(env.tasks) if t.id == task_id)
    reward, messages, _ = play(env, tau_user, options={"index": index})
    assert reward >= success_threshold("TauGym"), messages
    writes = [i for i, m in enumerate(messages) if re.match(
        r"\[search\] (cancel|return)", m)]
    assert writes and all("yes/no" in messages[i - 1] for i in writes)  # confirmed first


@pytest.mark.parametrize("env_name", sorted(experts()))
@pytest.mark.parametrize("max_turns", [1, 2, 3, 6])
def test_a_user_who_reveals_nothing_does_not_break_an_expert(env_name, max_turns):
    env = make(env_name, max_turns=max_turns)
    options = {"index": _training_indices(env_name, 1)[0]} if env.tasks else None
    _, messages, info = play(env, silent_user, seed=3, options=options)
    assert info["outcome"] in ("answered", "finished"), messages  # ends by its own decision
    assert all(len(re.findall(r"\[(action|search|answer|finish)\]", m)) == 1 for m in messages)


# ----------------------------------------------------------------------- honesty
def _twin(env_name: str, task):
    """The same public task with different hidden facts."""
    if env_name == "FunctionGym":
        return dataclasses.replace(task, rule="a * b + c - d" if task.rule != "a * b + c - d"
                                   else "a + b + c + d", expected=-1.0)
    if env_name == "TravelGym":
        aspects = tuple(dataclasses.replace(a, preferences=a.preferences[::-1][:1],
                                            best_id=a.options[-1].id) for a in task.aspects)
        return dataclasses.replace(task, aspects=aspects)
    if env_name == "TurtleGym":
        return dataclasses.replace(task, bottom="Something else entirely happened.",
                                   key_facts=task.key_facts[:1])
    if env_name == "PersuadeGym":
        return dataclasses.replace(task, persona="a retired sailor", reasons=("No reason.",))
    scenario = task.task.user_scenario.model_copy(update={"persona": "someone else"})
    return dataclasses.replace(task, task=task.task.model_copy(update={"user_scenario":
                                                                         scenario}))


@pytest.mark.parametrize("env_name", sorted(experts()))
def test_expert_actions_depend_only_on_what_the_user_said(env_name):
    env = make(env_name, max_turns=6)
    options = {"index": _training_indices(env_name, 2)[1]} if env.tasks else None
    env.reset(seed=5, options=options)
    task = env.task
    twin = _twin(env_name, task)
    assert env.reset(options={"task": twin})[1]["scenario"] != env.reset(
        options={"task": task})[1]["scenario"]  # the hidden facts differ ...

    def replies(_task, message: str) -> str:  # ... and the user says the same to both
        return "Yes, my stance: 4/7, f(2, 3, 5, 7) = 9 and the area must be city center."

    runs = [play(env, replies, options={"task": t})[1] for t in (task, twin)]
    assert runs[0] == runs[1]


# ----------------------------------------------------------------------- engine
@pytest.fixture(scope="module")
def tok():
    return AutoTokenizer.from_pretrained(base_dir("tiny-llama"))


class Recorder(ExpertPolicy):
    """The expert policy, keeping every view it was given."""

    def __init__(self) -> None:
        super().__init__()
        self.views: list[AgentView] = []

    def act(self, views):
        self.views += views
        return super().act(views)


class Replay:
    """Token-level agent that samples fixed texts (encode + EOS), as a model would."""

    def __init__(self, tok, texts: list[str]) -> None:
        self.tok, self.texts = tok, list(texts)

    def __call__(self, prompts, limits):
        text = self.texts.pop(0)
        ids = (encode(self.tok, text) + [self.tok.eos_token_id])[:limits[0]]
        return [Sample(ids, [-0.5] * len(ids))]


def _user_model(views):
    return [f"<think>plan {len(v)}</think>\nf(2, 3, 5, 7) = 9, f(3, 7, 2, 5) = 1 and "
            "f(7, 2, 3, 5) = 4" for v in views]


def test_engine_plays_an_expert_with_a_sampled_rollouts_token_layout(tok):
    spec = ScenarioSpec(env="FunctionGym", seed=2)
    params = RolloutParams(group_size=1, max_turns=3, max_new_tokens=64,
                           max_completion_tokens=512)
    policy = Recorder()
    [e] = RolloutEngine(policy, tok, UserSimulator(_user_model), params, progress=False).run(
        [spec])
    assert e.termination == "answer" and [t.kind for t in e.turns] == ["search", "action",
                                                                         "answer"]
    texts = [t.agent_text for t in e.turns]
    # prompt + completion is the rendered chat (the final "\n" follows the last agent turn)
    assert tok.decode(e.prompt_ids + e.completion_ids) + "\n" == render(tok, e.messages, False)
    # env_mask is 1 exactly on each turn's text tokens and its end-of-turn token
    runs, ids = [], e.completion_ids
    for i, m in enumerate(e.env_mask):
        if m and (i == 0 or not e.env_mask[i - 1]):
            runs.append([])
        if m:
            runs[-1].append(ids[i])
    assert runs == [encode(tok, t) + [tok.eos_token_id] for t in texts]
    assert set(e.logprobs) == {0.0}
    # the same texts sampled by a token-level agent give the same record layout
    [s] = RolloutEngine(Replay(tok, texts), tok, UserSimulator(_user_model), params,
                        progress=False).run([spec])
    for name in ("prompt_ids", "completion_ids", "env_mask", "turn_ids", "messages"):
        assert getattr(s, name) == getattr(e, name), name
    # what the expert saw: the prompt, its turns and the user's words, never the hidden rule
    env = make("FunctionGym")
    env.reset(seed=2)
    assert all(env.task.rule not in repr(v) for v in policy.views)
    assert policy.views[-1].turns[-1].source == "user"


def test_policy_turn_ids_follow_the_chat_template(tok):
    messages = [{"role": "user", "content": "hi"}]
    ids = policy_turn_ids(tok, messages, "[action] hello")
    assert ids[-1] == tok.eos_token_id
    assert tok.decode(ids) == render(tok, [*messages, {"role": "assistant",
                                                       "content": "[action] hello"}],
                                     False)[len(render(tok, messages, True)):].rstrip("\n")
