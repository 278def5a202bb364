"""Batched chat generation with a causal LM (transformers ``generate``).

One ``generate`` call serves a whole batch of conversations; prompts are rendered with the
tokenizer's own chat template and left-padded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from tqdm.auto import tqdm
from transformers import StoppingCriteria, StoppingCriteriaList

from mimesis.schemas import Messages


@dataclass
class GenerationConfig:
    """Sampling settings. ``temperature`` 0 means greedy decoding.

    Not :class:`~mimesis.models.engine.sampling.SamplingParams`: text-only ``generate()`` (no log-probs, no
    KV-cache reuse) that cuts each prompt to ``max_prompt_tokens``."""

    max_new_tokens: int = 96
    temperature: float = 0.8
    top_p: float = 0.95
    batch_size: int = 16
    max_prompt_tokens: int = 768


class ChatGenerator:
    """Generate assistant-role continuations for many chat histories, batch by batch.

    Args:
        model: A ``PreTrainedModel`` (causal LM), already in eval mode on its device.
        tokenizer: Its tokenizer, with a chat template.
        config: Sampling settings.
        name: Identifier recorded with every output (e.g. ``hf:smollm2-135m``).
    """

    def __init__(self, model, tokenizer, config: GenerationConfig | None = None, name: str = "hf"):
        self.model = model
        self.tokenizer = tokenizer
        self.config = config or GenerationConfig()
        self.name = name
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token

    def render(self, messages: Messages, prefill: str = "") -> str:
        """Prompt text for ``messages`` with the generation prompt, plus an optional prefill."""
        text = self.tokenizer.apply_chat_template(messages, tokenize=False,
                                                  add_generation_prompt=True)
        return text + prefill

    @torch.inference_mode()
    def generate(self, batch: Sequence[Messages], prefills: Sequence[str] | None = None,
                 desc: str = "generate", seed: int | None = None,
                 stop: Callable[[], bool] | None = None) -> list[str]:
        """Continue every conversation in ``batch``; returns decoded new text (special tokens
        removed), one string per conversation, in order.

        Prompts longer than ``max_prompt_tokens`` keep their last tokens (the recent context).
        ``stop`` is asked between decode steps; once it says true, decoding ends at the next
        step and later sub-batches are skipped (their texts stay ``""``): the caller abandons
        the outputs (a served request that ran past its deadline or lost its client).
        """
        cfg = self.config
        prefills = list(prefills) if prefills is not None else [""] * len(batch)
        texts = [self.render(m, p) for m, p in zip(batch, prefills, strict=True)]
        # Sorting by length keeps padding (wasted compute) low inside each batch.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        outputs: list[str] = [""] * len(texts)
        if seed is not None:
            torch.manual_seed(seed)
        steps = range(0, len(order), cfg.batch_size)
        criteria = StoppingCriteriaList([_StopWhen(stop)] if stop is not None else [])
        for start in tqdm(steps, desc=desc, unit="batch", disable=len(order) <= cfg.batch_size):
            if stop is not None and stop():
                break
            idx = order[start:start + cfg.batch_size]
            enc = self.tokenizer([texts[i] for i in idx], return_tensors="pt", padding=True,
                                 add_special_tokens=False)
            if enc["input_ids"].shape[1] > cfg.max_prompt_tokens:
                enc = {k: v[:, -cfg.max_prompt_tokens:] for k, v in enc.items()}
            enc = {k: v.to(self.model.device) for k, v in enc.items()}
            sample = cfg.temperature > 0
            out = self.model.generate(
                **enc, max_new_tokens=cfg.max_new_tokens, do_sample=sample,
                temperature=cfg.temperature if sample else None,
                top_p=cfg.top_p if sample else None,
                pad_token_id=self.tokenizer.pad_token_id, stopping_criteria=criteria,
            )
            new = out[:, enc["input_ids"].shape[1]:]
            for i, row in zip(idx, new, strict=True):
                outputs[i] = self.tokenizer.decode(row, skip_special_tokens=True)
        return outputs


class _StopWhen(StoppingCriteria):
    """Ends every sequence of the batch as soon as ``stop()`` is true (checked once per step)."""

    def __init__(self, stop: Callable[[], bool]) -> None:
        self.stop = stop

    def __call__(self, input_ids: torch.LongTensor, scores, **kwargs) -> torch.BoolTensor:
        return torch.full((input_ids.shape[0],), self.stop(), dtype=torch.bool,
                          device=input_ids.device)
