"""A key/value cache that writes new tokens in place instead of re-concatenating.

transformers' ``DynamicLayer`` appends with ``torch.cat`` — every decoding step copies the whole
cache of every layer. At batch 16 with ~500 cached tokens that copy was ~60% of a SmolLM2-135M
step on this machine (profiled). :class:`GrowingLayer` preallocates room for the tokens a call
will add (doubling if ever exceeded) and hands attention views of the filled part. It implements
transformers' cache-layer interface (``update``, ``get_seq_length``, ``get_mask_sizes``,
``batch_select_indices``) and goes in a plain ``transformers.Cache(layers=...)``.

Two more copies are avoided for the same reason (each is a full pass over a cache of ~0.4 GB at
batch 16, made per call or per finished row, and the sequential baseline never pays them):

- :func:`left_padded_cache` writes each row's reused prefix straight into the preallocated
  buffer, instead of assembling a left-padded tensor that ``update`` then copies again;
- :meth:`GrowingLayer.batch_select_indices` moves only the rows that change place when rows
  leave the batch (the sampler fills holes from the tail), instead of gathering every row.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers.cache_utils import Cache, DynamicLayer

from mimesis.models.engine.prefix_cache import KV


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

    @classmethod
    def empty(cls, rows: int, heads: int, dim: int, capacity: int, length: int,
              dtype: torch.dtype, device: torch.device | str) -> GrowingLayer:
        """A zeroed layer whose first ``length`` columns count as filled (the caller writes
        them, e.g. :func:`left_padded_cache`); zeros keep masked columns finite."""
        layer = cls(max(capacity, length))
        layer.dtype, layer.device = dtype, torch.device(device)
        layer._keys = torch.zeros(rows, heads, layer.capacity, dim, dtype=dtype, device=device)
        layer._values = torch.zeros_like(layer._keys)
        layer.is_initialized, layer.length = True, length
        layer._refresh()
        return layer

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

    def batch_select_indices(self, indices: torch.Tensor | Sequence[int]) -> None:
        """Keep only the batch rows ``indices``, in that order (rows that finished leave).

        When every new row ``j`` comes from an old row ``indices[j] >= j`` (holes filled from
        the tail, or plain order-keeping removal), rows are moved inside the buffer one by one
        — only those that change place — and the buffer is narrowed to a view; otherwise all
        kept rows are gathered into a new buffer.
        """
        if not self.is_initialized:
            return
        index = indices.tolist() if isinstance(indices, torch.Tensor) else list(indices)
        if all(i >= j for j, i in enumerate(index)):
            # Safe in ascending order: a source row i >= j is never an earlier destination.
            for j, i in enumerate(index):
                if i != j:
                    self._keys[j, :, :self.length] = self._keys[i, :, :self.length]
                    self._values[j, :, :self.length] = self._values[i, :, :self.length]
            self._keys, self._values = self._keys[:len(index)], self._values[:len(index)]
        else:
            index_t = torch.as_tensor(index, device=self._keys.device)
            self._keys, self._values = self._keys[index_t], self._values[index_t]
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


def left_padded_cache(n_layers: int, reused: Sequence[tuple[int, KV | None]], past: int,
                      capacity: int, heads: int, dim: int, dtype: torch.dtype,
                      device: torch.device | str) -> Cache:
    """A cache of ``len(reused)`` rows, ``capacity`` columns, whose first ``past`` count as
    filled: row ``i`` holds ``reused[i]``'s ``n`` tokens (per layer ``[heads, n, dim]`` keys and
    values) right-aligned in columns ``[past - n, past)``; zeros elsewhere.

    Raises:
        ValueError: a row's ``n`` exceeds ``past`` or a row has the wrong number of layers.
    """
    if any(n > past for n, _ in reused):
        raise ValueError(f"a reused prefix is longer than past={past}")
    if any(kv is not None and len(kv) != n_layers for _, kv in reused):
        raise ValueError(f"reused keys/values must have {n_layers} layers")
    layers = []
    for layer in range(n_layers):
        g = GrowingLayer.empty(len(reused), heads, dim, capacity, past, dtype, device)
        for i, (n, kv) in enumerate(reused):
            if kv is not None and n:
                g._keys[i, :, past - n:past] = kv[layer][0]
                g._values[i, :, past - n:past] = kv[layer][1]
        layers.append(g)
    return Cache(layers=layers)


def row_view(cache: Cache, start: int, end: int, length: int) -> Cache:
    """A cache over rows ``[start, end)`` of ``cache`` (:class:`GrowingLayer` layers) sharing
    its buffers, with ``length`` columns counted as filled: a forward through it writes its new
    keys/values in place into ``cache`` at columns ``[length, length + new)``. The caller sets
    ``cache``'s own length afterwards (:func:`set_length`)."""
    views = []
    for layer in cache.layers:
        if length > layer.capacity:
            raise ValueError(f"length {length} beyond capacity {layer.capacity}")
        view = GrowingLayer(layer.capacity)
        view.dtype, view.device = layer.dtype, layer.device
        view._keys, view._values = layer._keys[start:end], layer._values[start:end]
        view.is_initialized, view.length = True, length
        view._grow = _no_grow
        view._refresh()
        views.append(view)
    return Cache(layers=views)


def set_length(cache: Cache, length: int) -> None:
    """Count the first ``length`` columns of every :class:`GrowingLayer` of ``cache`` as filled."""
    for layer in cache.layers:
        layer.length = length
        layer._refresh()


def _no_grow(capacity: int) -> None:
    raise RuntimeError("a row view cannot grow: allocate the full cache with enough capacity")
