"""Stage ``sft_agent``: the loss mask on real token ids, the keep/reject triage, the stage on a
tiny setup (model, meta, traces that reconcile, an adapter that moved), and its params."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from mimesis.models.base import base_dir
from mimesis.params import PROFILES, build, stage_params
from mimesis.rl.expert_sft import REASONS, reject_reason, sft_rows, triage
from mimesis.rl.experts import ExpertPolicy
from mimesis.rollout.engine import RolloutEngine
from mimesis.rollout.records import RolloutParams, ScenarioSpec
from mimesis.simulator.runtime import UserSimulator
from mimesis.stages.sft_agent import SftAgentParams
from mimesis.users.spec import UserSamplingParams

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "train_agent_data", Path(__file__).with_name("test_train_agent_data.py"))
data = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(data)


@pytest.fixture(scope="module")
def tok():
    return AutoTokenizer.from_pretrained(base_dir("tiny-llama"))


def _user_model(views):
    return [f"<think>hm {len(v)}</think>\nf(2, 3, 5, 7) = 9, f(3, 7, 2, 5) = 1 and "
            "f(7, 2, 3, 5) = 4. I'd say 5/7." for v in views]


@pytest.fixture(scope="module")
def episodes(tok):
    """Expert episodes of every training env on the tiny tokenizer (scripted user model)."""
    specs = [ScenarioSpec(env="FunctionGym", seed=1), ScenarioSpec(env="TravelGym", seed=1),
             ScenarioSpec(env="PersuadeGym", seed=0, options={"index": 0}),
             ScenarioSpec(env="TurtleGym", seed=0, options={"index": 0})]
    params = RolloutParams(group_size=1, max_turns=3, max_new_tokens=64,
                           max_completion_tokens=640)
    return RolloutEngine(ExpertPolicy(), tok, UserSimulator(_user_model), params,
                         progress=False).run(specs)


def test_sft_examples_train_exactly_the_agent_tokens(tok, episodes, tmp_path):
    from mimesis.models.base import load_base
    from mimesis.rl.expert_sft import build_trainer

    rows = sft_rows(episodes)
    for e, row in zip(episodes, rows, strict=True):
        assert row["input_ids"] == e.prompt_ids + e.completion_ids
        assert row["completion_mask"] == [0] * len(e.prompt_ids) + e.env_mask
        agent = [t for t, m in zip(row["input_ids"], row["completion_mask"], strict=True) if m]
        expected = [t for turn in e.turns for t in tok(turn.agent_text,
                                                       add_special_tokens=False)["input_ids"]
                    + [tok.eos_token_id]]
        assert agent == expected  # agent text + end of turn, nothing injected
    # TRL's labels from these rows: the id where the mask is 1, -100 on prompt/user/tool tokens
    model, tokenizer = load_base("tiny-llama")
    params = SftAgentParams(base_model="tiny-llama", envs=["FunctionGym"], epochs=1)
    trainer = build_trainer(model, tokenizer, episodes, params, tmp_path, [])
    for i, row in enumerate(rows):
        labels = trainer.train_dataset[i]["labels"]
        assert trainer.train_dataset[i]["input_ids"] == row["input_ids"]
        assert labels == [t if m else -100 for t, m in zip(row["input_ids"],
                                                            row["completion_mask"], strict=True)]
        assert sum(lab != -100 for lab in labels) == sum(episodes[i].env_mask) > 0


def test_triage_gives_each_dropped_episode_one_reason(tok, episodes):
    ok = episodes[0].model_copy(update={"reward": 1.0, "termination": "answer"})
    cut = list(ok.completion_ids)
    cut[ok.env_mask.index(0) - 1] = 5  # the first agent turn lost its end-of-turn token
    cases = {
        "keep": ok,
        "truncated": ok.model_copy(update={"truncated": True, "termination": "max_tokens"}),
        "turn_cut": ok.model_copy(update={"completion_ids": cut}),
        "user_ended": ok.model_copy(update={"reward": 0.0, "termination": "user_end"}),
        "below_threshold": ok.model_copy(update={"reward": 0.0}),
    }
    eos = tok.eos_token_id
    assert {k: reject_reason(e, eos, 1.0) for k, e in cases.items()} == {
        "keep": None, **{r: r for r in REASONS}}
    traces = triage(list(cases.values()), eos, None)  # FunctionGym's threshold: 1.0
    counts = traces.counts()
    assert (counts["played"], counts["kept"], counts["rejected"]) == (5, 1, 4)
    env = counts["by_env"]["FunctionGym"]
    assert env["played"] == env["kept"] + sum(env["rejected"].values())
    assert env["threshold"] == 1.0


@pytest.fixture(scope="module")
def frozen(tmp_path_factory, empty_mlflow_store):
    root = tmp_path_factory.mktemp("sft")
    empty_mlflow_store(root / "mlflow.db")  # the store this module's stage runs log to
    data.build_frozen_tiny(root / "freeze_user" / "simulator")
    return root


def _small(**overrides) -> SftAgentParams:
    base = {"base_model": "tiny-llama", "scenarios_per_env": 1, "episodes_per_scenario": 2,
            "max_turns": 2, "max_new_tokens": 64, "max_completion_tokens": 768,
            "min_reward": 0.0, "user": UserSamplingParams(max_new_tokens=8), "epochs": 2,
            "batch_size": 2, "learning_rate": 5e-3, "save_steps": 2}
    return SftAgentParams(**{**base, **overrides})


@pytest.mark.slow
def test_stage_writes_a_moved_adapter_and_traces_that_reconcile(frozen, monkeypatch):
    import mlflow
    from peft import PeftModel

    from mimesis.eval.agents.evaluate import load_agent
    from mimesis.models.base import load_base
    from mimesis.models.merge import adapter_sha256
    from mimesis.rl import agent_training as rl
    from mimesis.rl.expert_sft import rl_params
    from mimesis.stages.sft_agent import run

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{frozen / 'mlflow.db'}")
    monkeypatch.setenv("MIMESIS_EXPERIMENT", "test-sft")
    # the five shipped training envs, in params.yaml's order (this module's helper registers
    # test-only training envs, which the registry's default list would include)
    envs = ["FunctionGym", "TravelGym", "TurtleGym", "TauGym", "PersuadeGym"]
    out = run(frozen / "freeze_user", frozen / "sft_agent", _small(envs=envs))
    meta = json.loads((out / "meta.json").read_text())
    assert meta["stage"] == "sft_agent" and meta["finetune"] == "lora"
    assert meta["weights"] == adapter_sha256(out / "model") and meta["weights"]
    kept = (out / "traces.jsonl").read_text().splitlines()
    rejected = [json.loads(x) for x in (out / "rejects.jsonl").read_text().splitlines()]
    counts = meta["traces"]
    assert counts["played"] == 5 * 2 == len(kept) + len(rejected)
    assert counts["kept"] == len(kept) > 0 and counts["rejected"] == len(rejected)
    assert all(r["reason"] in REASONS for r in rejected)
    assert "prompt_ids" not in json.loads(kept[0])
    for env, c in counts["by_env"].items():
        assert c["played"] == c["kept"] + sum(c["rejected"].values()) == 2, env
    # LoRA B starts at zero: a non-zero B is the optimizer's doing
    model = PeftModel.from_pretrained(load_base("tiny-llama")[0], str(out / "model"))
    assert any(p.abs().sum() > 0 for n, p in model.named_parameters() if "lora_B" in n)
    assert meta["steps"] >= 1 and meta["train_loss"] > 0
    # the agent loaders of evaluate and train_agent accept it
    load_agent("adapter", out)
    from mimesis.users.frozen import load_user

    user = load_user(frozen / "freeze_user", rl_params(_small()))
    assert rl.load_start_policy(out, user, _small())[2]["name"] == "sft_agent"
    mlflow.set_tracking_uri(f"sqlite:///{frozen / 'mlflow.db'}")
    (run_,) = mlflow.search_runs(experiment_names=["test-sft"], output_format="list")
    assert run_.info.run_name == "sft_agent"
    assert run_.data.metrics["traces/played"] == 10
    assert {f"traces/kept/{e}" for e in counts["by_env"]} <= set(run_.data.metrics)
    logged = {a.path for a in mlflow.MlflowClient().list_artifacts(run_.info.run_id)}
    assert {"traces.jsonl", "rejects.jsonl", "loss.png", "train_example.txt"} <= logged


@pytest.mark.slow
def test_no_successful_trace_is_a_clear_error_after_writing_the_rejects(frozen, monkeypatch):
    from mimesis.stages.sft_agent import run

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{frozen / 'mlflow.db'}")
    out = frozen / "sft_none"
    with pytest.raises(ValueError, match="none of the 2 expert episodes"):
        run(frozen / "freeze_user", out, _small(envs=["FunctionGym"], min_reward=2.0))
    assert len((out / "rejects.jsonl").read_text().splitlines()) == 2
    assert (out / "traces.jsonl").read_text() == ""
    assert not (out / "model").exists()


def test_held_out_envs_and_bad_values_are_refused():
    with pytest.raises(ValueError, match="not train environment"):
        SftAgentParams(envs=["FunctionGym", "SearchGym"])
    with pytest.raises(ValueError, match="must be > 0"):
        SftAgentParams(episodes_per_scenario=0)


@pytest.mark.parametrize("profile", PROFILES)
def test_params_yaml_section_builds_and_keeps_the_rl_episode_shape(profile):
    from mimesis.stages.train_agent import TrainAgentParams

    sft = build(SftAgentParams, stage_params("sft_agent", REPO / "params.yaml", profile))
    train = build(TrainAgentParams, stage_params("train_agent", REPO / "params.yaml", profile))
    # the traces show the prompts and turn budget RL plays with, on other scenarios: every RL
    # env is warmed up with its RL constructor args (the CPU default warms up on all five
    # training envs and runs RL on two of them)
    assert set(train.envs) <= set(sft.envs)
    assert {e: sft.env_kwargs.get(e) for e in train.envs} == {
        e: train.env_kwargs.get(e) for e in train.envs}
    assert sft.max_turns == train.max_turns
    assert sft.scenario_seed not in range(train.scenario_seed, train.scenario_seed + 10_000)
    assert sft.lora.dropout == train.lora.dropout == 0.0
    if profile != "smoke":  # the tiny tokenizer needs more tokens per expert turn
        assert sft.max_new_tokens == train.max_new_tokens
        assert sft.base_model == train.base_model
