"""Paired, trustworthy agent evaluation: identical agents get identical episodes, paired bootstrap
CIs, a success threshold for every env, and the stage's refusals (per-turn budget, missing arm)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from mimesis.envs.registry import success_thresholds
from mimesis.eval.agents import pairs as agent_pairs
from mimesis.eval.agents.arms import agent_sources, check_arms, trained_specs
from mimesis.eval.agents.evaluate import EvalRolloutParams, evaluate_agents, load_agent
from mimesis.eval.agents.pairs import (
    MIN_SCENARIOS,
    outcome_rows,
    paired_bootstrap,
    paired_differences,
    verdict,
)
from mimesis.eval.agents.run import AgentComparisonParams
from mimesis.eval.agents.stats import episode_rows, success_threshold
from mimesis.eval.agents.tables import comparison_table_markdown, diff_plot
from mimesis.rollout.records import Episode, ScenarioSpec, TurnRecord
from mimesis.simulator.runtime import UserSimulator
from mimesis.users.factory import make_user
from mimesis.users.reseed import reseed_user
from mimesis.users.spec import UserSpec

ENVS = ("FunctionGym", "TelepathyGym")
EIGHT = ("FunctionGym", "TravelGym", "TurtleGym", "TauGym", "PersuadeGym", "IntentionGym",
         "TelepathyGym", "SearchGym")


# ----------------------------------------------------------------------------- identical agents
def _sampling_users():
    """A frozen-style user (``TokenSampler.chat`` as ``generate_fn``, as ``load_user`` builds the
    frozen simulator) and an ``hf`` unseen user, both sampling at temperature 1."""
    from mimesis.models.base import load_base
    from mimesis.models.engine.sampling import SamplingParams, TokenSampler

    model, tok = load_base("tiny-llama")
    model.requires_grad_(False)
    sampler = TokenSampler(model, tok, SamplingParams(temperature=1.0, top_p=0.95,
                                                      max_new_tokens=8, batch_size=16), seed=13)
    hf = make_user(UserSpec(name="hf", kind="prompted", model="tiny-llama", temperature=1.0,
                            max_new_tokens=8), max_turns=3)
    return {"frozen": UserSimulator(sampler.chat, max_turns=3), "hf": hf}


def _trace(ep: Episode) -> list:
    return [ep.spec.to_prompt(), ep.reward, ep.termination,
            [(t.agent_text, t.obs_source, t.obs, t.user_reasoning) for t in ep.turns]]


def test_identical_agents_get_identical_episodes_and_user_replies():
    agent = load_agent("base", "tiny-llama")
    seen: dict[tuple[str, str], list[Episode]] = {}
    params = EvalRolloutParams(envs=ENVS, n_scenarios=3, max_turns=3, max_new_tokens=8,
                               max_completion_tokens=256, temperature=1.0, n_bootstrap=50)
    evaluate_agents({"a": agent, "b": agent}, _sampling_users(), params, progress=False,
                    on_episodes=lambda a, u, eps: seen.__setitem__((a, u), eps))
    for user in ("frozen", "hf"):
        a, b = seen["a", user], seen["b", user]
        assert [e.reward for e in a] == [e.reward for e in b]
        assert [_trace(e) for e in a] == [_trace(e) for e in b]  # same agent and user turns
        replies = [t.obs for e in a for t in e.turns if t.obs_source == "user" and t.obs]
        assert replies, f"{user} never replied: the test would compare nothing"
    outcomes = [r for (a, u), eps in seen.items() for r in outcome_rows(a, u, eps)]
    for d in paired_differences(outcomes, [("a", "b")], n_bootstrap=50):
        assert d["mean_reward"] == 0  # 3 scenarios per env, fewer than MIN_SCENARIOS: no CI
        assert math.isnan(d["mean_reward_ci_low"]) and math.isnan(d["mean_reward_ci_high"])
        assert d["mean_reward_verdict"] == d["success_rate_verdict"] == "noise"


def test_reseed_refuses_a_user_whose_randomness_cannot_restart():
    import random

    sim = UserSimulator(lambda batch: [random.choice(["yes", "no"]) for _ in batch])
    with pytest.raises(TypeError, match="reseed"):
        reseed_user(sim, 0)


# ----------------------------------------------------------------------------- paired bootstrap
def test_paired_bootstrap_of_a_constant_shift_is_that_shift():
    rng = np.random.default_rng(0)
    b = {"X": rng.uniform(0, 1, 20).tolist(), "Y": rng.uniform(0, 1, 15).tolist()}
    a = {"X": [v + 0.25 for v in b["X"]], "Y": [v - 0.05 for v in b["Y"]]}
    out = paired_bootstrap(a, b, n_bootstrap=500)
    assert out["X"] == pytest.approx((0.25, 0.25, 0.25))
    assert out["Y"] == pytest.approx((-0.05, -0.05, -0.05))
    assert out["ALL"] == pytest.approx((0.1, 0.1, 0.1))  # the mean of the env shifts


def test_paired_bootstrap_of_identical_arms_is_zero():
    x = {"X": [0.0, 1.0, 0.5, 1.0, 0.0], "Y": [1.0, 0.0, 0.0, 0.5, 1.0]}
    out = paired_bootstrap(x, x, n_bootstrap=500)
    assert out["X"] == out["Y"] == out["ALL"] == (0.0, 0.0, 0.0)
    assert verdict(*out["ALL"][1:]) == "noise"


def test_paired_bootstrap_resamples_both_arms_with_the_same_scenarios():
    # Scenarios differ a lot in difficulty; b is a + 0.05 (+ a little noise) on every one.
    rng = np.random.default_rng(1)
    hard = rng.uniform(0, 1, 40)
    a = {"X": hard.tolist()}
    b = {"X": (hard + 0.05 + rng.normal(0, 0.01, 40)).tolist()}
    diff, lo, hi = paired_bootstrap(b, a, n_bootstrap=2000)["X"]
    assert diff == pytest.approx(0.05, abs=0.005)
    assert hi - lo < 0.02 and lo > 0 and verdict(lo, hi) == "real"
    # Unpaired (independent scenario draws per arm) the same data give a CI wider than 0.1
    # that contains 0: what the paired resampling must not do.
    idx_a, idx_b = (rng.integers(0, 40, (2000, 40)) for _ in range(2))
    unpaired = np.asarray(b["X"])[idx_b].mean(1) - np.asarray(a["X"])[idx_a].mean(1)
    u_lo, u_hi = np.percentile(unpaired, [2.5, 97.5])
    assert u_hi - u_lo > 0.1 and u_lo < 0 < u_hi


def test_paired_bootstrap_needs_min_scenarios_for_a_ci():
    # Two scenarios that agree give a zero-width interval whatever the truth (each resample
    # draws them, in some mix): with fewer than MIN_SCENARIOS there is no CI and no "real".
    assert MIN_SCENARIOS == 5
    few = [1.0] * (MIN_SCENARIOS - 1)
    out = paired_bootstrap({"X": few, "Y": [1.0, 0.0] * 3}, {"X": [0.0] * 4, "Y": [0.0] * 6})
    assert out["X"][0] == 1.0 and math.isnan(out["X"][1]) and verdict(*out["X"][1:]) == "noise"
    assert out["Y"][1] < out["Y"][2]  # six scenarios: an interval
    assert math.isnan(out["ALL"][1])  # one env without a CI: no overall CI either
    with pytest.raises(ValueError, match="paired"):
        paired_bootstrap({"X": [1.0, 0.0]}, {"X": [1.0]})


def _ep(env: str, seed: int, reward: float, turns: list[TurnRecord] | None = None) -> Episode:
    return Episode.model_construct(env=env, spec=ScenarioSpec(env=env, seed=seed), reward=reward,
                                   termination="answer", user_end_reason=None,
                                   turns=turns or [TurnRecord(agent_text="x")])


def test_paired_differences_rows_table_and_plot(tmp_path):
    rows = []
    for user in ("frozen", "agenda"):
        for agent, shift in (("base", 0.0), ("grpo", 1.0)):
            eps = [_ep("FunctionGym", s, float(s % 2 or shift)) for s in range(6)]
            eps += [_ep("TelepathyGym", s, 0.5 if s % 3 == 0 else 0.0) for s in range(6)]
            rows += outcome_rows(agent, user, eps)
    diffs = paired_differences(rows, [("grpo", "base")], n_bootstrap=200)
    assert [(d["user"], d["env"]) for d in diffs] == [
        (u, e) for u in ("frozen", "agenda") for e in ("FunctionGym", "TelepathyGym", "ALL")]
    f, t, overall = diffs[:3]
    assert f["mean_reward"] == pytest.approx(0.5) and f["n"] == f["n_scenarios"] == 6
    assert f["mean_reward_a"] == 1.0 and f["mean_reward_b"] == pytest.approx(0.5)
    assert t["mean_reward"] == 0.0 and t["mean_reward_verdict"] == "noise"
    assert t["success_rate_a"] == pytest.approx(1 / 3)  # 0.5 is a right guess in TelepathyGym
    assert overall["mean_reward"] == pytest.approx(0.25) and overall["n"] == 12
    assert overall["mean_reward_ci_low"] > 0 and overall["mean_reward_verdict"] == "real"
    table = comparison_table_markdown(diffs)
    assert "| grpo − base | frozen | ALL | 12 | 0.250 |" in table and "real" in table
    data = diff_plot(diffs, tmp_path / "plots" / "agent_diffs.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    with pytest.raises(ValueError, match="same scenarios"):
        paired_differences(rows[:-1], [("grpo", "base")])
    with pytest.raises(ValueError, match="no episodes"):
        paired_differences(rows, [("csd", "base")])


# ----------------------------------------------------------------------------- success, format
def test_every_env_has_a_success_threshold_and_an_unknown_env_is_an_error():
    from mimesis.envs import list_envs

    # the values evaluation has always used, now declared by each env class
    thresholds = {e: t for e, t in success_thresholds().items() if e in EIGHT}
    assert list(thresholds) == list(EIGHT)  # the table order the report's success line prints
    assert thresholds == {"FunctionGym": 1.0, "TravelGym": 1.0, "TurtleGym": 1.0, "TauGym": 1.0,
                          "PersuadeGym": 0.5, "IntentionGym": 1.0, "TelepathyGym": 0.5,
                          "SearchGym": 1.0}
    shipped = {s.name for s in list_envs() if s.name in EIGHT}
    assert shipped == set(EIGHT)  # the eight are the registered envs of the package
    assert all(0 < success_threshold(e) <= 1 for e in EIGHT)
    with pytest.raises(ValueError, match="no success threshold"):
        success_threshold("NoSuchGym")
    with pytest.raises(ValueError, match="no success threshold"):
        episode_rows("a", "s", [_ep("NoSuchGym", 0, 1.0)])


def test_format_compliance_counts_tagged_actions_the_env_received():
    turns = [TurnRecord(agent_text="[search] test", kind="search"),
             TurnRecord(agent_text="**[Answer]**: 4", kind="answer"),
             TurnRecord(agent_text="what is f(1, 2, 3, 4)?", kind="action"),  # untagged
             TurnRecord(agent_text="[answer] 4")]  # cut by the token budget: never reached the env
    row = episode_rows("a", "s", [_ep("FunctionGym", 0, 0.0, turns)])[0]
    assert row["format_compliance"] == 0.5 and row["mean_turns"] == 4


# ----------------------------------------------------------------------------- stage refusals
def _arm(folder: Path, **params) -> Path:
    (folder / "model").mkdir(parents=True)
    scenario = {"envs": ["FunctionGym"], "env_kwargs": {}, "steps": 1, "scenarios_per_step": 2,
                "scenario_seed": 0, "max_new_tokens": 48}
    (folder / "meta.json").write_text(json.dumps({"stage": folder.name, "base_model": "tiny-llama",
                                                  "params": {**scenario, **params}}))
    return folder


def _arms(root: Path, **params) -> tuple[Path, Path, Path]:
    train = root / "train_agent"
    for name in ("grpo", "grpo-prompted"):
        _arm(train / name, user={"temperature": 0.8}, **params)
    # SFT's params have keys of their own (and a group size RL would refuse).
    sft = _arm(root / "sft_agent", epochs=2, group_size=1, **params)
    return train, _arm(root / "distill_agent", **params), sft


ALL_AGENTS = {"base": True, "comparisons": [["sft", "base"], ["grpo", "sft"],
                                           ["grpo", "grpo-prompted"], ["csd", "grpo"]]}


def _params(**kw) -> AgentComparisonParams:
    return AgentComparisonParams(envs=("FunctionGym",), n_scenarios=2, max_new_tokens=48,
                                 n_bootstrap=50, **{**ALL_AGENTS, **kw})


def test_stage_refuses_an_eval_budget_other_than_training(tmp_path):
    from mimesis.stages.evaluate_agents import EvaluateAgentsParams, run

    train, distill, sft = _arms(tmp_path, max_new_tokens=32)
    params = EvaluateAgentsParams(profile="smoke", agents=_params())
    out = tmp_path / "evaluate_agents"
    with pytest.raises(ValueError, match=r"max_new_tokens is 48 .*grpo-prompted.*: 32"):
        run(tmp_path / "no_freeze_user", tmp_path / "no_label", out, params, train, distill, sft)
    assert not out.exists()  # refused before any work


def test_arms_resolve_and_pass_checks(tmp_path):
    train, distill, sft = _arms(tmp_path)
    p = _params()
    sources = agent_sources(train, distill, sft, p)
    assert list(sources) == ["base", "sft", "grpo-prompted", "grpo", "csd"]
    assert sources["base"] == "tiny-llama" and sources["grpo"] == train / "grpo"
    check_arms(sources, p)
    assert [s.seed for s in trained_specs(sft)] == [0, 1]  # extra SFT keys are ignored
    meta = json.loads((sft / "meta.json").read_text())
    (sft / "meta.json").write_text(json.dumps({**meta, "scenarios_drawn": 3}))
    assert [s.seed for s in trained_specs(sft)] == [0, 1, 2]  # dynamic sampling's replacements
    # sft_agent's own params: one pass of len(envs) x scenarios_per_env scenarios.
    params = {k: v for k, v in meta["params"].items() if k not in ("steps", "scenarios_per_step")}
    (sft / "meta.json").write_text(json.dumps({**meta, "params": {
        **params, "envs": ["FunctionGym", "TravelGym"], "scenarios_per_env": 2}}))
    assert [(s.env, s.seed) for s in trained_specs(sft)] == [
        ("FunctionGym", 0), ("TravelGym", 1), ("FunctionGym", 2), ("TravelGym", 3)]
    del params["scenario_seed"]
    (sft / "meta.json").write_text(json.dumps({**meta, "params": params}))
    with pytest.raises(KeyError, match="scenario_seed"):
        trained_specs(sft)


def test_without_the_base_agent_only_trained_arms_are_evaluated_and_compared(tmp_path):
    train, distill, sft = _arms(tmp_path)
    p = _params(base=False, csd=False, train_agent_arms=["grpo"], comparisons=[["grpo", "sft"]])
    sources = agent_sources(train, distill, sft, p)
    assert list(sources) == ["sft", "grpo"]  # no base model loaded or played
    check_arms(sources, p)
    with pytest.raises(ValueError, match=r"comparison \['sft', 'base'\]"):
        _params(base=False, comparisons=[["sft", "base"]])
    # the arms are still checked against one base model, the SFT start's
    meta = json.loads((train / "grpo" / "meta.json").read_text())
    (train / "grpo" / "meta.json").write_text(json.dumps({**meta, "base_model": "other"}))
    with pytest.raises(ValueError, match="every arm must start from the base model"):
        check_arms(sources, p)


def test_a_missing_arm_is_named(tmp_path):
    train, distill, sft = _arms(tmp_path)
    import shutil

    shutil.rmtree(train / "grpo-prompted")
    with pytest.raises(FileNotFoundError, match="agent arm 'grpo-prompted'"):
        agent_sources(train, distill, sft, _params())
    with pytest.raises(FileNotFoundError, match="agent arm 'sft'"):
        agent_sources(train, distill, None, _params())


def test_arms_on_another_base_or_on_heldout_scenarios_are_refused(tmp_path):
    train, distill, sft = _arms(tmp_path)
    meta = json.loads((distill / "meta.json").read_text())
    (distill / "meta.json").write_text(json.dumps({**meta, "base_model": "smollm2-135m"}))
    sources = agent_sources(train, distill, sft, _params())
    with pytest.raises(ValueError, match="base model"):
        check_arms(sources, _params())
    (distill / "meta.json").write_text(json.dumps(meta))
    near = _params(seed_offset=1)  # held-out seeds 1, 2: seed 1 was trained on
    with pytest.raises(ValueError, match="agent arm 'sft'.*used in training"):
        check_arms(agent_sources(train, distill, sft, near), near)


def test_comparisons_must_name_two_evaluated_agents():
    with pytest.raises(ValueError, match="comparison"):
        _params(comparisons=[["grpo", "nope"]])
    with pytest.raises(ValueError, match="comparison"):
        _params(comparisons=[["grpo", "grpo"]])


def test_doctests():
    import doctest

    assert doctest.testmod(agent_pairs).failed == 0


# ----------------------------------------------------------------------------- end to end
def _tiny_adapter(folder: Path) -> None:
    """A LoRA adapter of tiny-llama (non-zero B) + its weight hashes, as an agent stage writes."""
    import torch
    from peft import LoraConfig, get_peft_model

    from mimesis.models.base import base_dir, load_base
    from mimesis.models.merge import adapter_sha256

    base, _ = load_base("tiny-llama")
    model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj"],
                                            task_type="CAUSAL_LM"))
    with torch.no_grad():
        for name, q in model.named_parameters():
            if "lora_B" in name:
                q.normal_(0, 0.5)
    model.save_pretrained(folder / "model")
    meta = json.loads((folder / "meta.json").read_text())
    meta.update(base_model_dir=base_dir("tiny-llama").name, weights=adapter_sha256(folder / "model"))
    (folder / "meta.json").write_text(json.dumps(meta))


def _frozen(root: Path) -> Path:
    """A frozen-simulator folder: tiny-llama with perturbed weights (so that the ``hf`` tiny-llama
    user is not the training simulator), hashed like freeze_user does."""
    import torch

    from mimesis.io import write_json
    from mimesis.models.base import load_base
    from mimesis.simulator.frozen import hash_files

    model, tok = load_base("tiny-llama")
    with torch.no_grad():
        next(model.parameters()).add_(0.01)
    model.save_pretrained(root / "simulator")
    tok.save_pretrained(root / "simulator")
    write_json(root / "simulator" / "meta.json",
               {"base_model": "tiny-llama", "files": hash_files(root / "simulator")})
    return root


@pytest.mark.slow
def test_run_agent_evaluation_writes_paired_report(tmp_path):
    from mimesis.eval.agents.run import run_agent_evaluation
    from mimesis.io import write_jsonl
    from mimesis.schemas import Conversation, Turn

    train, distill, sft = _arms(tmp_path / "arms", max_new_tokens=8)
    for folder in (train / "grpo", train / "grpo-prompted", distill, sft):
        _tiny_adapter(folder)
    # The control arm trained against the prompted base model: the "prompted-tiny" user below.
    meta = json.loads((train / "grpo-prompted" / "meta.json").read_text())
    meta["user"] = {"kind": "prompted", "model": "tiny-llama", "prompt_style": "prompted_user"}
    (train / "grpo-prompted" / "meta.json").write_text(json.dumps(meta))
    corpus = tmp_path / "test.jsonl"
    write_jsonl(corpus, [Conversation(id="c", turns=[Turn(role="user", text="is it big?"),
                                                     Turn(role="assistant", text="What?"),
                                                     Turn(role="user", text="it is 10")])])
    p = AgentComparisonParams(
        envs=ENVS, n_scenarios=2, max_turns=2, max_new_tokens=8, max_completion_tokens=256,
        n_bootstrap=50, user=_user_sampling(), **ALL_AGENTS,
        unseen_users=[{"name": "agenda", "kind": "agenda"},
                      {"name": "prompted-tiny", "kind": "hf", "model": "tiny-llama",
                       "max_new_tokens": 8}])
    out = tmp_path / "evaluate_agents"
    sources = agent_sources(train, distill, sft, p)
    metrics = run_agent_evaluation(_frozen(tmp_path / "freeze_user"), sources, corpus, out, p)
    users = {"frozen", "agenda", "prompted-tiny"}
    assert list(metrics["by_agent"]) == ["base", "sft", "grpo-prompted", "grpo", "csd"]
    assert set(metrics["by_agent"]["grpo"]) == users
    cell = metrics["by_agent"]["csd"]["frozen"]["ALL"]
    assert 0 <= cell["format_compliance"] <= 1 and cell["mean_turns"] >= 1
    assert set(metrics["diff"]) == {"sft-base", "grpo-sft", "grpo-grpo-prompted", "csd-grpo"}
    overall = metrics["diff"]["grpo-sft"]["agenda"]["ALL"]
    # 2 scenarios per env, fewer than MIN_SCENARIOS: no interval, so no "real" verdict
    assert overall["n"] == 4 and overall["mean_reward_ci_low"] is None
    assert overall["mean_reward_ci_high"] is None
    report = json.loads((out / "agents.json").read_text())
    assert len(report["comparisons"]) == 4 * len(users) * (len(ENVS) + 1)
    assert {"rows", "success_thresholds"} <= set(report)
    table = (out / "agents.md").read_text()
    assert "## Paired differences" in table and "| grpo − grpo-prompted |" in table
    # Scored under its own training user, the control is marked and that user is not averaged
    # into its unseen mean; the other arms keep both unseen users.
    assert report["trained_against"] == {"grpo-prompted": ["prompted-tiny"]}
    overall = {(r["agent"], r["simulator"]): r["mean_reward"] for r in report["rows"]
               if r["env"] == "ALL"}
    row = next(line for line in table.splitlines() if line.startswith("| grpo-prompted |"))
    assert row.split(" | ")[3].endswith(" †")
    assert row.split(" | ")[-1].rstrip(" |") == f"{overall['grpo-prompted', 'agenda']:.3f}"
    row = next(line for line in table.splitlines() if line.startswith("| grpo |"))
    assert "†" not in row and row.split(" | ")[-1].rstrip(" |") == (
        f"{(overall['grpo', 'agenda'] + overall['grpo', 'prompted-tiny']) / 2:.3f}")
    own = {(d["a"], d["b"], d["user"]): d["trained_against_user"] for d in report["comparisons"]
           if d["env"] == "ALL"}
    assert own["grpo", "grpo-prompted", "prompted-tiny"] == ["grpo-prompted"]
    assert own["grpo", "grpo-prompted", "agenda"] == [] and own["grpo", "sft", "prompted-tiny"] == []
    assert "| grpo − grpo-prompted | prompted-tiny († grpo-prompted) | ALL |" in table
    for name in ("agents.png", "agent_diffs.png"):
        assert (out / "plots" / name).stat().st_size > 1000
    episodes = (out / "agent_episodes.jsonl").read_text().splitlines()
    assert len(episodes) == 5 * len(users) * len(ENVS) * 2


def test_unseen_users_only_load_no_simulator(tmp_path, monkeypatch):
    import mimesis.users.frozen
    from mimesis.eval.agents.run import run_agent_evaluation

    def no_load(*args, **kwargs):
        raise AssertionError("the frozen simulator was loaded")

    monkeypatch.setattr(mimesis.users.frozen, "load_frozen_user", no_load)
    train, distill, sft = _arms(tmp_path / "arms", max_new_tokens=8)
    for folder in (train / "grpo", sft):
        _tiny_adapter(folder)
    p = AgentComparisonParams(
        envs=ENVS, n_scenarios=2, max_turns=2, max_new_tokens=8, max_completion_tokens=256,
        n_bootstrap=50, user=_user_sampling(), base=False, csd=False, train_agent_arms=["grpo"],
        frozen_user=False, unseen_users=[{"name": "agenda", "kind": "agenda"}],
        comparisons=[["grpo", "sft"]])
    out = tmp_path / "evaluate_agents"
    metrics = run_agent_evaluation(_frozen(tmp_path / "freeze_user"),
                                   agent_sources(train, distill, sft, p), tmp_path / "unused.jsonl",
                                   out, p)
    assert list(metrics["by_agent"]) == ["sft", "grpo"]
    assert set(metrics["by_agent"]["grpo"]) == {"agenda"}
    assert set(metrics["diff"]["grpo-sft"]) == {"agenda"}
    assert metrics["diff"]["grpo-sft"]["agenda"]["ALL"]["n"] == 2 * len(ENVS)
    with pytest.raises(ValueError, match="no user to evaluate under"):
        AgentComparisonParams(frozen_user=False, unseen_users=[])


def _user_sampling():
    from mimesis.users.spec import UserSamplingParams

    return UserSamplingParams(max_new_tokens=8)


def test_rl_arms_with_different_budgets_are_refused(tmp_path):
    train, distill, sft = _arms(tmp_path)
    p = _params()
    check_arms(agent_sources(train, distill, sft, p), p)  # equal budgets pass
    meta = json.loads((distill / "meta.json").read_text())
    meta["params"]["steps"] = 3  # csd trained longer than grpo: csd - grpo would mix two effects
    (distill / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=r"one training budget.*'csd': \{'steps': 3\}"):
        check_arms(agent_sources(train, distill, sft, p), p)
