"""CPU forward paths for padded batched decoding: GQA attention without copies, column-major weights.

**Attention.**
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

**Linear layers.** ``nn.Linear`` computes ``x @ W.T`` with ``W`` stored ``[out, in]``. For the
few rows of a decoding step MKL's kernel for that layout is slow, and slowest at the odd batch
sizes a batch shrinking as rows finish goes through. Streaming SmolLM2-135M's 211 weights once
(one thread, this machine, ms; the best per row count in bold)::

    rows                          1      2      3      4      8     14     32     64    128
    W as stored (row-major)     48.9  **54**  **59**   90    121    200    156    201    316
    W column-major (W.T contig.) **45**   66     73     82    106    130    139  **164** **279**
    oneDNN prepacked (hint 16)  60.8   65     65   **51**  **79** **105** **127**   177    282

(in the whole model at batch 1: 117 -> 96 ms per step with column-major; at batch 14: 301 ->
207 column-major -> 185 prepacked.) :func:`fast_linears` routes every fp32 ``nn.Linear`` of a CPU
model, for the duration of a block, to the best of these for the rows of each call
(:data:`PACKED_ROWS` prepacked, 2-3 rows as stored, column-major otherwise), on copies of the
weights made once and kept (:data:`_FAST_WEIGHTS`: twice the linear weights' memory) and remade
when a weight changed (optimizer step, reload): its storage, version counter or a strided
fingerprint of its values differs. Inputs go in as 2-D contiguous rows: a strided 3-D input (the
last position kept by ``logits_to_keep``) made matmul broadcast the whole output-layer weight
into a batched matmul (109 ms instead of 30 at 12 rows). Same maths (float rounding aside);
inference only.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import nn

NAME = "mimesis_sdpa_gqa"
_registered = False
# Copies of linear weights: module -> (fingerprint of the weight, column-major, prepacked).
_FAST_WEIGHTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_FINGERPRINT_STRIDE = 4099  # every 4099th value of a weight enters its fingerprint
PACKED_ROWS = (4, 48)  # rows [lo, hi) of a linear call that use the prepacked weight
AS_STORED_ROWS = (2, 3)  # row counts for which the weight as stored is fastest


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


def _fingerprint(weight: torch.Tensor) -> tuple:
    """Cheap identity of a weight's current values: storage, version counter, shape and the sum
    of a strided sample (catches in-place writes through ``.data``, which skip the counter)."""
    with torch.no_grad():
        sample = float(weight.detach().reshape(-1)[::_FINGERPRINT_STRIDE].sum())
    try:
        version = weight._version
    except RuntimeError:  # an inference tensor has no version counter
        version = -1
    return weight.data_ptr(), version, tuple(weight.shape), sample


def _prepack(weight: torch.Tensor) -> torch.Tensor | None:
    """oneDNN's prepacked form of ``weight`` (``None`` where this torch build lacks it)."""
    try:
        return torch.ops.mkldnn._reorder_linear_weight(weight, 16)
    except (AttributeError, RuntimeError):
        return None


def _fast_forward(module: nn.Linear, column_major: torch.Tensor, packed: torch.Tensor | None):
    weight, bias = module.weight, module.bias

    def forward(x: torch.Tensor) -> torch.Tensor:
        rows = x.numel() // x.shape[-1]
        flat = x.reshape(rows, x.shape[-1])
        if packed is not None and PACKED_ROWS[0] <= rows < PACKED_ROWS[1]:
            out = torch.ops.mkldnn._linear_pointwise(flat, packed, bias, "none", [], "")
        else:
            out = F.linear(flat, weight if rows in AS_STORED_ROWS else column_major, bias)
        return out.view(*x.shape[:-1], out.shape[-1])

    return forward


@contextmanager
def fast_linears(model: nn.Module) -> Iterator[None]:
    """Run the block with every fp32 ``nn.Linear`` of a CPU ``model`` routed by rows to its
    fastest weight layout (see the module docstring); inference only. Modules whose ``forward``
    is already replaced on the instance (e.g. accelerate hooks) are left alone."""
    first = next(model.parameters(), None)
    if first is None or first.device.type != "cpu" or torch.is_grad_enabled():
        yield
        return
    swapped = []
    try:
        for module in model.modules():
            weight = module._parameters.get("weight") if isinstance(module, nn.Linear) else None
            if (weight is None or weight.dtype != torch.float32 or weight.dim() != 2
                    or "forward" in module.__dict__):
                continue
            key = _fingerprint(weight)
            entry = _FAST_WEIGHTS.get(module)
            if entry is None or entry[0] != key:
                with torch.no_grad():
                    detached = weight.detach()
                    entry = (key, detached.t().contiguous().t(), _prepack(detached))
                _FAST_WEIGHTS[module] = entry
            module.forward = _fast_forward(module, entry[1], entry[2])
            swapped.append(module)
        yield
    finally:
        for module in swapped:
            del module.forward
