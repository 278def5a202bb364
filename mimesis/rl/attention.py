"""Grouped-query attention without copying keys/values, for padded batched decoding on CPU.

transformers' ``sdpa`` attention expands the keys/values of GQA models (SmolLM2: 3 KV heads for 9
query heads) to every query head with ``repeat_kv`` whenever an attention mask is present — and a
padded batch always has one. At batch 16 with ~500 cached tokens that copy, made again at every
layer of every decoding step, took about half of the step on this machine (measured: 690 ms ->
339 ms per step at batch 16, 135 -> 110 ms at batch 1, one thread). PyTorch's
``scaled_dot_product_attention(..., enable_gqa=True)`` reads the shared heads in place.

:func:`gqa_attention` switches a model from ``sdpa`` to this function for the duration of a
block, through transformers' public ``AttentionInterface`` registry; the maths is the same (the
tests compare log-probabilities with a plain forward). Only CPU models using ``sdpa`` are switched:
on GPU a mask with ``enable_gqa`` can push SDPA off its fused kernels.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F

NAME = "mimesis_sdpa_gqa"
_registered = False


def sdpa_gqa_attention(module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                       attention_mask: torch.Tensor | None, dropout: float = 0.0,
                       scaling: float | None = None, **kwargs) -> tuple[torch.Tensor, None]:
    """transformers attention function: ``[batch, heads, q, dim]`` in, ``[batch, q, heads, dim]``
    out; ``attention_mask`` is the boolean mask of ``sdpa_mask`` (True = attend) or ``None``."""
    if attention_mask is not None:
        attention_mask = attention_mask[:, :, :, :key.shape[-2]]
    causal = attention_mask is None and query.shape[2] > 1
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask,
                                         dropout_p=dropout if module.training else 0.0,
                                         scale=scaling, is_causal=causal, enable_gqa=True)
    return out.transpose(1, 2).contiguous(), None


def _register() -> None:
    global _registered
    if not _registered:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

        AttentionInterface.register(NAME, sdpa_gqa_attention)
        AttentionMaskInterface.register(NAME, sdpa_mask)
        _registered = True


@contextmanager
def gqa_attention(model) -> Iterator[None]:
    """Run the block with :func:`sdpa_gqa_attention` when ``model`` is a CPU model on ``sdpa``."""
    current = getattr(model.config, "_attn_implementation", None)
    if current != "sdpa" or model.device.type != "cpu" or not hasattr(
            model, "set_attn_implementation"):
        yield
        return
    _register()
    model.set_attn_implementation(NAME)
    try:
        yield
    finally:
        model.set_attn_implementation(current)
