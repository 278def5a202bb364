"""Batched token-level sampling with per-episode KV-cache reuse across turns.

The rollout engine needs what ``ChatGenerator`` does not give: the sampled token ids themselves
and their log-probabilities, and per-row limits on new tokens. Multi-turn rollouts also re-send
each episode's whole history every turn, so on CPU prefill dominates (STACK.md: "reuse the KV
cache across turns of an episode"). :class:`TokenSampler` keeps the keys/values of recent
sequences (:class:`~mimesis.rl.prefix_cache.PrefixCache`) and, for every prompt of a batch,
prefills only the tokens after the longest cached prefix; prefixes that several prompts of one
call share (the G copies of an opening prompt, a common system prompt) are prefilled once first.

One call runs a plain decode loop over the whole batch (one forward per new token, all rows at
once). Row layout of the first forward, with ``c_i`` reused and ``n_i`` new tokens::

    [pad … | cached c_i | pad … | new n_i]      attention 0 on pads, explicit position ids

so the last column is every row's last prompt token. A row stops at EOS or at its own limit; its
last sampled token is never forwarded, so its stored prefix is ``prompt + sampled[:-1]``; a
finished row leaves the batch, so rows that stop early cost no further compute. Keys/values are
written in place (:mod:`mimesis.rl.kv`) and, on CPU, grouped-query attention reads shared heads
without copies (:mod:`mimesis.rl.attention`): batched decoding is then bound by memory traffic
(weights + cache), not by copies.

Log-probabilities are those of the temperature-scaled distribution over the full vocabulary
(``log_softmax(logits / temperature)``), the quantity TRL's GRPO trainer recomputes for the
policy (``_get_per_token_logps_and_entropies`` divides logits by ``args.temperature``); top-p only
restricts which token is drawn. With ``temperature == 0`` (greedy) they are ``log_softmax(logits)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

from mimesis.rl.attention import gqa_attention
from mimesis.rl.kv import growing_cache
from mimesis.rl.prefix_cache import KV, PrefixCache
from mimesis.rl.tokens import Messages, encode, render

SHARING_ROUNDS = 4  # levels of the prompts' prefix tree prefilled once per call


@dataclass(frozen=True)
class Sample:
    """One sampled turn: ``ids`` (ending with EOS when the model stopped) and their log-probs."""

    ids: list[int]
    logprobs: list[float]


class TokenGenerateFn(Protocol):
    """``fn(prompts, max_new_tokens) -> samples``: one :class:`Sample` per prompt, in order."""

    def __call__(self, prompts: Sequence[Sequence[int]],
                 max_new_tokens: Sequence[int]) -> list[Sample]: ...


@dataclass(frozen=True)
class SamplingParams:
    """Sampling settings of a :class:`TokenSampler`.

    Attributes:
        temperature: Softmax temperature; 0 = greedy.
        top_p: Nucleus sampling mass (1.0 = off).
        max_new_tokens: New tokens per chat turn for :meth:`TokenSampler.chat` (the engine passes
            its own per-row limits to ``__call__``).
        batch_size: Rows per forward; a call with more prompts runs successive chunks.
        cache_entries: Sequences whose keys/values are kept for reuse (0 = no reuse). SmolLM2-135M
            costs ~46 KB per cached token.
        min_shared: A prefix that several prompts of one call share is prefilled once when it
            is at least this many tokens beyond their cached prefix.
    """

    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 96
    batch_size: int = 16
    cache_entries: int = 64
    min_shared: int = 16

    def __post_init__(self) -> None:
        if self.temperature < 0 or not 0 < self.top_p <= 1:
            raise ValueError(f"bad temperature/top_p: {self.temperature}/{self.top_p}")
        if min(self.max_new_tokens, self.batch_size, self.min_shared) < 1 or self.cache_entries < 0:
            raise ValueError("max_new_tokens, batch_size, min_shared must be >= 1, "
                             "cache_entries >= 0")


def _has_sliding_window(config) -> bool:
    """Whether any layer uses sliding-window attention (``layer_types`` when the config has it;
    Qwen2-style configs carry a ``sliding_window`` size even with ``use_sliding_window=False``)."""
    text = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    layer_types = getattr(text, "layer_types", None)
    if layer_types:
        return "sliding_attention" in layer_types
    return bool(getattr(text, "sliding_window", None)) and getattr(text, "use_sliding_window", True)


class TokenSampler:
    """Batched sampling from a causal LM on token ids, with log-probabilities.

    Args:
        model: A ``PreTrainedModel`` (causal LM) in eval mode; its weights are not changed.
        tokenizer: Its tokenizer (``eos_token_id`` stops a row; ``pad_token_id`` fills pads).
        params: Sampling settings.
        seed: Seed of the sampler's own ``torch.Generator`` (``None``: nondeterministic).

    Raises:
        ValueError: a model with sliding-window attention (its caches cannot be assembled row by
            row here; SmolLM2, Llama and Qwen3 use full attention).
    """

    def __init__(self, model, tokenizer, params: SamplingParams | None = None,
                 seed: int | None = None) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.params = params or SamplingParams()
        if _has_sliding_window(model.config):
            raise ValueError("TokenSampler does not support sliding-window attention models")
        self.cache = PrefixCache(self.params.cache_entries)
        text_config = (model.config.get_text_config(decoder=True)
                       if hasattr(model.config, "get_text_config") else model.config)
        self._layers = text_config.num_hidden_layers
        self.generator = torch.Generator(device=model.device)
        if seed is not None:
            self.generator.manual_seed(seed)
        self.calls = self.prefill_tokens = self.sampled_tokens = 0

    def __call__(self, prompts: Sequence[Sequence[int]],
                 max_new_tokens: Sequence[int]) -> list[Sample]:
        """Sample one continuation per prompt (see :class:`TokenGenerateFn`).

        Raises:
            ValueError: an empty prompt, a limit < 1, or mismatched lengths.
        """
        if len(prompts) != len(max_new_tokens):
            raise ValueError(f"{len(prompts)} prompts but {len(max_new_tokens)} limits")
        if any(len(p) == 0 for p in prompts) or any(n < 1 for n in max_new_tokens):
            raise ValueError("prompts must be non-empty and limits >= 1")
        self.calls += 1
        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
        out: list[Sample | None] = [None] * len(prompts)
        size = self.params.batch_size
        for start in range(0, len(order), size):
            idx = order[start:start + size]
            chunk = self._generate([list(prompts[i]) for i in idx], [max_new_tokens[i] for i in idx])
            for i, sample in zip(idx, chunk, strict=True):
                out[i] = sample
        return [s for s in out if s is not None]

    def chat(self, batch: Sequence[Messages]) -> list[str]:
        """``generate_fn`` for :class:`~mimesis.simulator.runtime.UserSimulator`: the assistant-role
        continuation of each chat (template applied, special tokens removed), in order."""
        prompts = [encode(self.tokenizer, render(self.tokenizer, m, add_generation_prompt=True))
                   for m in batch]
        samples = self(prompts, [self.params.max_new_tokens] * len(prompts))
        return [self.tokenizer.decode(s.ids, skip_special_tokens=True) for s in samples]

    @torch.inference_mode()
    def _generate(self, prompts: list[list[int]], limits: list[int]) -> list[Sample]:
        with gqa_attention(self.model):
            for _ in range(SHARING_ROUNDS):
                shared = self.cache.shared_prefixes(prompts, self.params.min_shared)
                if not shared:
                    break
                _, cache, mask = self._prefill(shared, room=0)
                for row, prefix in enumerate(shared):
                    self._store(prefix, cache, mask, row)
            logits, cache, mask = self._prefill(prompts, room=max(limits))
            return self._decode(logits, cache, mask, prompts, limits)

    def _prefill(self, prompts: list[list[int]], room: int):
        """Forward every prompt after its cached prefix into a cache with ``room`` free slots;
        returns (last-position logits, cache, attention mask of what the cache holds)."""
        reused = self.cache.take(prompts)
        device, pad = self.model.device, self.tokenizer.pad_token_id
        past = max(n for n, _ in reused)
        new = [p[n:] for p, (n, _) in zip(prompts, reused, strict=True)]
        width = max(len(x) for x in new)
        rows = len(prompts)
        mask = torch.zeros(rows, past + width, dtype=torch.long, device=device)
        input_ids = torch.full((rows, width), pad, dtype=torch.long, device=device)
        positions = torch.zeros(rows, width, dtype=torch.long, device=device)
        for i, ((n, _), x) in enumerate(zip(reused, new, strict=True)):
            mask[i, past - n:past] = 1
            mask[i, past + width - len(x):] = 1
            input_ids[i, width - len(x):] = torch.tensor(x, device=device)
            positions[i, width - len(x):] = torch.arange(n, n + len(x), device=device)
        cache = growing_cache(self._layers, past + width + room,
                              self._batch_kv(reused, past) if past else None)
        self.prefill_tokens += sum(len(x) for x in new)
        logits = self.model(input_ids=input_ids, attention_mask=mask, position_ids=positions,
                            past_key_values=cache, use_cache=True, logits_to_keep=1).logits[:, -1]
        return logits, cache, mask

    def _batch_kv(self, reused: list[tuple[int, KV | None]], past: int) -> KV:
        """Left-padded ``[rows, heads, past, dim]`` keys/values from the reused prefixes."""
        template = next(kv for n, kv in reused if kv is not None)
        layers: KV = []
        for layer, (k0, v0) in enumerate(template):
            keys = k0.new_zeros(len(reused), k0.shape[0], past, k0.shape[-1])
            values = v0.new_zeros(len(reused), v0.shape[0], past, v0.shape[-1])
            for i, (n, kv) in enumerate(reused):
                if kv is not None:
                    keys[i, :, past - n:] = kv[layer][0]
                    values[i, :, past - n:] = kv[layer][1]
            layers.append((keys, values))
        return layers

    def _decode(self, logits: torch.Tensor, cache, mask: torch.Tensor, prompts: list[list[int]],
                limits: list[int]) -> list[Sample]:
        """Sample until every row hit EOS or its limit, one forward per step for the rows still
        going: a finished row leaves the batch (its prefix is stored first), so rows that stop
        early cost nothing afterwards."""
        eos = self.tokenizer.eos_token_id
        ids: list[list[int]] = [[] for _ in prompts]
        lps: list[list[float]] = [[] for _ in prompts]
        rows = list(range(len(prompts)))  # batch row -> prompt index
        while True:
            tokens, logps = self._sample(logits)
            keep = []
            for b, i in enumerate(rows):
                ids[i].append(int(tokens[b]))
                lps[i].append(float(logps[b]))
                if ids[i][-1] != eos and len(ids[i]) < limits[i]:
                    keep.append(b)
                else:
                    self._store(prompts[i] + ids[i][:-1], cache, mask, b)
            if not keep:
                break
            if len(keep) < len(rows):
                index = torch.tensor(keep, device=mask.device)
                cache.batch_select_indices(index)
                mask, tokens, rows = mask[index], tokens[index], [rows[b] for b in keep]
            mask = torch.cat([mask, mask.new_ones(len(rows), 1)], dim=1)
            pos = torch.tensor([len(prompts[i]) + len(ids[i]) - 1 for i in rows],
                               device=mask.device)[:, None]
            logits = self.model(input_ids=tokens[:, None], attention_mask=mask, position_ids=pos,
                                past_key_values=cache, use_cache=True).logits[:, -1]
        self.sampled_tokens += sum(len(x) for x in ids)
        return [Sample(i, lp) for i, lp in zip(ids, lps, strict=True)]

    def _store(self, ids: list[int], cache, mask: torch.Tensor, row: int) -> None:
        """Keep batch row ``row``'s real (unmasked) cache columns under ``ids``."""
        if self.cache.capacity == 0:
            return
        cols = torch.nonzero(mask[row], as_tuple=True)[0]
        if len(cols) != len(ids):
            raise RuntimeError(f"cache row {row} holds {len(cols)} tokens, expected {len(ids)}")
        self.cache.store(ids, [(layer.keys[row][:, cols].clone(), layer.values[row][:, cols].clone())
                               for layer in cache.layers])

    def _sample(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Draw one token per row; returns ``(tokens [rows], log-probs [rows])``."""
        logits = logits.float()
        temperature, top_p = self.params.temperature, self.params.top_p
        if temperature == 0:
            logp = torch.log_softmax(logits, dim=-1)
            tokens = logp.argmax(dim=-1)
        else:
            logp = torch.log_softmax(logits / temperature, dim=-1)
            probs = logp.exp()
            if top_p < 1:
                sorted_p, order = probs.sort(dim=-1, descending=True)
                drop = sorted_p.cumsum(dim=-1) - sorted_p > top_p  # keeps the first token always
                probs = probs.scatter(-1, order, sorted_p.masked_fill(drop, 0.0))
            tokens = torch.multinomial(probs, 1, generator=self.generator)[:, 0]
        return tokens, logp.gather(-1, tokens[:, None])[:, 0]
