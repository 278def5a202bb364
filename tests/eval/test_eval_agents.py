"""Agent evaluation: held-out scenarios, aggregation, a tiny-model run end to end, the report,
and loading train_agent-style adapters."""

from __future__ import annotations

import doctest
import json
import re
import time
from pathlib import Path

import pytest

from mimesis.envs import make
from mimesis.eval.agents import evaluate as ag
from mimesis.eval.agents import stats as agent_stats
from mimesis.eval.agents import tables as agent_tables
from mimesis.eval.agents.evaluate import (
    HELDOUT_SEED_OFFSET,
    EvalRolloutParams,
    check_disjoint,
    evaluate_agents,
    heldout_specs,
    load_agent,
)
from mimesis.eval.agents.stats import episode_rows
from mimesis.eval.agents.tables import agent_plot, agent_table_markdown
from mimesis.models.engine.sampling import Sample
from mimesis.models.engine.tokens import encode
from mimesis.rollout.records import Episode, ScenarioSpec
from mimesis.rollout.scenarios import scenario_specs
from mimesis.schemas import Conversation, Turn
from mimesis.simulator.runtime import UserSimulator
from mimesis.stages.distill_agent import DistillAgentParams
from mimesis.stages.train_agent import TrainAgentParams
from mimesis.users.offline import AgendaUser, ReplayUser, goal_prompt

ENVS = ("FunctionGym", "TelepathyGym")


@pytest.fixture(scope="module")
def tiny():
    return load_agent("base", "tiny-llama")


def _simulators() -> dict[str, UserSimulator]:
    corpus = [Conversation(id="c", turns=[Turn(role="user", text="is it big?"),
                                          Turn(role="assistant", text="What is f(1, 2, 3, 4)?"),
                                          Turn(role="user", text="it is 10")])]
    return {"agenda": UserSimulator(AgendaUser(), max_turns=4, system_prompt_fn=goal_prompt),
            "replay": UserSimulator(ReplayUser(corpus), max_turns=4, system_prompt_fn=goal_prompt)}


# ----------------------------------------------------------------------------- scenarios
def test_heldout_scenarios_never_overlap_training_scenarios(monkeypatch):
    import mimesis.envs
    from mimesis.envs.registry import EnvSpec

    # scenario_specs only needs the splits; list_envs would load every env's task list.
    monkeypatch.setattr(mimesis.envs, "list_envs", lambda: [
        EnvSpec("FunctionGym", "train", None, ""), EnvSpec("TravelGym", "train", None, "")])
    ev = heldout_specs(("FunctionGym", "TravelGym", "TelepathyGym"), 50)
    procedural = {"envs": ["FunctionGym", "TravelGym"]}
    paper = TrainAgentParams(steps=200, scenarios_per_step=16, **procedural)  # paper scale
    for train in (TrainAgentParams(**procedural), DistillAgentParams(**procedural), paper,
                  DistillAgentParams(steps=100, scenarios_per_step=16, **procedural)):
        check_disjoint(ev, scenario_specs(train))
        assert not {s.seed for s in ev} & {s.seed for s in scenario_specs(train)}
    assert min(s.seed for s in ev) == HELDOUT_SEED_OFFSET
    # The tasks themselves differ too, not only the seeds.
    def task_ids(specs):
        return {make(s.env).reset(seed=s.seed, options=s.options or None)[1]["task_id"]
                for s in specs if s.env == "FunctionGym"}
    assert not task_ids(ev) & task_ids(scenario_specs(paper)[:200])
    # Fixed task lists of training envs: evaluation takes only the held-back part.
    fixed = TrainAgentParams(envs=["TurtleGym", "PersuadeGym"], steps=40, scenarios_per_step=4)
    ev_fixed = heldout_specs(("TurtleGym", "PersuadeGym"), 32)
    check_disjoint(ev_fixed, scenario_specs(fixed))
    trained = {(s.env, s.options["index"]) for s in scenario_specs(fixed)}
    assert len(trained) > 20 and not trained & {(s.env, s.options["index"]) for s in ev_fixed}
    with pytest.raises(ValueError, match="used in training"):
        check_disjoint(ev + [ScenarioSpec(env="FunctionGym", seed=0)],
                       scenario_specs(TrainAgentParams(**procedural)))


def test_fixed_task_envs_spread_indices_over_the_task_list():
    specs = heldout_specs(("TelepathyGym",), 4)
    n = make("TelepathyGym").scenario_count()
    assert [s.options["index"] for s in specs] == [0, n // 4, n // 2, 3 * n // 4]
    assert len(heldout_specs(("TelepathyGym",), n + 10)) == n  # capped, no repeats
    with pytest.raises(ValueError, match="unknown environments"):
        heldout_specs(("NoGym",), 2)


# ----------------------------------------------------------------------------- aggregation
def _episode(env: str, reward: float, termination: str = "answer", turns: int = 2) -> Episode:
    from mimesis.rollout.records import TurnRecord

    return Episode.model_construct(
        env=env, reward=reward, termination=termination, user_end_reason=None,
        turns=[TurnRecord(agent_text="x", obs="ok", obs_source="user" if k else "env")
               for k in range(turns)])


def test_episode_rows_mean_success_and_terminations():
    eps = [_episode("FunctionGym", 1.0), _episode("FunctionGym", 0.0, "max_turns"),
           _episode("FunctionGym", 0.0, "user_end"), _episode("TelepathyGym", 0.5),
           _episode("TelepathyGym", 0.875, turns=4), _episode("TelepathyGym", 0.0, "finish")]
    rows = {r["env"]: r for r in episode_rows("a", "s", eps, n_bootstrap=200)}
    f, t = rows["FunctionGym"], rows["TelepathyGym"]
    assert f["n"] == 3 and f["mean_reward"] == pytest.approx(1 / 3)
    assert f["success_rate"] == pytest.approx(1 / 3)
    assert t["mean_reward"] == pytest.approx((0.5 + 0.875) / 3)
    assert t["success_rate"] == pytest.approx(2 / 3)  # a right guess scores >= 0.5
    assert f["terminations"] == {"answer": 1, "finish": 0, "user_end": 1, "max_turns": 1,
                                 "max_tokens": 0}
    assert t["mean_turns"] == pytest.approx(8 / 3) and t["mean_user_turns"] == pytest.approx(5 / 3)
    assert f["reward_ci_low"] <= f["mean_reward"] <= f["reward_ci_high"]
    travel = episode_rows("a", "s", [_episode("TravelGym", 0.75)])[0]
    assert travel["success_rate"] == 0.0  # partial credit is not success
    overall = agent_stats.overall_rows(list(rows.values()))[0]
    assert overall["mean_reward"] == pytest.approx((f["mean_reward"] + t["mean_reward"]) / 2)


# ----------------------------------------------------------------------------- end to end
def test_evaluate_agents_tiny_model_with_offline_users(tiny):
    seen: dict[tuple[str, str], list[Episode]] = {}
    params = EvalRolloutParams(envs=ENVS, n_scenarios=2, max_turns=2, max_new_tokens=12,
                               max_completion_tokens=256, n_bootstrap=100)
    started = time.perf_counter()
    rows = evaluate_agents({"base": tiny}, _simulators(), params, progress=False,
                           on_episodes=lambda a, s, eps: seen.__setitem__((a, s), eps))
    elapsed = time.perf_counter() - started
    print(f"evaluate_agents tiny: 2 users x 2 envs x 2 scenarios in {elapsed:.1f} s")
    cells = [r for r in rows if r["env"] != "ALL"]
    assert [(r["simulator"], r["env"]) for r in cells] == [
        (s, e) for s in ("agenda", "replay") for e in ENVS]
    for r in cells:
        eps = [e for e in seen["base", r["simulator"]] if e.env == r["env"]]
        assert r["n"] == len(eps) == 2
        assert r["mean_reward"] == pytest.approx(sum(e.reward for e in eps) / 2)
        assert sum(r["terminations"].values()) == 2
        assert 0 <= r["success_rate"] <= 1 and r["run_seconds"] > 0
    assert any(t.obs_source == "user" and t.obs for e in seen["base", "replay"] for t in e.turns)
    eps = seen["base", "agenda"]
    assert {e.spec.seed for e in eps} == {HELDOUT_SEED_OFFSET, HELDOUT_SEED_OFFSET + 1}
    assert len({e.task_id for e in eps if e.env == "TelepathyGym"}) == 2
    assert [r["env"] for r in rows[-2:]] == ["ALL", "ALL"]


class AnsweringAgent:
    """Token-level fake policy: ``[search] test`` first, then ``[answer]`` with the right value
    for the scenarios in ``known`` (test case → value) and a wrong one otherwise."""

    def __init__(self, tok, known: dict[str, str]) -> None:
        self.tok, self.known = tok, known

    def __call__(self, prompts, limits) -> list[Sample]:
        out = []
        for prompt, limit in zip(prompts, limits, strict=True):
            text = self.tok.decode(prompt, skip_special_tokens=False)
            case = re.search(r"Test case: (a=[^.]+)\.", text)
            reply = ("[search] test" if case is None
                     else f"[answer] {self.known.get(case.group(1), '-12345')}")
            ids = (encode(self.tok, reply) + [self.tok.eos_token_id])[:limit]
            out.append(Sample(ids, [0.0] * len(ids)))
        return out


def test_evaluate_agents_rows_follow_the_episode_rewards(tiny):
    _, tok = tiny
    spec = heldout_specs(("FunctionGym",), 1)[0]
    env = make("FunctionGym", max_turns=3)
    env.reset(seed=spec.seed)
    case = env._case_text()
    known = {case: f"{env.task.expected:g}"}
    params = EvalRolloutParams(envs=("FunctionGym",), n_scenarios=2, max_turns=3,
                               max_new_tokens=24, n_bootstrap=100)
    rows = evaluate_agents({"scripted": (None, tok)}, {"agenda": _simulators()["agenda"]},
                           params, progress=False,
                           make_sampler=lambda model, t, p: AnsweringAgent(t, known))
    row = rows[0]
    assert (row["n"], row["mean_reward"], row["success_rate"]) == (2, 0.5, 0.5)
    assert row["terminations"]["answer"] == 2


# ----------------------------------------------------------------------------- report
def test_table_and_plot_are_written(tmp_path):
    eps = [_episode("FunctionGym", 1.0), _episode("FunctionGym", 0.0),
           _episode("TelepathyGym", 0.75), _episode("TelepathyGym", 0.0)]
    rows = []
    for agent in ("base", "grpo"):
        for sim in ("frozen", "agenda", "replay"):
            rows += episode_rows(agent, sim, eps, n_bootstrap=50)
    table = agent_table_markdown(rows, training="frozen")
    assert "| agent | frozen (training) | agenda | replay | mean over unseen users |" in table
    assert "| base | 0.438 | 0.438 | 0.438 | 0.438 |" in table
    assert "| base | agenda | FunctionGym | 2 | 0.500 |" in table
    assert "| agent turns | format |" in table and "SearchGym ≥ 1" in table  # every threshold
    path = agent_plot(rows, tmp_path / "plots" / "agents.png")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


# ----------------------------------------------------------------------------- loading
def _adapter_dir(root: Path) -> Path:
    """A train_agent-style output: LoRA adapter (non-zero B) + meta.json with weight hashes."""
    import torch
    from peft import LoraConfig, get_peft_model

    from mimesis.models.base import base_dir, load_base
    from mimesis.models.merge import adapter_sha256

    base, tok = load_base("tiny-llama")
    model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                                            task_type="CAUSAL_LM"))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)
    model.save_pretrained(root / "model")
    tok.save_pretrained(root / "model")
    (root / "meta.json").write_text(json.dumps({
        "stage": "train_agent", "base_model": "tiny-llama",
        "base_model_dir": base_dir("tiny-llama").name, "finetune": "lora",
        "weights": adapter_sha256(root / "model")}))
    return root


def test_load_agent_merges_a_verified_adapter(tmp_path, tiny):
    import torch

    from mimesis.models.merge import StaleTrainingError

    root = _adapter_dir(tmp_path / "train_agent")
    model, tok = load_agent("train_agent", root)
    ids = torch.tensor([encode(tok, "hello there")])
    with torch.inference_mode():
        diff = (model(input_ids=ids).logits - tiny[0](input_ids=ids).logits).abs().max()
    assert diff > 1e-3 and not hasattr(model, "peft_config")  # merged, and not the base
    assert not any(p.requires_grad for p in model.parameters())
    weights = next((root / "model").glob("*.safetensors"))
    weights.write_bytes(weights.read_bytes()[:-8] + b"\0" * 8)
    with pytest.raises(StaleTrainingError, match="does not match"):
        load_agent("adapter", root)
    with pytest.raises(ValueError, match="agent kind"):
        load_agent("lora", root)


def test_doctests():
    assert doctest.testmod(ag).failed == 0
    assert doctest.testmod(agent_stats).failed == 0
    assert doctest.testmod(agent_tables).failed == 0
