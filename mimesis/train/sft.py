"""TRL SFT for the user simulator: trainer construction, LoRA, loss variant, resumable checkpoints.

Masking is TRL's: ``assistant_only_loss=True`` builds ``labels`` from the chat template's
``{% generation %}`` spans, so only the simulator's turns (the real user's words, their
``<think>`` reasoning, the end signal and each ``<|im_end|>``) are in the loss.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
import zipfile
from pathlib import Path

import torch
from transformers import Trainer
from trl import SFTConfig, SFTTrainer

FINGERPRINT = "fingerprint.json"
log = logging.getLogger("mimesis.train")
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
# Weights a transformers/peft checkpoint may hold (one of them, or a sharded index).
_WEIGHTS = ("model.safetensors", "adapter_model.safetensors", "pytorch_model.bin",
            "adapter_model.bin", "model.safetensors.index.json", "pytorch_model.bin.index.json")


class PlainLossSFTTrainer(SFTTrainer):
    """``SFTTrainer`` whose loss is the model's own causal-LM loss on TRL's labels.

    TRL 1.16 computes the loss through a fused LM head that also produces per-token entropy and
    top-1 accuracy for logging; skipping that keeps TRL's dataset preparation and masking (the
    ``labels`` column) and only changes how the same masked mean NLL is computed.
    """

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        inputs["use_cache"] = False
        return Trainer.compute_loss(self, model, inputs, return_outputs=return_outputs,
                                    num_items_in_batch=num_items_in_batch)


def fingerprint(params: dict, inputs: dict[str, str], base: str) -> str:
    """sha256 of what decides a training run: params, input data hashes, base model folder."""
    text = json.dumps({"params": params, "inputs": inputs, "base": base}, sort_keys=True,
                      default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def prepare_checkpoints(ckpt_dir: Path, run_fingerprint: str) -> str | None:
    """Checkpoint to resume from, or ``None``.

    Checkpoints written under another fingerprint (params, data or base changed) are deleted, so a
    resumed run is always the run that was interrupted. A partial ``checkpoint-N/`` (a kill
    during the save: see :func:`checkpoint_problem`) is removed with a warning and the previous
    complete one is used: without this, transformers fails on it on every re-run.
    """
    stamp = ckpt_dir / FINGERPRINT
    if ckpt_dir.exists():
        same = stamp.exists() and json.loads(stamp.read_text()).get("sha256") == run_fingerprint
        if not same:
            shutil.rmtree(ckpt_dir)
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    stamp.write_text(json.dumps({"sha256": run_fingerprint}) + "\n")
    found = [(int(m.group(1)), p) for p in ckpt_dir.iterdir()
             if p.is_dir() and (m := _CHECKPOINT.match(p.name))]
    for _, path in sorted(found, reverse=True):
        problem = checkpoint_problem(path)
        if problem is None:
            return str(path)
        log.warning("skipping partial checkpoint %s (%s): removed, resuming from the previous "
                    "complete one", path, problem)
        shutil.rmtree(path)
    return None


def checkpoint_problem(path: Path) -> str | None:
    """Why ``path`` is not a complete Trainer checkpoint, or ``None`` when it is.

    Trainer writes weights, then optimizer/scheduler/RNG state, then ``trainer_state.json``; a
    complete checkpoint has a parseable ``trainer_state.json``, a weights file whose contents are
    whole (a safetensors header that covers the file, a ``.bin``/``.pt`` zip with its central
    directory, every shard of an index), and whole ``optimizer.pt``/``scheduler.pt`` if present.
    """
    try:
        json.loads((path / "trainer_state.json").read_text())
    except (OSError, ValueError):
        return "trainer_state.json missing or unreadable"
    weights = [path / name for name in _WEIGHTS if (path / name).is_file()]
    if not weights:
        return "no weights file"
    for file in weights + [path / n for n in ("optimizer.pt", "scheduler.pt")
                           if (path / n).is_file()]:
        if (problem := _file_problem(file)) is not None:
            return f"{file.name}: {problem}"
    return None


def _file_problem(file: Path) -> str | None:
    if file.name.endswith(".index.json"):
        try:
            shards = set(json.loads(file.read_text())["weight_map"].values())
        except (OSError, ValueError, KeyError, AttributeError):
            return "unreadable index"
        missing = sorted(s for s in shards if not (file.parent / s).is_file())
        return f"missing shards {missing}" if missing else None
    if file.suffix == ".safetensors":
        from safetensors import SafetensorError, safe_open

        try:
            with safe_open(str(file), "pt") as handle:
                handle.keys()
        except (SafetensorError, OSError) as err:
            return f"truncated or corrupt ({err})"
        return None
    if not zipfile.is_zipfile(file):  # torch.save writes a zip; a cut one lacks its directory
        return "truncated or corrupt"
    return None


def sft_config(params, ckpt_dir: Path, n_train: int) -> SFTConfig:
    """TRL config from train_user params (CPU-safe: no bf16, no gradient checkpointing)."""
    bf16 = params.dtype == "bfloat16"
    return SFTConfig(
        output_dir=str(ckpt_dir), assistant_only_loss=True, max_length=params.max_length,
        per_device_train_batch_size=params.batch_size,
        per_device_eval_batch_size=params.batch_size,
        gradient_accumulation_steps=params.grad_accum, num_train_epochs=params.epochs,
        learning_rate=params.learning_rate, lr_scheduler_type="cosine",
        warmup_steps=params.warmup_ratio, weight_decay=0.0, logging_steps=1,
        save_strategy="steps", save_steps=params.save_steps, save_total_limit=2,
        eval_strategy="no", gradient_checkpointing=False, bf16=bf16, report_to="none",
        seed=params.seed, data_seed=params.seed, use_cpu=not torch.cuda.is_available(),
        dataloader_num_workers=0, disable_tqdm=False, save_only_model=False,
        train_sampling_strategy="group_by_length" if n_train > params.batch_size else "random",
    )


def build_trainer(model, tokenizer, train_ds, eval_ds, params, ckpt_dir: Path,
                  callbacks: list) -> SFTTrainer:
    """SFT trainer (LoRA via peft unless ``params.finetune == "full"``)."""
    peft_config = params.lora.peft_config() if params.finetune == "lora" else None
    cls = PlainLossSFTTrainer if params.loss == "plain" else SFTTrainer
    model.train()
    return cls(model=model, args=sft_config(params, ckpt_dir, len(train_ds)),
               train_dataset=train_ds, eval_dataset=eval_ds, processing_class=tokenizer,
               peft_config=peft_config, callbacks=callbacks)


def count_parameters(model) -> dict[str, int]:
    """Trainable and total parameter counts."""
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return {"trainable": trainable, "total": sum(p.numel() for p in model.parameters())}
