"""Registry, the env↔engine contract shared by all environments, and the doctests."""

from __future__ import annotations

import doctest
import importlib

import pytest

from mimesis.envs import registry
from mimesis.envs.base import UserEnv
from mimesis.schemas import Scenario

# Every environment the package ships must honour the engine contract, whoever adds it (other test
# modules register their own toy envs in the same registry: those are left out).
ENV_NAMES = [spec.name for spec in registry.list_envs()
             if registry.make(spec.name).__module__.startswith("mimesis.envs.")]
INFO_KEYS = {
    "env",
    "task_id",
    "turn",
    "max_turns",
    "kind",
    "tagged",
    "to_user",
    "obs_source",
    "outcome",
}


def test_list_envs() -> None:
    specs = {s.name: s for s in registry.list_envs()}
    assert set(ENV_NAMES) <= set(specs)
    assert (specs["FunctionGym"].split, specs["FunctionGym"].n_scenarios) == ("train", None)
    assert (specs["TravelGym"].split, specs["TravelGym"].n_scenarios) == ("train", None)
    assert specs["TelepathyGym"].split == "held_out"
    assert specs["TelepathyGym"].n_scenarios == 297
    assert all(s.source for s in specs.values())
    splits = [s.split for s in registry.list_envs()]
    assert splits == sorted(splits, key=lambda x: x != "train")


def test_make_and_unknown_names() -> None:
    env = registry.make("TelepathyGym", max_turns=5)
    assert env.max_turns == 5
    with pytest.raises(KeyError, match="FunctionGym"):
        registry.make("NoSuchGym")


def test_adding_an_env_is_one_decorated_class(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))

    class EchoTask:
        id = "echo-1"

    @registry.register
    class EchoGym(UserEnv):
        name, split, source = "EchoGym", "held_out", "test"

        @classmethod
        def default_tasks(cls) -> list:
            return [EchoTask()]

        def agent_prompt(self) -> str:
            return "say [answer] yes"

        def user_goal(self) -> str:
            return "you know the answer is yes"

        def on_search(self, query: str) -> str:
            return query

        def on_answer(self, content: str) -> tuple[str, bool]:
            self.said = content
            return "ok", True

        def score(self) -> float:
            return float(getattr(self, "said", "") == "yes")

    assert ("EchoGym", "held_out", 1) in [
        (s.name, s.split, s.n_scenarios) for s in registry.list_envs()
    ]
    env = registry.make("EchoGym")
    env.reset()
    assert env.step("[answer] yes")[1] == 1.0
    with pytest.raises(ValueError, match="already registered"):
        registry.register(type("EchoGym2", (EchoGym,), {"name": "EchoGym"}))


class FakeSimulator:
    """Stands in for the user simulator: answers every message, ends after ``end_after``."""

    def __init__(self, end_after: int | None = None) -> None:
        self.calls: list[str] = []
        self.end_after = end_after

    def __call__(self, message: str) -> tuple[str, bool]:
        self.calls.append(message)
        return "No.", self.end_after is not None and len(self.calls) >= self.end_after


def run_episode(env: UserEnv, agent_messages: list[str], sim: FakeSimulator) -> tuple:
    """The engine loop of the contract in ``mimesis.envs.base``."""
    obs, info = env.reset(seed=0)
    assert isinstance(obs, str) and obs and isinstance(info["scenario"], Scenario)
    for message in agent_messages:
        obs, reward, term, trunc, info = env.step(message)
        assert INFO_KEYS <= set(info)
        if info["to_user"] is not None:
            assert obs == "" and not (term or trunc)
            reply, ended = sim(info["to_user"])
            obs, reward, term, trunc, info = env.observe_user(reply, ended=ended)
            assert obs == reply and info["obs_source"] == "user"
        if term or trunc:
            return reward, term, trunc, info
        assert reward == 0.0  # rewards are sparse
    raise AssertionError("episode did not end")


@pytest.mark.parametrize("name", ENV_NAMES)
def test_engine_loop_truncates_at_max_turns(name: str) -> None:
    sim = FakeSimulator()
    env = registry.make(name, max_turns=3)
    reward, term, trunc, info = run_episode(env, ["hello?"] * 5, sim)
    assert (term, trunc, info["outcome"], info["turn"]) == (False, True, "truncated", 3)
    assert reward == 0.0 and len(sim.calls) == 2  # the last turn's message is never sent
    roles = [m.role for m in env.history]
    assert roles == ["env", "agent", "user", "agent", "user", "agent", "env"]


@pytest.mark.parametrize("name", ENV_NAMES)
def test_engine_loop_user_ends(name: str) -> None:
    sim = FakeSimulator(end_after=2)
    reward, term, trunc, info = run_episode(registry.make(name), ["[action] hi"] * 5, sim)
    assert (term, trunc, info["outcome"], reward) == (True, False, "user_ended", 0.0)


@pytest.mark.parametrize("name", ENV_NAMES)
def test_scenario_is_private_and_labelled(name: str) -> None:
    env = registry.make(name)
    obs, info = env.reset(seed=1)
    scenario = env.scenario_prompt()
    assert scenario == info["scenario"] and scenario.annotator == f"env:{name}"
    assert scenario.goal not in obs and "[answer]" in obs and "[action]" in obs


def test_empty_action_is_not_sent() -> None:
    env = registry.make("TelepathyGym")
    env.reset(seed=0)
    obs, _, term, _, info = env.step("[action]   ")
    assert info["to_user"] is None and "empty" in obs and not term and info["turn"] == 1


@pytest.mark.parametrize(
    "module",
    ["actions", "registry", "function.rules", "function.gym", "travel.gym", "telepathy.gym",
     "turtle.gym", "turtle_judge", "persuade.gym", "intention.gym"],
)
def test_doctests(module: str) -> None:
    result = doctest.testmod(importlib.import_module(f"mimesis.envs.{module}"))
    assert result.attempted > 0 and result.failed == 0


def test_cli_envs_list_shows_every_registered_env_with_split_and_count() -> None:
    from typer.testing import CliRunner

    from mimesis.cli import app
    from mimesis.envs import list_envs

    result = CliRunner().invoke(app, ["envs", "list"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    rows = {line.split("│")[1].strip(): line for line in result.output.splitlines()
            if line.count("│") >= 4}
    for spec in list_envs():
        assert spec.name in rows
        assert spec.split in rows[spec.name]
        count = "procedural" if spec.n_scenarios is None else str(spec.n_scenarios)
        assert count in rows[spec.name]
