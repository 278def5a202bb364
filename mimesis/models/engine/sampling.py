"""Batched token-level sampling with per-episode KV-cache reuse across turns.

The rollout engine needs what ``ChatGenerator`` does not give: the sampled token ids themselves
and their log-probabilities, and per-row limits on new tokens. Multi-turn rollouts also re-send
each episode's whole history every turn, so on CPU prefill dominates (docs/stack.md: reuse the
KV cache across turns of an episode). :class:`TokenSampler` keeps the keys/values of recent
sequences (:class:`~mimesis.models.engine.prefix_cache.PrefixCache`) and, for every prompt of a batch,
prefills only the tokens after the longest cached prefix; prefixes that several prompts of one
call share (the G copies of an opening prompt, a common system prompt) are prefilled once first.

One call runs a plain decode loop over the whole batch (one forward per new token, all rows at
once). Row layout of the first forward, with ``c_i`` reused and ``n_i`` new tokens::

    [pad … | cached c_i | pad … | new n_i]      attention 0 on pads, explicit position ids

so the last column is every row's last prompt token. A row stops at EOS or at its own limit; its
last sampled token is never forwarded, so its stored prefix is ``prompt + sampled[:-1]``; a
finished row leaves the batch, so rows that stop early cost no further compute. Keys/values are
written in place (:mod:`mimesis.models.engine.kv`) and, on CPU, grouped-query attention reads shared heads
without copies (:mod:`mimesis.models.engine.attention`): batched decoding is then bound by memory traffic
(weights + cache), not by copies.

What batching costs that one-at-a-time does not — padding, gathers of the whole cache, per-row
work that does not shrink with batching — is what bounds batched throughput against the
sequential baseline, so each is cut where profiling found it (SmolLM2-135M, batch 16, CPU):

- prefill pads only within groups of rows of similar length (:func:`prefill_groups`);
- a finished row's slot is refilled by moving one tail row (:func:`fill_from_tail`);
- top-p never sorts the vocabulary (:func:`nucleus_draw`): the sort was a fifth of a step;
- linear layers use the weight layout fastest for the rows of each forward
  (:func:`~mimesis.models.engine.attention.fast_linears`): MKL is slowest on the 4-15 rows of a decode step.

Log-probabilities are those of the temperature-scaled distribution over the full vocabulary
(``log_softmax(logits / temperature)``), the quantity TRL's GRPO trainer recomputes for the
policy (``_get_per_token_logps_and_entropies`` divides logits by ``args.temperature``); top-p only
restricts which token is drawn. With ``temperature == 0`` (greedy) they are ``log_softmax(logits)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from itertools import pairwise
from typing import Protocol

import torch

from mimesis.models.engine.attention import fast_linears, gqa_attention
from mimesis.models.engine.kv import left_padded_cache, row_view, set_length
from mimesis.models.engine.prefix_cache import PrefixCache
from mimesis.models.engine.tokens import encode, render
from mimesis.schemas import Messages

SHARING_ROUNDS = 4  # levels of the prompts' prefix tree prefilled once per call
# Fixed cost of one forward, in tokens of compute (weights are read once per forward: ~50 ms
# for SmolLM2-135M on this CPU, ~15 prefill tokens): decides how rows are grouped in prefill.
PREFILL_FORWARD_COST = 16


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

    Not :class:`~mimesis.models.generation.GenerationConfig`: token-level sampling with log-probs
    and KV-cache reuse has cache settings and no prompt cut.

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
        fast_linears: On CPU, run the model's fp32 linear layers on the weight layout that is
            fastest for the rows of each call (:func:`~mimesis.models.engine.attention.fast_linears`: up to
            2x faster on the few rows of a decoding step, and faster at batch 1 too; costs two
            more copies of those weights).
        prefill: Text every :meth:`TokenSampler.chat` turn starts with, written after the
            generation prompt and returned as the start of each text. The user simulator's
            output contract opens every turn with ``<think>`` (:mod:`mimesis.format`), so its
            samplers prefill it: the model never has to choose, at its first token, between
            thinking and speaking (docs/pitfalls.md #15).
    """

    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 96
    batch_size: int = 16
    cache_entries: int = 64
    min_shared: int = 16
    fast_linears: bool = True
    prefill: str = ""

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
        self._kv_heads = (getattr(text_config, "num_key_value_heads", None)
                          or text_config.num_attention_heads)
        self._head_dim = (getattr(text_config, "head_dim", None)
                          or text_config.hidden_size // text_config.num_attention_heads)
        self._kv_dtype = model.dtype
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
        prefill = self.params.prefill
        prompts = [encode(self.tokenizer,
                          render(self.tokenizer, m, add_generation_prompt=True) + prefill)
                   for m in batch]
        samples = self(prompts, [self.params.max_new_tokens] * len(prompts))
        return [prefill + self.tokenizer.decode(s.ids, skip_special_tokens=True) for s in samples]

    @torch.inference_mode()
    def _generate(self, prompts: list[list[int]], limits: list[int]) -> list[Sample]:
        linears = fast_linears(self.model) if self.params.fast_linears else nullcontext()
        with gqa_attention(self.model), linears:
            for _ in range(SHARING_ROUNDS):
                shared = self.cache.shared_prefixes(prompts, self.params.min_shared)
                if not shared:
                    break
                _, cache, mask, order = self._prefill(shared, room=0)
                for row, i in enumerate(order):
                    self._store(shared[i], cache, mask, row)
            logits, cache, mask, order = self._prefill(prompts, room=max(limits))
            samples = self._decode(logits, cache, mask, [prompts[i] for i in order],
                                   [limits[i] for i in order])
        out: list[Sample | None] = [None] * len(prompts)
        for i, sample in zip(order, samples, strict=True):
            out[i] = sample
        return [s for s in out if s is not None]

    def _prefill(self, prompts: list[list[int]], room: int):
        """Forward every prompt after its cached prefix into one cache with ``room`` free slots.

        Rows are ordered by how many tokens they need and forwarded in groups
        (:func:`prefill_groups`): one forward padded to the longest row would spend most of its
        compute on pads when a fresh 300-token opening shares the call with 20-token follow-ups
        (the sequential baseline never pads). Every group writes into its rows of the one
        preallocated cache (:func:`~mimesis.models.engine.kv.row_view`), right-aligned to the same last
        column, so decoding continues on the whole batch without copies.

        Returns:
            ``(last-position logits, cache, attention mask of what the cache holds, order)``;
            batch row ``b`` is ``prompts[order[b]]``.
        """
        reused = self.cache.take(prompts)
        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]) - reused[i][0])
        prompts, reused = [prompts[i] for i in order], [reused[i] for i in order]
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
        cache = left_padded_cache(self._layers, reused, past, past + width + room,
                                  self._kv_heads, self._head_dim, self._kv_dtype, device)
        self.prefill_tokens += sum(len(x) for x in new)
        logits = []
        for a, b in prefill_groups([len(x) for x in new], PREFILL_FORWARD_COST):
            w = len(new[b - 1])
            view = row_view(cache, a, b, past + width - w)
            logits.append(self.model(input_ids=input_ids[a:b, width - w:],
                                     attention_mask=mask[a:b], position_ids=positions[a:b, width - w:],
                                     past_key_values=view, use_cache=True,
                                     logits_to_keep=1).logits[:, -1])
        set_length(cache, past + width)
        return torch.cat(logits), cache, mask, order

    def _decode(self, logits: torch.Tensor, cache, mask: torch.Tensor, prompts: list[list[int]],
                limits: list[int]) -> list[Sample]:
        """Sample until every row hit EOS or its limit, one forward per step for the rows still
        going: a finished row leaves the batch (its prefix is stored first), so rows that stop
        early cost nothing afterwards. Its place is taken by a row from the tail of the batch
        (:meth:`~mimesis.models.engine.kv.GrowingLayer.batch_select_indices` then moves one row, not the
        whole cache)."""
        eos = self.tokenizer.eos_token_id
        ids: list[list[int]] = [[] for _ in prompts]
        lps: list[list[float]] = [[] for _ in prompts]
        rows = list(range(len(prompts)))  # batch row -> prompt index
        while True:
            tokens, logps = self._sample(logits)
            sampled, logps = tokens.tolist(), logps.tolist()
            done = set()
            for b, i in enumerate(rows):
                ids[i].append(sampled[b])
                lps[i].append(logps[b])
                if sampled[b] == eos or len(ids[i]) >= limits[i]:
                    done.add(b)
                    self._store(prompts[i] + ids[i][:-1], cache, mask, b)
            if len(done) == len(rows):
                break
            if done:
                index = fill_from_tail(len(rows), done)
                cache.batch_select_indices(index)
                index_t = torch.tensor(index, device=mask.device)
                mask, tokens, rows = mask[index_t], tokens[index_t], [rows[b] for b in index]
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
        """Draw one token per row; returns ``(tokens [rows], log-probs [rows])``.

        Top-p never sorts the whole vocabulary: sorting 49k logits per row cost ~3 ms a row
        (~60 ms a step at batch 16, a fifth of a batched decoding step; the sequential baseline
        pays it once per step at batch 1), so the nucleus is searched among the top-k logits,
        k growing only for rows whose top k hold less than ``top_p`` of the mass
        (:func:`nucleus_draw`); the nucleus, and so the distribution, is the same.
        """
        logits = logits.float()
        temperature, top_p = self.params.temperature, self.params.top_p
        scaled = logits if temperature == 0 else logits / temperature
        lse = torch.logsumexp(scaled, dim=-1)
        tokens = (scaled.argmax(dim=-1) if temperature == 0
                  else nucleus_draw(scaled, lse, top_p, self.generator))
        return tokens, scaled.gather(-1, tokens[:, None])[:, 0] - lse


def nucleus_draw(scaled: torch.Tensor, lse: torch.Tensor, top_p: float,
                 generator: torch.Generator | None = None, first_k: int = 64) -> torch.Tensor:
    """One token per row from ``softmax(scaled)`` restricted to its top-p nucleus.

    The nucleus is the tokens, by decreasing probability, whose preceding mass is at most
    ``top_p`` (the first token always). It lies inside the top ``k`` tokens exactly when their
    mass exceeds ``top_p`` (the next token's preceding mass then does), so each row is resolved
    with ``topk`` at ``k = first_k`` and only rows that are not get a larger ``k`` (x8, up to the
    whole vocabulary). ``top_p >= 1`` samples the full distribution by its inverse CDF.

    Args:
        scaled: ``[rows, vocab]`` temperature-scaled logits.
        lse: ``[rows]`` their ``logsumexp``.
    """
    rows, vocab = scaled.shape
    if top_p >= 1:
        return _inverse_cdf((scaled - lse[:, None]).exp(), generator)
    tokens = torch.empty(rows, dtype=torch.long, device=scaled.device)
    todo = torch.arange(rows, device=scaled.device)
    k = min(first_k, vocab)
    while todo.numel():
        values, index = scaled[todo].topk(k, dim=-1)  # sorted, largest first
        probs = (values - lse[todo, None]).exp()
        before = probs.cumsum(dim=-1) - probs
        resolved = torch.ones_like(todo, dtype=torch.bool) if k == vocab else (
            before[:, -1] + probs[:, -1] > top_p)
        if resolved.any():
            weights = probs[resolved].masked_fill(before[resolved] > top_p, 0.0)
            pick = _inverse_cdf(weights, generator)
            tokens[todo[resolved]] = index[resolved].gather(-1, pick[:, None])[:, 0]
        todo, k = todo[~resolved], min(vocab, 8 * k)
    return tokens


def _inverse_cdf(weights: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """Index drawn per row with probability proportional to ``weights`` (``[rows, n]``, >= 0)."""
    cdf = weights.cumsum(dim=-1)
    u = torch.rand(weights.shape[0], 1, generator=generator, device=weights.device,
                   dtype=cdf.dtype) * cdf[:, -1:]
    return torch.searchsorted(cdf, u, right=True)[:, 0].clamp_(max=weights.shape[1] - 1)


def fill_from_tail(rows: int, done: set[int]) -> list[int]:
    """Batch order after rows ``done`` leave: kept rows stay in place and the holes among the
    first ``rows - len(done)`` are filled by the kept rows beyond them, so that entry ``j``
    (old row) is always ``>= j`` (:meth:`~mimesis.models.engine.kv.GrowingLayer.batch_select_indices`
    then moves only those rows)."""
    n = rows - len(done)
    tail = [b for b in range(n, rows) if b not in done]
    return [b if b not in done else tail.pop() for b in range(n)]


def prefill_groups(lengths: Sequence[int], forward_cost: int) -> list[tuple[int, int]]:
    """Split rows sorted by increasing ``lengths`` into contiguous groups ``[(start, end)]``,
    each forwarded padded to its longest row, minimising ``sum(forward_cost + rows x longest)``
    (tokens computed, pads included, plus a fixed cost per forward in tokens)."""
    n = len(lengths)
    if any(a > b for a, b in pairwise(lengths)):
        raise ValueError("lengths must be sorted in increasing order")
    best, cut = [0] + [None] * n, [0] * (n + 1)
    for end in range(1, n + 1):
        for start in range(end):
            cost = best[start] + forward_cost + (end - start) * lengths[end - 1]
            if best[end] is None or cost < best[end]:
                best[end], cut[end] = cost, start
    groups, end = [], n
    while end:
        groups.append((cut[end], end))
        end = cut[end]
    return groups[::-1]
