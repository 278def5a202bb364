"""Adding an environment is one folder under mimesis/envs/, one expert module under
mimesis/rl/experts/ and its name in params.yaml (docs/environments.md, "Adding an environment").

The test writes a small env package (``coin/``: gym, data file, fact probe, grounding exchanges)
and an expert module into temporary folders that extend the two packages' search paths, exactly
where a real env and expert are found, and edits nothing else. Then every consumer that plays
"the training envs" must pick it up: the registry (split, threshold), the default env lists, the
fact-reveal probes, the grounding rows, the expert policy, the rollout engine and the scoring.
"""

from __future__ import annotations

import sys
import textwrap

import pytest
from transformers import AutoTokenizer

import mimesis.envs
import mimesis.rl.experts
from mimesis.envs import registry
from mimesis.models.base import base_dir

GYM = '''
    """CoinGym (train): the user flipped a coin; the agent asks which side and answers it."""

    from __future__ import annotations

    import json
    from dataclasses import dataclass
    from importlib import resources

    from mimesis.envs.base import UserEnv
    from mimesis.envs.facts import Fact
    from mimesis.envs.registry import register


    @dataclass(frozen=True)
    class CoinTask:
        id: str
        side: str


    def sides() -> list[str]:
        path = resources.files("mimesis.envs.coin") / "data" / "sides.json"
        return json.loads(path.read_text(encoding="utf-8"))


    @register
    class CoinGym(UserEnv[CoinTask]):
        name = "CoinGym"
        split = "train"
        source = "procedural"
        success_threshold = 0.5  # a right side after one question scores 1, later ones less

        def generate_task(self, rng):
            side = sides()[int(rng.integers(2))]
            return CoinTask(f"coin-{side}-{int(rng.integers(10**6))}", side)

        def agent_prompt(self):
            return "Find out which side the user's coin landed on. [action] asks, [answer] answers."

        def user_goal(self):
            return f"You flipped a coin and it landed {self.task.side}. Say so when asked."

        def on_search(self, query):
            return "No tool here."

        def on_answer(self, content):
            self.answer = content.strip().lower()
            return "Recorded.", True

        def score(self):
            asks = sum(m.role == "user" for m in self.history)
            right = getattr(self, "answer", None) == self.task.side
            return max(0.0, 1.25 - 0.25 * asks) if right else 0.0

        def start_episode(self):
            self.answer = None

        def probe_fact(self, position):
            side = self.task.side
            return Fact(self.name, self.task.id, "side", side,
                        ("Which side did it land on?", "What did the coin show?",
                         "Was it the head or the other face?"),
                        lambda reply: side in reply.lower())

        def grounding_exchanges(self, rng):
            from mimesis.envs.coin.grounding import coin_exchanges

            return coin_exchanges(self, rng)
'''
GROUNDING = '''
    def coin_exchanges(env, rng):
        yield ("Heads or tails?", f"I'm asked the side: {env.task.side}.",
               rng.choice((env.task.side, f"It was {env.task.side}.")))
'''
EXPERT = '''
    from mimesis.rl.experts.base import Expert


    class CoinExpert(Expert):
        env = "CoinGym"

        def act(self, view):
            replies = [t.obs.lower() for t in view.turns if t.source == "user"]
            for reply in replies:
                for side in ("heads", "tails"):
                    if side in reply:
                        return f"[answer] {side}"
            return "[action] Which side did your coin land on?"
'''


def _write(path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())


@pytest.fixture
def coin(tmp_path, monkeypatch):
    """The new env and its expert, found where real ones are; every trace removed after."""
    envs_dir, experts_dir = tmp_path / "envs", tmp_path / "experts"
    _write(envs_dir / "coin" / "__init__.py", "from mimesis.envs.coin.gym import CoinGym\n")
    _write(envs_dir / "coin" / "gym.py", GYM)
    _write(envs_dir / "coin" / "grounding.py", GROUNDING)
    _write(envs_dir / "coin" / "data" / "sides.json", '["heads", "tails"]')
    _write(experts_dir / "coin.py", EXPERT)
    registry._discover()  # the shipped envs first, so only the new one is added below
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.setattr(registry, "_discovered", False)
    monkeypatch.setattr(mimesis.envs, "__path__", [*mimesis.envs.__path__, str(envs_dir)])
    monkeypatch.setattr(mimesis.rl.experts, "__path__",
                        [*mimesis.rl.experts.__path__, str(experts_dir)])
    yield "CoinGym"
    for name in [m for m in sys.modules if m.startswith(("mimesis.envs.coin",
                                                         "mimesis.rl.experts.coin"))]:
        del sys.modules[name]


@pytest.fixture(scope="module")
def tok():
    return AutoTokenizer.from_pretrained(base_dir("tiny-llama"))


def _user_model(views):
    """The simulated user: states the side its system prompt holds."""
    out = []
    for v in views:
        side = "heads" if "landed heads" in v[0]["content"] else "tails"
        out.append(f"<think>I'm asked the side.</think>\nIt landed {side}.")
    return out


def test_a_new_env_folder_is_registered_with_its_split_threshold_and_data(coin) -> None:
    from mimesis.envs.registry import env_names, list_envs, make, success_threshold
    from mimesis.eval.agents.fact_reveal import FactRevealParams
    from mimesis.stages.sft_agent import SftAgentParams
    from mimesis.train.grounding import GroundingParams

    assert coin not in registry._REGISTRY  # nothing registered it but discovery
    spec = next(s for s in list_envs() if s.name == coin)
    assert (spec.split, spec.n_scenarios) == ("train", None)
    # a new env without an ``order`` comes after the shipped ones: their seeds stay theirs
    assert env_names("train")[:6] == ["FunctionGym", "TravelGym", "TurtleGym", "TauGym",
                                      "PersuadeGym", coin]
    assert coin not in env_names("held_out")
    assert success_threshold(coin) == 0.5
    # every setting that plays "the training envs" by default plays it
    assert coin in GroundingParams().envs
    assert coin in FactRevealParams().envs
    assert coin in SftAgentParams().envs
    env = make(coin)
    env.reset(seed=3)
    assert env.task.side in ("heads", "tails")  # from the folder's data/sides.json


def test_its_fact_probe_and_grounding_exchanges_are_used(coin, tok) -> None:
    from mimesis.envs.facts import task_fact
    from mimesis.envs.registry import make
    from mimesis.train.grounding import GroundingParams, build_grounding_rows

    env = make(coin)
    env.reset(seed=3)
    fact = task_fact(env, 0)
    assert (fact.env, fact.kind, fact.truth) == (coin, "side", env.task.side)
    assert fact.judge(f"It was {env.task.side}.") and not fact.judge("No idea.")
    rows, rejects, counts = build_grounding_rows(
        GroundingParams(envs=[coin], tasks_per_env=2, dialogues_per_task=1), tok, 4096)
    assert not rejects and counts[coin] == 2 == len(rows)
    for row in rows:
        assert row["id"].startswith(f"grounding:{coin}:coin-")
        side = row["id"].split(":")[2].split("-")[1]
        assert row["messages"][1]["content"] == "Heads or tails?"
        assert side in row["messages"][2]["content"]  # the reply states the task's fact


def test_rollouts_and_scoring_accept_it_with_its_discovered_expert(coin, tok) -> None:
    from mimesis.eval.agents.stats import episode_rows
    from mimesis.rl.expert_sft import triage
    from mimesis.rl.experts import ExpertPolicy, experts
    from mimesis.rollout.engine import RolloutEngine
    from mimesis.rollout.records import RolloutParams, ScenarioSpec
    from mimesis.simulator.runtime import UserSimulator

    assert experts()[coin].__name__ == "CoinExpert"
    params = RolloutParams(group_size=1, max_turns=4, max_new_tokens=32,
                           max_completion_tokens=256)
    episodes = RolloutEngine(ExpertPolicy(), tok, UserSimulator(_user_model), params,
                             progress=False).run([ScenarioSpec(env=coin, seed=s)
                                                  for s in (1, 2)])
    assert [e.env for e in episodes] == [coin, coin]
    assert all(e.termination == "answer" and e.reward == 1.0 for e in episodes)
    [row] = episode_rows("expert", "scripted", episodes)
    assert row["env"] == coin and row["success_rate"] == 1.0
    assert row["success_threshold"] == 0.5  # the class attribute, not a table elsewhere
    kept = triage(episodes, tok.eos_token_id, None)
    assert kept.thresholds == {coin: 0.5} and len(kept.kept) == 2


def test_an_env_registered_from_another_module_is_played_by_name_not_by_default(
        monkeypatch) -> None:
    """Defaults take the package's envs only: a test's or a user's own ``@register`` (here a
    FunctionGym variant) is playable and scored, but never joins a default list unasked."""
    from mimesis.envs.function.gym import FunctionGym
    from mimesis.envs.registry import env_names, make, register, success_threshold

    registry._discover()
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))

    class LocalGym(FunctionGym):
        name = "LocalGym"

    register(LocalGym)
    assert make("LocalGym").split == "train" and success_threshold("LocalGym") == 1.0
    assert "LocalGym" not in env_names("train") and "LocalGym" not in env_names()
