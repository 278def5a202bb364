"""Turn a ``train_user`` output into one plain model: merge the LoRA adapter into its base (or
take the fully fine-tuned weights as they are)."""

from __future__ import annotations

from pathlib import Path

import torch


class StaleTrainingError(RuntimeError):
    """``train_user``'s output no longer matches its base model or input data."""


def merged_model(model_dir: Path, meta: dict, dtype: str = "float32"):
    """Load ``train_user``'s ``model/`` as a single causal LM.

    Args:
        model_dir: ``data/train_user/model`` (adapter or full model, plus tokenizer).
        meta: ``data/train_user/meta.json`` (``finetune``, ``base_model``, ``base_model_dir``).
        dtype: Weights dtype of the merged model.

    Returns:
        ``(model, tokenizer, max_abs_logit_diff)``: the last is the largest |logit| difference
        between the adapter model and the merged one on a probe sequence (0.0 for full
        fine-tuning), a check that merging preserved the function.

    Raises:
        StaleTrainingError: the base model cached now is not the one the adapter was trained on.
    """
    from mimesis.models.base import base_dir, load_base, load_pretrained

    if meta["finetune"] == "full":
        model, tokenizer = load_pretrained(model_dir, dtype=dtype)
        return model, tokenizer, 0.0
    from peft import PeftModel

    found = base_dir(meta["base_model"]).name
    if found != meta["base_model_dir"]:
        raise StaleTrainingError(f"base model {meta['base_model']!r} resolves to {found}, but "
                                 f"the adapter was trained on {meta['base_model_dir']}: "
                                 "re-run train_user")
    base, _ = load_base(meta["base_model"], dtype=dtype)
    tokenizer = _load_tokenizer(model_dir)
    peft_model = PeftModel.from_pretrained(base, str(model_dir))
    peft_model.eval()
    probe = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Hi! What can I help you with today?"}],
        add_generation_prompt=True, return_tensors="pt", return_dict=True)["input_ids"]
    with torch.inference_mode():
        before = peft_model(input_ids=probe).logits.float()
        merged = peft_model.merge_and_unload()
        after = merged(input_ids=probe).logits.float()
    return merged, tokenizer, float((before - after).abs().max())


def _load_tokenizer(model_dir: Path):
    """The tokenizer ``train_user`` saved next to the adapter (its chat template included)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir)


def adapter_sha256(model_dir: Path) -> dict[str, str]:
    """sha256 of the saved weight files of ``model_dir`` (adapter or full model)."""
    from mimesis.io import sha256_file

    return {p.name: sha256_file(p) for p in sorted(model_dir.glob("*.safetensors"))}
