"""The TRL ``rollout_func`` adapter: output keys and shapes, grouping, and one real GRPO step."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from mimesis.models.base import load_base
from mimesis.rl.grpo import make_rollout_func
from mimesis.rl.trl_rollout import TRL_KEYS, env_reward, group_jobs, scenario_dataset
from mimesis.rollout.records import RolloutParams, ScenarioSpec
from mimesis.simulator.runtime import UserSimulator

SPECS = [ScenarioSpec(env="FunctionGym", seed=1), ScenarioSpec(env="TravelGym", seed=2)]


def fake_user(views: list[list[dict[str, str]]]) -> list[str]:
    return [f"<think>thinking {len(v)}</think>\nf(1, 2, 3, 4) = {len(v)}" for v in views]


@pytest.fixture(scope="module")
def tiny():
    return load_base("tiny-llama")


def rollout_func(max_turns: int = 2):
    params = RolloutParams(max_turns=max_turns, max_new_tokens=6, max_completion_tokens=400)
    return make_rollout_func(UserSimulator(fake_user), params)


def test_rollout_func_returns_one_completion_per_repeated_prompt(tiny) -> None:
    model, tok = tiny
    model.train()
    trainer = SimpleNamespace(
        model=model, processing_class=tok, num_generations=2, num_generations_eval=2,
        accelerator=SimpleNamespace(unwrap_model=lambda m: m),
        args=SimpleNamespace(temperature=1.0, top_p=1.0))
    prompts = [SPECS[0].to_prompt()] * 2 + [SPECS[1].to_prompt()] * 2  # TRL's repetition
    out = rollout_func()(prompts, trainer)
    assert model.training  # restored after the rollout
    assert set(TRL_KEYS) | {"env_reward"} <= set(out)
    assert all(len(v) == 4 for v in out.values())
    for i in range(4):
        n = len(out["completion_ids"][i])
        assert n > 0 and len(out["prompt_ids"][i]) > 0
        assert [len(out[k][i]) for k in ("logprobs", "env_mask", "turn_ids")] == [n, n, n]
        assert set(out["env_mask"][i]) == {0, 1}  # two turns: agent tokens and injected ones
        assert all(isinstance(t, int) for t in out["completion_ids"][i])
    assert out["group_id"] == [0, 0, 1, 1]
    assert out["prompt_ids"][0] == out["prompt_ids"][1] != out["prompt_ids"][2]
    assert out["scenario_id"][0] == out["scenario_id"][1] != out["scenario_id"][2]
    assert out["env_reward"] == [0.0] * 4 and env_reward([], **out) == [0.0] * 4
    assert [e.group_id for e in out["episode"]] == [0, 0, 1, 1]


def test_groups_must_be_runs_of_one_prompt() -> None:
    a, b = SPECS[0].to_prompt(), SPECS[1].to_prompt()
    assert [g for _, g in group_jobs([a, a, b, b], 2)] == [0, 0, 1, 1]
    with pytest.raises(ValueError, match="mixes prompts"):
        group_jobs([a, b, a, b], 2)
    with pytest.raises(ValueError, match="groups of"):
        group_jobs([a, a, b], 2)
    with pytest.raises(TypeError, match="ScenarioSpec JSON"):
        group_jobs([[{"role": "user", "content": "hi"}]] * 2, 2)  # a chat, not a spec
    with pytest.raises(ValueError):
        group_jobs(["Plan a trip to Rome."] * 2, 2)  # text, not a spec


@pytest.mark.slow
def test_one_grpo_step_trains_on_the_rollouts(tiny, tmp_path, monkeypatch) -> None:
    from trl import GRPOConfig, GRPOTrainer

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is experimental in TRL

    model, tok = tiny
    seen: dict[str, list] = {}

    def agent_token_parity(completions, completion_ids, env_reward, termination, **kwargs):
        # Spreads rewards inside a group (the env reward of a random policy is all zeros).
        seen.update(env_reward=env_reward, termination=termination)
        return [float(sum(ids) % 7) for ids in completion_ids]

    args = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=2,
                      max_steps=1, learning_rate=1e-2, report_to="none", bf16=False,
                      gradient_checkpointing=False, use_cpu=True, save_strategy="no",
                      logging_steps=1, temperature=1.0)
    before = [p.detach().clone() for p in model.parameters()]
    trainer = GRPOTrainer(model=model, processing_class=tok, args=args,
                          reward_funcs=[env_reward, agent_token_parity],
                          train_dataset=scenario_dataset(SPECS), rollout_func=rollout_func())
    trainer.train()
    assert len(seen["env_reward"]) == 4 and set(seen["termination"]) <= {
        "answer", "finish", "user_end", "max_turns", "max_tokens"}
    logs = trainer.state.log_history[0]
    assert "rewards/env_reward/mean" in logs and torch.isfinite(torch.tensor(logs["loss"]))
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
