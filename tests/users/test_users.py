"""mimesis.users: one UserSpec, one make_user() for every kind (tiny model, loopback stubs,
offline users), one validation rule per test, and no second spec class anywhere in the library."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from mimesis.io import write_json, write_jsonl
from mimesis.schemas import LabeledConversation, Scenario, Turn, TurnLabel
from mimesis.simulator.baseline import render_prompted_system_prompt
from mimesis.simulator.prompts import render_system_prompt
from mimesis.simulator.runtime import UserSimulator
from mimesis.users.chat import OpenAIUser, PromptedUser
from mimesis.users.factory import make_user
from mimesis.users.offline import AgendaUser, ReplayUser, goal_prompt
from mimesis.users.spec import (
    UserSamplingParams,
    UserSpec,
    arm_entry,
    parse_arms,
    parse_specs,
    parse_unseen,
)

REPO = Path(__file__).resolve().parents[2]
KEY_ENV = "MIMESIS_TEST_USERS_KEY"
SCENARIO = Scenario(goal="Book a cheap flight to Lisbon", annotator="hand")


@pytest.fixture(scope="module")
def sim_dir(tmp_path_factory) -> Path:
    """A frozen-simulator folder of the tiny Llama, with per-file sha256 in meta.json."""
    from mimesis.models.base import load_base
    from mimesis.simulator.frozen import hash_files

    out = tmp_path_factory.mktemp("freeze_user") / "simulator"
    model, tokenizer = load_base("tiny-llama")
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    write_json(out / "meta.json", {"base_model": "tiny-llama",  # a hand-made folder
                                   "files": hash_files(out)})
    return out


# ----------------------------------------------------------------------------- each kind
def test_replay_user_replays_its_corpus(tmp_path):
    turns = [Turn(role="user", text="i need a hotel"), Turn(role="assistant", text="Which city?"),
             Turn(role="user", text="porto, two nights")]
    conv = LabeledConversation(
        id="c", turns=turns, scenario=Scenario(goal="book a hotel", annotator="t"),
        labels=[TurnLabel(turn_index=i, reasoning="", reasoning_annotator="none")
                for i in (0, 2)], end_reasoning="", end_reasoning_annotator="none", ended=True)
    corpus = tmp_path / "test.jsonl"
    write_jsonl(corpus, [conv])
    sim = make_user(UserSpec("replay", "replay", corpus=str(corpus)), max_turns=4)
    assert isinstance(sim.generate_fn, ReplayUser) and sim.max_turns == 4
    assert sim.system_prompt_fn is goal_prompt
    reply, _ = sim.next_message("Which city?", sim.init_state(SCENARIO))
    assert reply == "porto, two nights"
    with pytest.raises(FileNotFoundError, match="corpus"):
        make_user(UserSpec("replay", "replay"))


def test_agenda_user_is_rule_based():
    sim = make_user(UserSpec("agenda", "agenda"))
    assert isinstance(sim.generate_fn, AgendaUser) and sim.system_prompt_fn is goal_prompt
    reply, state = sim.next_message(None, sim.init_state(SCENARIO))
    assert reply and not state.ended


def test_openai_user_sends_the_specs_sampling_to_the_endpoint(openai_stub, monkeypatch):
    stub, url = openai_stub
    stub.reply = "<think>only the price matters</think>anything under 200 euros?"
    monkeypatch.setenv(KEY_ENV, "k")
    spec = UserSpec("api", "openai", model="gpt-4o-mini", base_url=url, api_key_env=KEY_ENV,
                    temperature=0.3, top_p=0.9, max_new_tokens=40, max_retries=0)
    sim = make_user(spec)
    assert isinstance(sim.generate_fn, OpenAIUser)
    sim.generate_fn.reseed(5)
    reply, state = sim.next_message(None, sim.init_state(SCENARIO))
    assert reply == "anything under 200 euros?" and "only the price" in state.private[0]
    sent = stub.requests[-1]
    assert (sent["model"], sent["temperature"], sent["top_p"], sent["max_tokens"],
            sent["seed"]) == ("gpt-4o-mini", 0.3, 0.9, 40, 5)
    assert sent["messages"][0]["content"] == render_prompted_system_prompt(SCENARIO)


def test_prompted_user_loads_its_model_or_the_frozen_base_model():
    from mimesis.users.frozen import FrozenUser

    sim = make_user(UserSpec("p", "prompted", model="tiny-llama", prompt_style="user_simulator",
                             max_new_tokens=6, seed=3))
    assert isinstance(sim.generate_fn, PromptedUser) and sim.system_prompt_fn is render_system_prompt
    reply, _ = sim.next_message(None, sim.init_state(SCENARIO))
    assert isinstance(reply, str) and sim.generate_fn.sampler.params.max_new_tokens == 6
    frozen = FrozenUser(None, None, None, {"base_model": "tiny-llama"}, "f" * 64, Path("."))
    assert make_user(UserSpec("p", "prompted"), frozen=frozen).generate_fn.config.model == (
        "tiny-llama")
    with pytest.raises(ValueError, match="no model given"):
        make_user(UserSpec("p", "prompted"))


def test_frozen_user_loads_the_verified_folder_with_the_specs_sampling(sim_dir):
    from mimesis.models.engine.sampling import TokenSampler
    from mimesis.users.frozen import load_frozen_user

    spec = UserSpec("frozen", "frozen", model=str(sim_dir)).with_sampling(
        UserSamplingParams(temperature=0.5, max_new_tokens=7, batch_size=4), dtype="float32",
        seed=21)
    sim = make_user(spec, max_turns=5)
    sampler = sim.generate_fn.__self__
    assert isinstance(sampler, TokenSampler) and sim.max_turns == 5
    assert (sampler.params.temperature, sampler.params.max_new_tokens,
            sampler.params.batch_size) == (0.5, 7, 4)
    # the same folder, sampling and seed as the agent stages load it: the same turns
    loaded = load_frozen_user(sim_dir, dtype="float32", sampling=spec.sampling, seed=21,
                              max_turns=5)
    ours, _ = sim.next_message(None, sim.init_state(SCENARIO))
    theirs, _ = loaded.simulator.next_message(None, loaded.simulator.init_state(SCENARIO))
    assert ours == theirs
    assert make_user(UserSpec("grpo"), frozen=loaded) is loaded.simulator
    with pytest.raises(ValueError, match="simulator folder"):
        make_user(UserSpec("frozen", "frozen"))


def test_served_user_is_built_for_the_servers_root():
    from mimesis.users.served import ServedUserSimulator

    sim = make_user(UserSpec("s", "served", base_url="http://127.0.0.1:9/v1", api_key_env="",
                             temperature=0.4, max_new_tokens=30), max_turns=6)
    assert isinstance(sim, ServedUserSimulator) and sim.max_turns == 6
    assert sim.base_url == "http://127.0.0.1:9" and sim.model == "mimesis-user-simulator"
    assert sim.sampling == {"temperature": 0.4, "top_p": 0.95, "max_tokens": 30}


# ----------------------------------------------------------------------------- validation
def test_a_name_must_be_a_folder_and_mlflow_key():
    with pytest.raises(ValueError, match="user name"):
        UserSpec("my user")


def test_the_kind_must_be_known_and_hf_reads_as_prompted():
    with pytest.raises(ValueError, match="kind 'telepathy'"):
        UserSpec("u", "telepathy")
    assert UserSpec("u", "hf", model="m").kind == "prompted"
    assert parse_unseen([{"name": "u", "kind": "hf", "model": "m"}])[0].kind == "prompted"


def test_openai_needs_a_model():
    with pytest.raises(ValueError, match="openai needs a model"):
        UserSpec("u", "openai")


def test_served_needs_a_base_url():
    with pytest.raises(ValueError, match="served needs the server's base_url"):
        UserSpec("u", "served")


def test_the_prompt_style_must_be_known():
    with pytest.raises(ValueError, match="prompt_style"):
        UserSpec("u", "prompted", model="m", prompt_style="pirate")


@pytest.mark.parametrize("bad", [{"concurrency": 0}, {"timeout_s": 0}, {"max_retries": -1}])
def test_client_settings_must_be_in_range(bad):
    with pytest.raises(ValueError, match="concurrency >= 1"):
        UserSpec("u", "openai", model="m", **bad)


@pytest.mark.parametrize("bad", [{"temperature": -0.1}, {"top_p": 0}, {"top_p": 1.5},
                                 {"max_new_tokens": 0}, {"batch_size": 0}])
def test_sampling_must_be_in_range(bad):
    with pytest.raises(ValueError, match="user 'u': user sampling"):
        UserSpec("u", "agenda", **bad)


def test_params_lists_refuse_unknown_keys_other_kinds_missing_models_and_duplicates():
    with pytest.raises(ValueError, match="unknown keys"):
        parse_unseen([{"name": "a", "kind": "agenda", "modle": "x"}])
    with pytest.raises(ValueError, match="unknown keys"):
        parse_arms([{"name": "a", "kind": "frozen"}])  # an arm's kind is its `user` key
    with pytest.raises(ValueError, match="kind 'frozen' not in"):
        parse_unseen([{"name": "a", "kind": "frozen"}])
    with pytest.raises(ValueError, match="user 'agenda' not in"):
        parse_arms([{"name": "a", "user": "agenda"}])
    with pytest.raises(ValueError, match="kind prompted needs a model"):
        parse_unseen([{"name": "a", "kind": "prompted"}])
    assert parse_arms([{"name": "a", "user": "prompted"}])[0].model == ""  # the base model
    with pytest.raises(ValueError, match="duplicate arm name 'a'"):
        parse_arms([{"name": "a"}, {"name": "a", "user": "prompted"}])
    with pytest.raises(ValueError, match="at least one arm"):
        parse_arms([])
    spec = UserSpec("a", "served", base_url="http://h")
    with pytest.raises(ValueError, match="kind 'served' not in"):
        parse_specs([spec], what="unseen user", kinds=("agenda",))


def test_an_arms_resume_key_entry_is_the_params_entry():
    """A train_agent checkpoint's resume key hashes the arm: the entry must stay what the arm
    dataclass of earlier versions recorded, or every run in flight restarts from scratch."""
    arm = parse_arms([{"name": "grpo-prompted", "user": "prompted"}])[0]
    assert arm_entry(arm) == {
        "name": "grpo-prompted", "user": "prompted", "model": "", "prompt_style": "prompted_user",
        "base_url": "", "api_key_env": "OPENAI_API_KEY", "private_key_env": "", "concurrency": 4,
        "timeout_s": 60.0, "max_retries": 3}


# ----------------------------------------------------------------------------- one spec class
_SPEC_FIELDS = {"prompt_style", "base_url", "api_key_env", "private_key_env", "corpus"}


def _user_spec_classes() -> list[str]:
    """Classes of the library that describe a user: a user prompt style, or a kind and a model
    with an endpoint or corpus (an LLM annotator's endpoint alone is not a user)."""
    found = []
    for path in sorted((REPO / "mimesis").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef):
                continue
            fields = {s.target.id for s in node.body
                      if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
            if "prompt_style" in fields or ({"kind", "model"} <= fields
                                             and fields & _SPEC_FIELDS):
                found.append(f"{path.relative_to(REPO)}:{node.name}")
    return found


def test_userspec_is_the_only_user_spec_class():
    assert _user_spec_classes() == ["mimesis/users/spec.py:UserSpec"]


def test_the_scan_finds_a_second_spec_class(tmp_path, monkeypatch):
    """The scan catches a class like the ones UserSpec replaced (evaluate-simulator's had a kind,
    a target and a prompt style)."""
    fake = tmp_path / "mimesis" / "eval"
    fake.mkdir(parents=True)
    (fake / "old.py").write_text(
        "class EndpointSource:\n    kind: str\n    target: str\n    prompt_style: str = ''\n")
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    assert _user_spec_classes() == ["mimesis/eval/old.py:EndpointSource"]


def test_every_user_runs_behind_the_one_runtime():
    for spec in (UserSpec("a", "agenda"), UserSpec("p", "prompted", model="tiny-llama")):
        assert type(make_user(spec)) is UserSimulator
