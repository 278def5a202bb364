"""train_agent / distill_agent stages on a tiny model: GRPO arms (frozen and prompted users) move
their adapters and log rewards to MLflow, train at the level the difficulty rule chose and record
their reward trend, resume, the frozen simulator's guards, distill_agent from a start adapter and
its refusal of a changed one."""

from __future__ import annotations

import importlib.util
import json
import os
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from mimesis.params import PROFILES, build, stage_params
from mimesis.rl.difficulty_run import DifficultyParams
from mimesis.simulator.frozen import FrozenSimulatorError
from mimesis.stages.distill_agent import DistillAgentParams
from mimesis.stages.train_agent import TrainAgentParams

_spec = importlib.util.spec_from_file_location(
    "train_agent_data", Path(__file__).with_name("test_train_agent_data.py"))
data = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(data)
REPO = Path(__file__).resolve().parents[2]


def _train_params(**overrides) -> TrainAgentParams:
    return data.small_params(TrainAgentParams, base_model="tiny-llama", steps=2,
                             keep_checkpoints=True, **overrides)


# docs/claim.md rule 1 on the test env: 2 levels x 2 training scenarios x 1 episode
LADDER = DifficultyParams(ladder=[{"env": "ParityGym", "env_kwargs": {"difficulty": 1}},
                                  {"env": "ParityGym", "env_kwargs": {"difficulty": 3}}],
                          scenarios=2, episodes=1, min_episodes=2)


@pytest.fixture(scope="module")
def trained(tmp_path_factory, empty_mlflow_store):
    """freeze_user folder (tiny) -> train_agent (the difficulty ladder measured, then 2 GRPO
    steps on ParityGym at the chosen level), MLflow in tmp."""
    from mimesis.stages.train_agent import run

    root = tmp_path_factory.mktemp("agent")
    mp = pytest.MonkeyPatch()
    mp.chdir(root)
    mp.setenv("MLFLOW_TRACKING_URI", empty_mlflow_store(root / "mlflow.db"))
    mp.setenv("MIMESIS_EXPERIMENT", "test-agent")
    data.build_frozen_tiny(root / "freeze_user" / "simulator")
    run(root / "freeze_user", root / "train_agent", _train_params(difficulty=LADDER))
    yield root
    mp.undo()


def _runs(root: Path, name: str):
    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{root / 'mlflow.db'}")
    return mlflow.search_runs(experiment_names=["test-agent"],
                              filter_string=f"attributes.run_name = '{name}'",
                              output_format="list")


@pytest.mark.slow
def test_grpo_steps_move_the_adapter_and_log_rewards(trained):
    from mimesis.models.base import load_base
    from mimesis.models.merge import adapter_sha256

    stage = json.loads((trained / "train_agent" / "meta.json").read_text())
    assert set(stage["arms"]) == {"grpo", "grpo-prompted"}
    assert stage["arms"]["grpo-prompted"] == {"kind": "prompted", "model": "tiny-llama",
                                              "prompt_style": "prompted_user"}
    for arm in ("grpo", "grpo-prompted"):
        out = trained / "train_agent" / arm
        meta = json.loads((out / "meta.json").read_text())
        assert meta["arm"] == arm and meta["start"] == "base"
        assert meta["steps"] == 2 and meta["episodes"] == 16 and meta["finetune"] == "lora"
        assert meta["weights"] == adapter_sha256(out / "model")
        assert 0.0 <= meta["raw_signal_frac"] <= meta["kept_signal_frac"] <= 1.0
        assert meta["scenarios_drawn"] >= 2 * 2
        # LoRA B starts at zero: any non-zero B is the optimizer's doing
        from peft import PeftModel

        model = PeftModel.from_pretrained(load_base("tiny-llama")[0], str(out / "model"))
        moved = [n for n, p in model.named_parameters() if "lora_B" in n and p.abs().sum() > 0]
        assert moved
        rewards = json.loads((out / "train_log.json").read_text())["rewards"]
        assert [r["step"] for r in rewards] == [1, 2]
        assert all("reward/ParityGym" in r and "format_compliance" in r for r in rewards)
        assert len((out / "episodes.jsonl").read_text().splitlines()) == 16
        # MLflow: one child run per arm with the reward per env per step, and the reward plot
        from mlflow import MlflowClient

        (run,) = _runs(trained, f"train_agent/{arm}")
        history = MlflowClient().get_metric_history(run.info.run_id, "reward/ParityGym")
        assert sorted(m.step for m in history) == [1, 2]
        assert [r["reward/ParityGym"] for r in rewards] == [m.value for m in
                                                           sorted(history, key=lambda m: m.step)]
        artifacts = {a.path for a in MlflowClient().list_artifacts(run.info.run_id)}
        assert {"rewards.png", "episodes.jsonl"} <= artifacts
        assert meta["simulator"]["weights_fingerprint"]
    # the prompted arm met other user replies than the frozen arm (another user model)
    replies = {arm: [json.loads(x)["turns"][0]["obs"] for x in
                     (trained / "train_agent" / arm / "episodes.jsonl").read_text().splitlines()]
               for arm in ("grpo", "grpo-prompted")}
    assert replies["grpo"] != replies["grpo-prompted"]


@pytest.mark.slow
def test_arms_train_at_the_chosen_level_and_record_their_reward_trend(trained):
    from mlflow import MlflowClient

    out = trained / "train_agent"
    record = json.loads((out / "difficulty.json").read_text())
    assert set(record) == {"enabled", "env", "env_kwargs", "selection"}  # numbers, no episodes
    selection = record["selection"]
    assert record["enabled"] is True and record["env"] == "ParityGym"
    assert record["env_kwargs"] == selection["levels"][selection["chosen"]]["env_kwargs"]
    assert [lv["env_kwargs"] for lv in selection["levels"]] == [{"difficulty": 1},
                                                                {"difficulty": 3}]
    assert [lv["n_episodes"] for lv in selection["levels"]] == [2, 2]
    assert "Chosen: level" in (out / "difficulty.md").read_text()
    for arm in ("grpo", "grpo-prompted"):
        meta = json.loads((out / arm / "meta.json").read_text())
        assert meta["params"]["env_kwargs"]["ParityGym"] == record["env_kwargs"]
        rows = [json.loads(x) for x in (out / arm / "episodes.jsonl").read_text().splitlines()]
        assert {json.dumps(r["spec"]["env_kwargs"]) for r in rows} == {
            json.dumps(record["env_kwargs"])}  # every trained episode at the chosen level
        trend = meta["reward_trend"]
        assert trend["first_steps"] == [1] and trend["last_steps"] == [2]
        assert trend["units"] == "groups" and trend["source"] == "episodes"
        (run,) = _runs(trained, f"train_agent/{arm}")
        assert run.data.metrics["reward_trend/diff"] == pytest.approx(trend["diff"])
    assert "| grpo-prompted | 2 |" in (out / "reward_trend.md").read_text()
    (stage,) = _runs(trained, "train_agent")
    assert {f"difficulty/level_{i}/success" for i in (0, 1)} <= set(stage.data.metrics)
    artifacts = {a.path for a in MlflowClient().list_artifacts(stage.info.run_id)}
    assert {"difficulty.json", "difficulty.md", "reward_trend.md"} <= artifacts


@pytest.mark.slow
def test_rerun_resumes_from_the_last_checkpoint(trained):
    from mimesis.stages.train_agent import run

    out = trained / "train_agent" / "grpo"
    before = json.loads((out / "train_log.json").read_text())["rewards"]
    chosen = json.loads((trained / "train_agent" / "difficulty.json").read_text())["env_kwargs"]
    run(trained / "freeze_user", trained / "train_agent", _train_params(difficulty=LADDER))
    meta = json.loads((out / "meta.json").read_text())
    # the ladder measured again chose the same level (same seeds), so the checkpoint fits
    assert meta["params"]["env_kwargs"]["ParityGym"] == chosen
    assert meta["resumed_from"] == "checkpoint-2" and meta["steps"] == 2
    # no step re-trained, so no episodes: the trend comes from the restored history
    assert meta["reward_trend"]["source"] == "history step means"
    # the reward history came back with the checkpoint: no step was re-trained
    assert json.loads((out / "train_log.json").read_text())["rewards"] == before


def test_arms_are_checked_when_params_are_built():
    from mimesis.params import ParamsError

    with pytest.raises(ParamsError, match="user 'assistant'"):
        build(TrainAgentParams, {"arms": [{"name": "x", "user": "assistant"}]}, "train_agent")
    with pytest.raises(ParamsError, match="unique"):
        build(TrainAgentParams, {"arms": [{"name": "a"}, {"name": "a"}]}, "train_agent")
    with pytest.raises(ParamsError, match="needs a model"):
        build(TrainAgentParams, {"arms": [{"name": "a", "user": "openai"}]}, "train_agent")


@pytest.mark.slow
def test_tampered_simulator_refuses_training(tmp_path, monkeypatch):
    from mimesis.stages.train_agent import run

    monkeypatch.chdir(tmp_path)
    sim_dir = data.build_frozen_tiny(tmp_path / "freeze_user" / "simulator")
    weights = sim_dir / "model.safetensors"
    os.chmod(weights, 0o644)
    blob = bytearray(weights.read_bytes())
    blob[-1] ^= 0xFF
    weights.write_bytes(bytes(blob))
    with pytest.raises(FrozenSimulatorError, match="changed"):
        run(tmp_path / "freeze_user", tmp_path / "out", _train_params())
    assert not (tmp_path / "out" / "model").exists()


def test_frozen_guard_refuses_simulator_in_optimizer_or_changed():
    from mimesis.models.base import load_base
    from mimesis.rl.frozen_guard import FrozenGuard

    sim, tok = load_base("tiny-llama")
    agent, _ = load_base("tiny-llama")
    guard = FrozenGuard(data.scripted_user(sim, tok))
    guard.check_optimizer(torch.optim.SGD(agent.parameters(), lr=0.1))  # agent only: fine
    mixed = torch.optim.SGD([*agent.parameters(), next(sim.parameters())], lr=0.1)
    with pytest.raises(FrozenSimulatorError, match="optimizer"):
        guard.check_optimizer(mixed)
    guard.check_weights()
    with torch.no_grad():
        next(sim.parameters()).add_(1e-3)
    with pytest.raises(FrozenSimulatorError, match="changed"):
        guard.check_weights()


@pytest.mark.slow
def test_distill_agent_starts_from_the_given_adapter(trained, monkeypatch):
    from mimesis.stages.distill_agent import run

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{trained / 'mlflow.db'}")
    start = trained / "train_agent" / "grpo"  # any agent stage output can be the start
    params = data.small_params(DistillAgentParams, steps=1)
    out = run(trained / "freeze_user", start, trained / "distill", params)
    meta = json.loads((out / "meta.json").read_text())
    start_meta = json.loads((start / "meta.json").read_text())
    assert meta["start"] == "train_agent" and meta["arm"] == "csd"
    assert meta["start_mlflow_run_id"] == start_meta["mlflow_run_id"]
    assert meta["weights"] != start_meta["weights"]  # the adapter moved on
    notes = [json.loads(x) for x in (out / "notes.jsonl").read_text().splitlines()]
    assert sum(meta["notes"].values()) == len(notes)
    (run_,) = _runs(trained, "distill_agent")
    assert run_.data.params["csd.alpha"] == "0.01"


@pytest.mark.slow
def test_distill_refuses_a_changed_start_adapter(trained, tmp_path):
    import shutil

    from mimesis.models.merge import StaleTrainingError
    from mimesis.stages.distill_agent import run

    copy = tmp_path / "sft_agent"
    shutil.copytree(trained / "train_agent" / "grpo", copy,
                    ignore=shutil.ignore_patterns("checkpoints"))
    meta = json.loads((copy / "meta.json").read_text())
    meta["weights"] = {k: "0" * 64 for k in meta["weights"]}
    (copy / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(StaleTrainingError):
        run(trained / "freeze_user", copy, tmp_path / "out", data.small_params(DistillAgentParams))


@pytest.mark.parametrize("profile", PROFILES)
def test_params_yaml_sections_build(profile):
    train = build(TrainAgentParams, stage_params("train_agent", REPO / "params.yaml", profile))
    distill = build(DistillAgentParams,
                    stage_params("distill_agent", REPO / "params.yaml", profile))
    assert train.gamma == 0.8 and (train.clip_low, train.clip_high) == (0.2, 0.28)
    assert train.kl_beta == 0.0 and train.lora.dropout == 0.0
    assert (distill.csd.alpha, distill.csd.beta) == (0.01, 5.0)
    # the csd arm runs in parallel with grpo: same scenarios, seeds and budget (paired arms)
    same = ("steps", "scenarios_per_step", "group_size", "max_turns", "max_new_tokens",
            "max_completion_tokens", "learning_rate", "scenario_seed", "seed", "envs",
            "dynamic_sampling", "user", "temperature", "micro_batch")
    assert {k: getattr(distill, k) for k in same} == {k: getattr(train, k) for k in same}
    assert [a["name"] for a in train.arms] == ["grpo", "grpo-prompted"]
    assert distill.enabled == (profile != "claim")  # the claim compares the two GRPO arms
    if profile == "smoke":
        assert train.base_model == "tiny-llama"
    assert replace(train, steps=1).steps == 1


def test_held_out_environments_are_refused_for_training():
    from mimesis.rollout.scenarios import scenario_specs

    specs = scenario_specs(data.small_params(envs=["FunctionGym", "TravelGym"], steps=2))
    assert [s.env for s in specs] == ["FunctionGym", "TravelGym"] * 2
    assert len({s.seed for s in specs}) == 4
    # refused when the params are built, before any stage clears outputs or loads a model
    with pytest.raises(ValueError, match=r"\['TelepathyGym'\]: not train environment"):
        data.small_params(envs=["TelepathyGym"])
    with pytest.raises(ValueError, match=r"unknown environment\(s\) \['TravelGymm'\]"):
        data.small_params(envs=["FunctionGym", "TravelGymm"])
    with pytest.raises(ValueError, match=r"env_kwargs for unknown environment\(s\) \['TauGim'\]"):
        data.small_params(envs=["FunctionGym"], env_kwargs={"TauGim": {}})
    # kwargs of a registered env that is not played are unused (a profile that plays fewer
    # envs keeps the default's kwargs: params merge, they cannot delete a key)
    assert data.small_params(envs=["FunctionGym"], env_kwargs={"TauGym": {}}).envs == [
        "FunctionGym"]


def test_overfitting_check_replays_the_first_scenarios_every_step():
    from mimesis.rl.agent_training import DynamicSamplingParams
    from mimesis.rollout.scenarios import scenario_specs

    off = DynamicSamplingParams(enabled=False)
    p = data.small_params(envs=["FunctionGym", "TravelGym"], steps=3, scenarios_per_step=2,
                          overfit_scenarios=2, dynamic_sampling=off)
    specs = scenario_specs(p)
    assert [(s.env, s.seed) for s in specs] == [("FunctionGym", 0), ("TravelGym", 1)] * 3
    normal = scenario_specs(replace(p, overfit_scenarios=0))
    assert len({(s.env, s.seed) for s in normal}) == 6 and normal[:2] == specs[:2]
    with pytest.raises(ValueError, match="turn dynamic_sampling off"):
        data.small_params(overfit_scenarios=2)  # fresh replacements would defeat the replay
    with pytest.raises(ValueError, match="overfit_scenarios must be >= 0"):
        data.small_params(overfit_scenarios=-1, dynamic_sampling=off)


def test_agent_evaluation_params_refuse_unknown_environments():
    from mimesis.eval.agents.evaluate import EvalRolloutParams

    assert EvalRolloutParams(envs=["SearchGym", "TauGym"]).envs == ("SearchGym", "TauGym")
    with pytest.raises(ValueError, match="TelepathyGymm"):
        EvalRolloutParams(envs=["TelepathyGymm"])


def test_disabled_distill_agent_trains_nothing_and_evaluation_skips_csd(tmp_path):
    from mimesis.eval.agents.arms import agent_sources
    from mimesis.eval.agents.run import AgentComparisonParams
    from mimesis.stages.distill_agent import run

    out = tmp_path / "distill_agent"
    (out / "model").mkdir(parents=True)  # a stale arm of an earlier run must not survive
    run(tmp_path / "no_simulator_needed", None, out, DistillAgentParams(enabled=False))
    meta = json.loads((out / "meta.json").read_text())
    assert meta["enabled"] is False and not (out / "model").exists()
    p = AgentComparisonParams(train_agent_arms=["grpo"], csd=False, base=True,
                              comparisons=[["sft", "base"], ["grpo", "sft"]])
    assert p.agent_names() == ["base", "sft", "grpo"]
    with pytest.raises(ValueError, match="comparison"):
        AgentComparisonParams(train_agent_arms=["grpo"], csd=False, comparisons=[["csd", "grpo"]])
    for arm in ("sft", "grpo"):
        (tmp_path / arm).mkdir(exist_ok=True)
    with pytest.raises(FileNotFoundError, match="'sft'"):  # csd is not looked for at all
        agent_sources(tmp_path, out, tmp_path / "sft", p)
