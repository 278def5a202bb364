"""A key/value cache that writes new tokens in place instead of re-concatenating.

transformers' ``DynamicLayer`` appends with ``torch.cat`` — every decoding step copies the whole
cache of every layer. At batch 16 with ~500 cached tokens that copy was ~60% of a SmolLM2-135M
step on this machine (profiled). :class:`GrowingLayer` preallocates room for the tokens a call
will add (doubling if ever exceeded) and hands attention views of the filled part. It implements
transformers' cache-layer interface (``update``, ``get_seq_length``, ``get_mask_sizes``,
``batch_select_indices``) and goes in a plain ``transformers.Cache(layers=...)``.
"""

from __future__ import annotations

import torch
from transformers.cache_utils import Cache, DynamicLayer

from mimesis.rl.prefix_cache import KV


class GrowingLayer(DynamicLayer):
    """One layer's keys/values ``[batch, heads, length, dim]`` inside a preallocated buffer.

    Args:
        capacity: Tokens to allocate room for (grows by doubling when exceeded).
        past: Keys and values already computed (``[batch, heads, n, dim]`` each), or ``None``
            to allocate on the first ``update``.
    """

    def __init__(self, capacity: int, past: tuple[torch.Tensor, torch.Tensor] | None = None):
        super().__init__()
        self.capacity, self.length = capacity, 0
        self._keys = self._values = None
        if past is not None:
            self.update(*past)

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.dtype, self.device = key_states.dtype, key_states.device
        b, h, _, d = key_states.shape
        self._keys = key_states.new_zeros(b, h, self.capacity, d)
        self._values = value_states.new_zeros(b, h, self.capacity, value_states.shape[-1])
        self.is_initialized = True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args,
               **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
        """Write the new tokens after the filled part; returns views of everything filled."""
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        end = self.length + key_states.shape[-2]
        if end > self.capacity:
            self._grow(max(end, 2 * self.capacity))
        self._keys[:, :, self.length:end] = key_states
        self._values[:, :, self.length:end] = value_states
        self.length = end
        self._refresh()
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.length

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        """Keep only the batch rows ``indices`` (rows that finished leave the batch)."""
        if self.is_initialized:
            self._keys, self._values = self._keys[indices], self._values[indices]
            self._refresh()

    def _grow(self, capacity: int) -> None:
        keys, values = self._keys, self._values
        self.capacity = capacity
        self._keys = keys.new_zeros(*keys.shape[:2], capacity, keys.shape[-1])
        self._values = values.new_zeros(*values.shape[:2], capacity, values.shape[-1])
        self._keys[:, :, :self.length] = keys[:, :, :self.length]
        self._values[:, :, :self.length] = values[:, :, :self.length]

    def _refresh(self) -> None:
        self.keys = self._keys[:, :, :self.length]
        self.values = self._values[:, :, :self.length]


def growing_cache(n_layers: int, capacity: int, past: KV | None = None) -> Cache:
    """A ``transformers.Cache`` of ``n_layers`` :class:`GrowingLayer` (``past`` per layer:
    ``[batch, heads, n, dim]`` keys and values, or ``None`` for an empty cache)."""
    if past is not None and len(past) != n_layers:
        raise ValueError(f"{len(past)} past layers for a {n_layers}-layer model")
    return Cache(layers=[GrowingLayer(capacity, None if past is None else past[i])
                         for i in range(n_layers)])
