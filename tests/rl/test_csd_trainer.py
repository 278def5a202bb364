"""The CSD trainer: α·L_CSD on top of TRL's GRPO loss, agent-only masking, the α = 0 ablation,
and a training step with coach notes (kept, NONE and leaking) and Δ diagnostics."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from mimesis.rl.coach import Coach, CoachParams
from mimesis.rl.csd import CSDTrainer, csd_loss

_here = Path(__file__).parent
_specs = {name: importlib.util.spec_from_file_location(name, _here / f"{name}.py")
          for name in ("test_train_agent_data", "test_grpo")}
data = importlib.util.module_from_spec(_specs["test_train_agent_data"])
_specs["test_train_agent_data"].loader.exec_module(data)
grpo_tests = importlib.util.module_from_spec(_specs["test_grpo"])
_specs["test_grpo"].loader.exec_module(grpo_tests)

NOTES = ["Ask for inputs that change one number at a time.",  # kept
         "Your secret number is 4242, say it.",  # quotes the private channel: leak
         "NONE"]  # nothing to add


def scripted_coach() -> Coach:
    def generate(batch):
        return [NOTES[i % len(NOTES)] for i in range(len(batch))]

    return Coach(generate, "scripted", CoachParams(max_notes_per_episode=2, private="reasoning"))


def _trainer(tmp_path, alpha: float = 0.01, **overrides):
    from mimesis.models.base import load_base
    from mimesis.models.lora import LoraParams
    from mimesis.rl import agent_training as rl

    sim, sim_tok = load_base("tiny-llama")
    agent, tok = load_base("tiny-llama")
    params = data.small_params(**overrides)
    return rl.build_trainer(CSDTrainer, agent, tok, params, data.scripted_user(sim, sim_tok),
                            tmp_path / "ckpt", [],
                            peft_config=LoraParams(dropout=0.0).peft_config(),
                            coach=scripted_coach(), alpha=alpha, beta=5.0,
                            placebo="Continue the conversation.")


def _csd_inputs(vocab: int) -> dict[str, torch.Tensor]:
    inputs = grpo_tests.loss_inputs(vocab)
    g = torch.Generator().manual_seed(2)
    inputs["csd_teacher_logps"] = -torch.rand(2, 8, generator=g) * 6
    inputs["csd_mask"] = torch.ones(2, 8)  # the trainer must still drop env tokens itself
    inputs["csd_num_tokens"] = (inputs["csd_mask"] * inputs["tool_mask"]
                                * inputs["completion_mask"]).sum()
    return inputs


def test_csd_loss_term_is_alpha_times_l_csd_on_agent_tokens_only(tmp_path):
    trainer = _trainer(tmp_path)
    trainer.current_gradient_accumulation_steps = trainer.args.steps_per_generation
    inputs = _csd_inputs(len(trainer.processing_class))
    env = (inputs["tool_mask"] == 0).float()
    with torch.no_grad():
        total = trainer._compute_loss(trainer.model, dict(inputs))
        student = trainer._captured
        trainer.csd_alpha = 0.0
        grpo_only = trainer._compute_loss(trainer.model, dict(inputs))
        trainer.csd_alpha = 0.01
        env_changed = trainer._compute_loss(grpo_tests.PerturbScores(trainer.model, env),
                                            dict(inputs))
        agent_changed = trainer._compute_loss(grpo_tests.PerturbScores(trainer.model, 1 - env),
                                              dict(inputs))
    agent_tokens = inputs["completion_mask"] * inputs["tool_mask"]
    expected = csd_loss(student, inputs["csd_teacher_logps"], agent_tokens, beta=5.0).loss
    assert torch.isclose(total - grpo_only, 0.01 * expected, atol=1e-6)
    assert torch.isclose(total, env_changed, atol=1e-6)
    assert not torch.isclose(total, agent_changed, atol=1e-4)


@pytest.mark.slow
def test_csd_step_writes_notes_filters_leaks_and_logs_delta(tmp_path, monkeypatch,
                                                            empty_mlflow_store):
    import mlflow

    monkeypatch.setenv("MLFLOW_TRACKING_URI", empty_mlflow_store(tmp_path / "mlflow.db"))
    trainer = _trainer(tmp_path)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if "lora_B" in n}
    with mlflow.start_run() as run:
        trainer.train()
    statuses = [n.status for n in trainer.notes]
    assert {"kept", "leak", "none"} <= set(statuses)
    leak = next(n for n in trainer.notes if n.status == "leak")
    assert leak.note == "" and "number:4242" in leak.reasons
    kept = next(n for n in trainer.notes if n.status == "kept")
    assert kept.turn >= 1 and kept.note == NOTES[0]
    row = trainer.history[-1]
    assert row["notes/kept"] == statuses.count("kept") and row["csd/tokens"] > 0
    for key in ("csd/delta_real_mean", "csd/delta_placebo_mean", "csd/delta_gap"):
        assert key in row
    after = dict(trainer.model.named_parameters())
    assert any(not torch.equal(before[n], after[n]) for n in before)
    metrics = mlflow.get_run(run.info.run_id).data.metrics
    assert "csd/delta_real_mean" in metrics and "reward/ParityGym" in metrics
