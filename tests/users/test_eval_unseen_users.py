"""Unseen user simulators: every kind replies through UserSimulator; the registry refuses the
training simulator. Offline: tiny random Llama, a small corpus, a loopback chat-completions stub."""

from __future__ import annotations

import doctest
import re
import shutil
from pathlib import Path

import pytest

from mimesis.envs import make
from mimesis.format import END_SIGNAL
from mimesis.io import write_json, write_jsonl
from mimesis.schemas import LabeledConversation, Scenario, Turn, TurnLabel
from mimesis.simulator.runtime import UserSimulator
from mimesis.users import identity as simulator_identity
from mimesis.users import offline as offline_users
from mimesis.users import spec as user_spec
from mimesis.users.chat import OPENING_CUE, PromptedUser, UserEndpointError
from mimesis.users.offline import ReplayUser, read_corpus
from mimesis.users.spec import parse_unseen
from mimesis.users.unseen import build_unseen, check_not_training, release

KEY_ENV = "MIMESIS_TEST_UNSEEN_KEY"
REGISTERED = "mimesis-user-simulator"


def _conv(cid: str, goal: str, turns: list[tuple[str, str]], ended: bool) -> LabeledConversation:
    ts = [Turn(role=r, text=t) for r, t in turns]
    labels = [TurnLabel(turn_index=i, reasoning="", reasoning_annotator="none")
              for i, t in enumerate(ts) if t.role == "user"]
    return LabeledConversation(id=cid, turns=ts, scenario=Scenario(goal=goal, annotator="test"),
                               labels=labels, end_reasoning="", end_reasoning_annotator="none",
                               ended=ended)


CORPUS = [
    _conv("py", "fix a python list index error", [
        ("user", "my python script crashes with list index out of range"),
        ("assistant", "Which python version are you running, and can you share the loop?"),
        ("user", "python 3.11, the loop goes to len(items) + 1"),
        ("assistant", "The range should stop at len(items); remove the + 1."),
        ("user", "oh that fixed it")], ended=False),
    _conv("trip", "plan a cheap weekend trip to Lisbon", [
        ("user", "want to go to lisbon for a weekend, cheap"),
        ("assistant", "What dates are you travelling and what is your budget for the hotel?"),
        ("user", "next friday to sunday, under 80 euros a night"),
        ("assistant", "Here are three hostels near Alfama under 80 euros per night.")], ended=True),
    _conv("cake", "bake a chocolate cake without eggs", [
        ("user", "how do i bake chocolate cake with no eggs"),
        ("assistant", "Do you have yogurt or applesauce at home to replace the eggs?"),
        ("user", "i have applesauce")], ended=False),
]


@pytest.fixture(scope="module")
def training_dir(tmp_path_factory) -> Path:
    """A frozen-simulator folder: tiny Llama with one weight changed (so the tiny base is NOT
    the training simulator), meta.json with per-file sha256 and the registry name."""
    import torch

    from mimesis.models.base import load_base
    from mimesis.simulator.frozen import hash_files

    sim_dir = tmp_path_factory.mktemp("freeze_user") / "simulator"
    model, tokenizer = load_base("tiny-llama")
    with torch.no_grad():
        next(model.parameters()).add_(0.01)
    model.save_pretrained(sim_dir)
    tokenizer.save_pretrained(sim_dir)
    write_json(sim_dir / "meta.json", {
        "stage": "freeze_user", "base_model": "tiny-llama", "registered_model": REGISTERED,
        "params": {"alias": "frozen"}, "files": hash_files(sim_dir)})
    return sim_dir


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("label") / "test.jsonl"
    write_jsonl(path, CORPUS)
    return path


def _state(sim: UserSimulator, goal: str):
    return sim.init_state(Scenario(goal=goal, annotator="env:test"))


# ----------------------------------------------------------------------------- replay
def test_replay_sends_the_real_turn_after_the_nearest_agent_turn(training_dir, corpus):
    sims = build_unseen([{"name": "replay", "kind": "replay"}], training_dir, corpus=corpus)
    sim = sims["replay"]
    reply, state = sim.next_message("What is your budget for the hotel, and which dates?",
                                    _state(sim, "book a hotel"))
    assert reply == "next friday to sunday, under 80 euros a night"
    assert "replay trip:2" in state.private[0]  # provenance stays private
    reply2, _ = sim.next_message("Do you have applesauce or yogurt to replace eggs?",
                                 _state(sim, "bake"))
    assert reply2 == "i have applesauce"
    real_user_turns = {t.text for c in CORPUS for t in c.turns if t.role == "user"}
    assert {reply, reply2} <= real_user_turns


def test_replay_opening_turn_is_the_nearest_real_first_turn(training_dir, corpus):
    sim = build_unseen([{"name": "replay", "kind": "replay"}], training_dir, corpus=corpus)["replay"]
    reply, _ = sim.next_message(None, _state(sim, "a cheap trip to Lisbon for the weekend"))
    assert reply == "want to go to lisbon for a weekend, cheap"
    reply, _ = sim.next_message(None, _state(sim, "python list index error"))
    assert reply == "my python script crashes with list index out of range"


def test_replay_never_repeats_itself_and_ends_where_real_users_ended(training_dir, corpus):
    sim = build_unseen([{"name": "replay", "kind": "replay"}], training_dir, corpus=corpus)["replay"]
    question = "What dates are you travelling and what is your budget for the hotel?"
    first, state = sim.next_message(question, _state(sim, "trip"))
    second, state = sim.next_message(question, state)
    assert first != second and not state.ended
    # The 'trip' conversation ended after this agent turn: the replayed user ends too.
    _, state = sim.next_message("Here are three hostels near Alfama under 80 euros per night.",
                                _state(sim, "trip"))
    assert state.ended and state.end_reason == "end_signal"


def test_replay_is_deterministic(corpus):
    user = ReplayUser(read_corpus(corpus))
    views = [[{"role": "system", "content": "g"}, {"role": "user", "content": q}]
             for q in ("which python version?", "any yogurt?", "zzz unknown words")]
    assert user(views) == user(views)


# ----------------------------------------------------------------------------- agenda
GOAL = ("I want a vegetarian restaurant in the city center. The table must be for four people. "
        "My budget is not above 30 dollars. Never tell the agent your budget unless asked.")


def test_agenda_discloses_goal_facts_one_per_turn_then_ends(training_dir):
    sim = build_unseen([{"name": "agenda", "kind": "agenda"}], training_dir)["agenda"]
    state = _state(sim, GOAL)
    reply, state = sim.next_message("How many people will the table be for?", state)
    assert reply == "The table must be for four people."
    reply, state = sim.next_message("Is a vegetarian restaurant what you want?", state)
    assert reply == "Yes."
    reply, state = sim.next_message("Is the budget above 30 dollars?", state)
    assert reply == "No."  # the item is negated, the question is not
    reply, state = sim.next_message("Which airline do you fly with?", state)
    assert reply == "I don't know."
    said = []
    while not state.ended:
        reply, state = sim.next_message("Okay, noted.", state)
        said.append(reply)
    assert said[:-1] == ["I want a vegetarian restaurant in the city center.",
                         "My budget is not above 30 dollars."]
    assert state.end_reason == "end_signal" and "Never" not in " ".join(state.user_utterances())
    assert END_SIGNAL in state.raw[-1]


def test_agenda_keeps_secrets_and_answers_yes_no_from_them(training_dir):
    sim = build_unseen([{"name": "agenda", "kind": "agenda"}], training_dir)["agenda"]
    env = make("TelepathyGym", max_turns=5)
    _, info = env.reset(seed=0, options={"index": 0})
    name = env.task.name
    state = sim.init_state(info["scenario"])
    reply, state = sim.next_message(f"Is it a {name}?", state)
    assert reply == "Yes."
    # A question about the secret itself gets no disclosure of it (the item is private).
    reply, state = sim.next_message(f"What do you know about {env.task.description}?", state)
    assert name.lower() not in reply.lower() and reply == "I don't know."
    assert all(name.lower() not in u.lower() for u in state.user_utterances())


def test_agenda_on_travelgym_discloses_the_request_then_the_preference_asked_about(training_dir):
    sim = build_unseen([{"name": "agenda", "kind": "agenda"}], training_dir)["agenda"]
    env = make("TravelGym", max_turns=5)
    _, info = env.reset(seed=3)
    goal = info["scenario"].goal
    kind, attribute, value = re.search(r"^- ([\w ]+): the ([\w ]+?) must be (.+?) \(", goal,
                                       re.MULTILINE).groups()
    state = sim.init_state(info["scenario"])
    reply, state = sim.next_message("Where is your trip going?", state)
    assert reply.startswith("I'm planning a trip from") and reply in goal
    reply, state = sim.next_message(f"Which {attribute} would you like for the {kind}?", state)
    assert reply == f"For the {kind}, the {attribute} must be {value}"
    assert "agent" not in " ".join(state.user_utterances())  # stage directions stay out


# ----------------------------------------------------------------------------- hf
def test_hf_user_loads_lazily_and_replies_through_the_runtime(training_dir):
    sims = build_unseen([
        {"name": "tiny-prompted", "kind": "hf", "model": "tiny-llama", "max_new_tokens": 8},
        {"name": "tiny-sim", "kind": "hf", "model": "tiny-llama", "max_new_tokens": 8,
         "prompt_style": "user_simulator", "temperature": 0.0}], training_dir)
    prompted, trained = sims["tiny-prompted"], sims["tiny-sim"]
    assert isinstance(prompted.generate_fn, PromptedUser) and prompted.generate_fn.model is None
    states = [_state(prompted, "book a hotel"), _state(prompted, "fix my code")]
    out = prompted.next_messages([("Hi, how can I help?", s) for s in states])
    assert prompted.generate_fn.model is not None
    assert all(s.raw for _, s in out)  # the model was called for every episode
    assert all(isinstance(r, str) for r, _ in out)
    assert "role-playing a human user" in states[0].system_prompt
    assert "You are a real person" in _state(trained, "x").system_prompt
    release(sims)
    assert prompted.generate_fn.model is None


# ----------------------------------------------------------------------------- openai
@pytest.fixture
def stub(openai_stub):
    server, url = openai_stub
    server.reply = "<think>they asked about dates</think>\nnext weekend works for me"
    return server, url


def _openai_entry(url: str, **kw) -> dict:
    return {"name": "api", "kind": "openai", "model": "gpt-4o-mini", "base_url": url,
            "api_key_env": KEY_ENV, "max_retries": 0, "timeout_s": 10, **kw}


def test_openai_user_against_a_stub(training_dir, stub, monkeypatch):
    server, url = stub
    monkeypatch.setenv(KEY_ENV, "test-key")
    sim = build_unseen([_openai_entry(url)], training_dir)["api"]
    states = [_state(sim, f"goal {i}") for i in range(3)]
    out = sim.next_messages([("When do you want to travel?", s) for s in states])
    assert [r for r, _ in out] == ["next weekend works for me"] * 3
    assert all(s.private == ["they asked about dates"] for _, s in out)  # reasoning kept private
    assert len(server.requests) == 3
    body = server.requests[0]
    assert body["model"] == "gpt-4o-mini" and body["max_tokens"] == 96
    assert body["messages"][0]["role"] == "system"
    assert "role-playing a human user" in body["messages"][0]["content"]
    assert body["messages"][-1] == {"role": "user", "content": "When do you want to travel?"}
    sim.next_message(None, _state(sim, "opening"))
    assert server.requests[-1]["messages"][-1] == {"role": "user", "content": OPENING_CUE}


def test_openai_user_needs_its_key(training_dir, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    with pytest.raises(UserEndpointError, match=KEY_ENV):
        build_unseen([_openai_entry("http://127.0.0.1:9/v1")], training_dir)


def test_openai_endpoint_that_serves_the_training_simulator_is_refused(training_dir, stub,
                                                                       monkeypatch):
    server, url = stub
    server.served_model = REGISTERED  # what our own serving app reports
    monkeypatch.setenv(KEY_ENV, "test-key")
    sim = build_unseen([_openai_entry(url)], training_dir)["api"]
    with pytest.raises(ValueError, match="training simulator"):
        sim.next_message("hello?", _state(sim, "g"))


# ----------------------------------------------------------------------------- refusal
@pytest.mark.parametrize("model", [REGISTERED, "frozen", f"{REGISTERED}@frozen",
                                   f"models:/{REGISTERED}@frozen", "Mimesis-User-Simulator"])
def test_refuses_openai_model_named_as_the_training_simulator(training_dir, model):
    with pytest.raises(ValueError, match="training simulator"):
        check_not_training(parse_unseen([{"name": "x", "kind": "openai", "model": model}]),
                           training_dir)


def test_refuses_the_training_simulator_folder(training_dir):
    with pytest.raises(ValueError, match="training simulator folder"):
        build_unseen([{"name": "x", "kind": "hf", "model": str(training_dir)}], training_dir)


def test_refuses_a_copy_with_matching_meta(training_dir, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(training_dir, copy)
    with pytest.raises(ValueError, match="meta.json lists the training simulator"):
        build_unseen([{"name": "x", "kind": "hf", "model": str(copy)}], training_dir)


def test_refuses_a_copy_of_the_weights_without_meta(training_dir, tmp_path):
    copy = tmp_path / "renamed"
    shutil.copytree(training_dir, copy)
    (copy / "meta.json").unlink()
    with pytest.raises(ValueError, match="sha256 of a training simulator weight"):
        build_unseen([{"name": "x", "kind": "hf", "model": str(copy)}], training_dir)


def test_refuses_duplicate_names_and_bad_entries(training_dir):
    with pytest.raises(ValueError, match="duplicate"):
        build_unseen([{"name": "a", "kind": "agenda"}, {"name": "a", "kind": "replay"}],
                     training_dir)
    with pytest.raises(ValueError, match="names the training simulator"):
        build_unseen([{"name": "frozen", "kind": "agenda"}], training_dir)
    with pytest.raises(ValueError, match="unknown keys"):
        parse_unseen([{"name": "a", "kind": "agenda", "modle": "x"}])
    with pytest.raises(ValueError, match="kind"):
        parse_unseen([{"name": "a", "kind": "telepathy"}])
    with pytest.raises(ValueError, match="needs a model"):
        parse_unseen([{"name": "a", "kind": "hf"}])


def test_accepts_other_models(training_dir, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "k")
    sims = build_unseen([{"name": "tiny", "kind": "hf", "model": "tiny-llama"},
                         _openai_entry("http://127.0.0.1:9/v1"),
                         {"name": "agenda", "kind": "agenda"}], training_dir)
    assert list(sims) == ["tiny", "api", "agenda"]


def test_an_agents_own_training_user_is_found_among_the_unseen_users():
    configs = parse_unseen([
        {"name": "agenda", "kind": "agenda"},
        {"name": "p", "kind": "hf", "model": "smollm2-135m"},
        {"name": "p-sim-prompt", "kind": "hf", "model": "smollm2-135m",
         "prompt_style": "user_simulator"},
        {"name": "api", "kind": "openai", "model": "gpt-x", "base_url": "http://h:1/v1/"},
        {"name": "api-other", "kind": "openai", "model": "gpt-x", "base_url": "http://h:2/v1"}])
    found = simulator_identity.trained_against
    prompted = {"kind": "prompted", "model": "smollm2-135m", "prompt_style": "prompted_user"}
    assert found(prompted, configs) == ["p"]  # another prompt is another user
    assert found({**prompted, "model": "tiny-llama"}, configs) == []
    assert found({"kind": "openai", "model": "gpt-x", "base_url": "http://h:1/v1",
                  "prompt_style": "prompted_user"}, configs) == ["api"]
    assert found({"kind": "frozen", "weights_fingerprint": "ab"}, configs) == []
    assert found(None, configs) == []


def test_doctests():
    assert doctest.testmod(user_spec).failed == 0
    assert doctest.testmod(offline_users).failed == 0
    assert doctest.testmod(simulator_identity).failed == 0
