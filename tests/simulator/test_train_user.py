"""train_user: the SFT loss mask on real token ids, training on a tiny model, resume, outputs."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from mimesis.format import END_SIGNAL
from mimesis.models.chat_template import IM_END
from mimesis.stages.train_user import TrainUserParams
from mimesis.train.grounding import GroundingParams

_spec = importlib.util.spec_from_file_location(
    "train_user_data", Path(__file__).with_name("test_train_user_data.py"))
_data = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_data)
make_conversations, write_label_dir = _data.make_conversations, _data.write_label_dir

SMALL = TrainUserParams(base_model="tiny-llama", max_train_conversations=4,
                        max_val_conversations=2, max_length=512, batch_size=2,
                        learning_rate=1e-2, warmup_ratio=0.0, save_steps=1,
                        eval_at_start=False, keep_checkpoints=True,
                        grounding=GroundingParams(tasks_per_env=0))  # real rows only here


@pytest.fixture
def mlflow_here(tmp_path, monkeypatch, empty_mlflow_store):
    """MLflow artifacts under tmp_path, in an experiment of this test alone."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MIMESIS_EXPERIMENT", f"test-{tmp_path.name}")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", empty_mlflow_store(tmp_path / "mlflow.db"))
    return tmp_path


def _trainer(tmp_path: Path, params: TrainUserParams = SMALL, n: int = 4):
    from datasets import Dataset

    from mimesis.models.base import load_base
    from mimesis.train.sft import build_trainer
    from mimesis.train.sft_data import build_rows

    model, tokenizer = load_base(params.base_model)
    rows, _, _ = build_rows(make_conversations(n), tokenizer, params.max_length,
                            params.max_user_chars, params.max_agent_chars)
    trainer = build_trainer(model, tokenizer, Dataset.from_list(rows), None, params,
                            tmp_path / "ckpt", [])
    return trainer, tokenizer, rows


def _expected_mask(tokenizer, messages) -> tuple[list[int], list[bool]]:
    """Token ids of the rendered chat and, independently of TRL, which tokens belong to an
    assistant (simulator) message's content or its closing <|im_end|>."""
    text = tokenizer.apply_chat_template(messages, tokenize=False)
    spans, cursor = [], 0
    for message in messages:
        header = f"<|im_start|>{message['role']}\n"
        start = text.index(header, cursor) + len(header)
        end = start + len(message["content"]) + len(IM_END)
        assert text[start:end] == message["content"] + IM_END
        if message["role"] == "assistant":
            spans.append((start, end))
        cursor = end
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    inside = [any(s <= a and b <= e for s, e in spans) for a, b in enc["offset_mapping"]]
    return enc["input_ids"], inside


def test_trl_labels_are_exactly_the_simulator_turns(tmp_path):
    trainer, tokenizer, rows = _trainer(tmp_path, n=3)
    for i, row in enumerate(rows):
        example = trainer.train_dataset[i]
        ids, expected = _expected_mask(tokenizer, row["messages"])
        assert example["input_ids"] == ids  # TRL tokenised the same rendered text
        trained = [label != -100 for label in example["labels"]]
        assert trained == expected
        # trained labels are the input ids themselves (the model shifts them)
        assert all(lab == tok for lab, tok in zip(example["labels"], ids, strict=True)
                   if lab != -100)
        # in decoded form: simulator turns with <|im_end|>, the end signal last; no system or
        # agent text
        runs, current = [], []
        for token_id, bit in zip(ids, trained, strict=True):
            if bit:
                current.append(token_id)
            elif current:
                runs.append(tokenizer.decode(current))
                current = []
        assistant = [m["content"] + IM_END for m in row["messages"] if m["role"] == "assistant"]
        assert runs == assistant
        assert runs[-1].endswith(END_SIGNAL + IM_END)
        others = [m["content"] for m in row["messages"] if m["role"] != "assistant"]
        assert not any(other in run for other in others for run in runs)


def test_plain_loss_is_trls_masked_nll(tmp_path):
    from trl import SFTTrainer

    trainer, _, _ = _trainer(tmp_path, replace(SMALL, loss="plain"), n=2)
    batch = trainer.data_collator([trainer.train_dataset[0], trainer.train_dataset[1]])
    trainer.model.eval()  # no LoRA dropout: both losses see the same function
    with torch.no_grad():
        plain = trainer.compute_loss(trainer.model, dict(batch))
        trl = SFTTrainer.compute_loss(trainer, trainer.model, dict(batch))
    assert torch.allclose(plain, trl, rtol=1e-4), (plain, trl)


@pytest.mark.slow
def test_lora_training_moves_adapter_only(tmp_path):
    trainer, _, _ = _trainer(tmp_path, replace(SMALL, keep_checkpoints=False), n=4)
    before = {k: v.detach().clone() for k, v in trainer.model.named_parameters()}
    trainer.train()
    after = dict(trainer.model.named_parameters())
    lora = [k for k in before if "lora_" in k]
    base = [k for k in before if "lora_" not in k]
    assert lora and base
    assert all(not after[k].requires_grad for k in base)
    assert all(torch.equal(before[k], after[k]) for k in base)
    assert any(not torch.equal(before[k], after[k]) for k in lora if "lora_B" in k)
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses) == 2 and all(loss > 0 for loss in losses)


@pytest.mark.slow
def test_stage_trains_logs_and_resumes(tmp_path, mlflow_here):
    from mlflow import MlflowClient

    from mimesis.stages.train_user import run

    label_dir = write_label_dir(tmp_path / "label", n_train=6, n_val=2)
    out_dir = tmp_path / "train_user"
    run(label_dir, out_dir, SMALL)
    meta = json.loads((out_dir / "meta.json").read_text())
    assert meta["stage"] == "train_user" and meta["steps"] == 2
    assert meta["counts"]["train"]["rows"] == 4 and meta["parameters"]["trainable"] > 0
    assert set(meta["inputs"]) == {"train.jsonl", "val.jsonl"}
    assert meta["eval_loss"] is not None and meta["train_tokens_per_second"] > 0
    assert (out_dir / "model" / "adapter_model.safetensors").is_file()
    assert (out_dir / "model" / "chat_template.jinja").is_file()
    assert [r["reason"] for r in map(json.loads, (out_dir / "rejects.jsonl").open())] == [
        "over_limit", "over_limit"]
    client = MlflowClient()
    history = client.get_metric_history(meta["mlflow_run_id"], "loss")
    assert [m.step for m in history] == [1, 2]
    artifacts = {a.path for a in client.list_artifacts(meta["mlflow_run_id"])}
    assert {"loss.png", "train_example.txt"} <= artifacts
    example = Path(client.download_artifacts(meta["mlflow_run_id"], "train_example.txt",
                                             str(tmp_path))).read_text()
    assert f"{END_SIGNAL}{IM_END}⟧" in example

    # An interruption after step 1: the last checkpoint is gone; a re-run resumes at step 1.
    checkpoints = sorted((out_dir / "checkpoints").glob("checkpoint-*"))
    assert [c.name for c in checkpoints] == ["checkpoint-1", "checkpoint-2"]
    import shutil

    shutil.rmtree(checkpoints[-1])
    run(label_dir, out_dir, SMALL)
    resumed = json.loads((out_dir / "meta.json").read_text())
    assert resumed["resumed_from"] == "checkpoint-1" and resumed["steps"] == 2

    # A kill during the save of checkpoint-2 (weights not written yet): skipped, not fatal.
    (out_dir / "checkpoints" / "checkpoint-2" / "adapter_model.safetensors").unlink()
    run(label_dir, out_dir, SMALL)
    resumed = json.loads((out_dir / "meta.json").read_text())
    assert resumed["resumed_from"] == "checkpoint-1" and resumed["steps"] == 2

    # Changed params: old checkpoints are discarded, training starts over.
    run(label_dir, out_dir, replace(SMALL, learning_rate=5e-3, keep_checkpoints=False))
    fresh = json.loads((out_dir / "meta.json").read_text())
    assert fresh["resumed_from"] is None and not (out_dir / "checkpoints").exists()


@pytest.mark.parametrize("profile", ["default", "full"])
def test_the_cpu_profiles_train_the_simulator_fast_enough_to_learn_its_output_contract(profile):
    """At the CPU default's ~21 LoRA steps, lr 4e-4 left SmolLM2-135M writing think block after
    think block with no utterance (6 of 40 fact-reveal probes answered); 2e-3 and up learned
    the contract (28-31 of 40; docs/pitfalls.md #15). The profiles that train the adapter for
    so few steps must keep a learning rate in that range."""
    from mimesis.params import build, stage_params

    params = Path(__file__).resolve().parents[2] / "params.yaml"
    p = build(TrainUserParams, stage_params("train_user", params, profile=profile), "train_user")
    assert p.finetune == "lora" and p.learning_rate >= 2e-3
