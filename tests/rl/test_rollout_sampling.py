"""TokenSampler on the tiny random Llama: log-probs, limits, EOS, KV reuse across turns."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from mimesis.models.base import load_base
from mimesis.models.engine.sampling import SamplingParams, TokenSampler


@pytest.fixture(scope="module")
def tiny():
    return load_base("tiny-llama")


def reference_logprobs(model, prompt: list[int], ids: list[int], temperature: float) -> list[float]:
    """Teacher-forced log-probs of ``ids`` after ``prompt``: one full forward, no cache."""
    with torch.no_grad():
        logits = model(torch.tensor([prompt + ids])).logits[0].float()
    logp = torch.log_softmax(logits / temperature, dim=-1)
    return [logp[len(prompt) - 1 + j, t].item() for j, t in enumerate(ids)]


def encode(tok, text: str) -> list[int]:
    return tok(text, add_special_tokens=False)["input_ids"]


def test_logprobs_match_a_full_forward_with_and_without_reuse(tiny) -> None:
    model, tok = tiny
    sampler = TokenSampler(model, tok, SamplingParams(temperature=0.7, top_p=0.9), seed=0)
    prompts = [encode(tok, t) for t in ("hello there, how are you", "a b",
                                        "the quick brown fox jumps over the lazy dog")]
    first = sampler(prompts, [6, 3, 9])
    assert [len(s.ids) for s in first] == [6, 3, 9]  # a random model never says EOS this soon
    assert sampler.cache.hits == 0 and sampler.prefill_tokens == sum(map(len, prompts))
    # Turn 2 of the same episodes (+ a new one): only what follows the cached prefix is prefilled.
    follow = encode(tok, " and then?")
    second_prompts = [p + s.ids + follow for p, s in zip(prompts, first, strict=True)]
    second_prompts.append(encode(tok, "Zebras open a new episode"))
    prefilled = sampler.prefill_tokens
    second = sampler(second_prompts, [4, 4, 4, 4])
    assert sampler.cache.hits == 3
    assert sampler.prefill_tokens - prefilled == 3 * (1 + len(follow)) + len(second_prompts[-1])
    for prompt, sample in [*zip(prompts, first), *zip(second_prompts, second)]:
        ref = reference_logprobs(model, prompt, sample.ids, 0.7)
        assert sample.logprobs == pytest.approx(ref, abs=1e-4)


def test_each_row_stops_at_eos_or_its_own_limit(tiny) -> None:
    model, tok = tiny
    prompts = [encode(tok, "one two three"), encode(tok, "four five six seven")]
    greedy = SamplingParams(temperature=0.0)
    first_token = TokenSampler(model, tok, greedy)([prompts[0]], [1])[0].ids[0]
    # Pretend the token the model greedily emits first for row 0 is EOS.
    fake_tok = SimpleNamespace(eos_token_id=first_token, pad_token_id=tok.pad_token_id)
    sampler = TokenSampler(model, fake_tok, greedy)
    stopped, limited = sampler(prompts, [5, 7])
    assert stopped.ids == [first_token]
    assert len(limited.ids) == 7 and first_token not in limited.ids
    assert limited.logprobs == pytest.approx(reference_logprobs(model, prompts[1], limited.ids, 1.0),
                                             abs=1e-4)


def test_without_reuse_nothing_is_cached(tiny) -> None:
    model, tok = tiny
    sampler = TokenSampler(model, tok, SamplingParams(cache_entries=0), seed=1)
    prompt = encode(tok, "hello")
    sample = sampler([prompt], [3])[0]
    sampler([prompt + sample.ids], [2])
    assert len(sampler.cache) == 0 and sampler.cache.hits == 0
    assert sampler.prefill_tokens == 2 * len(prompt) + 3


def test_chat_is_a_simulator_generate_fn(tiny) -> None:
    model, tok = tiny
    sampler = TokenSampler(model, tok, SamplingParams(max_new_tokens=5), seed=2)
    out = sampler.chat([[{"role": "system", "content": "be a user"},
                         {"role": "user", "content": "hi"}]] * 2)
    assert len(out) == 2 and all(isinstance(x, str) for x in out)


def test_bad_calls_are_refused(tiny) -> None:
    model, tok = tiny
    sampler = TokenSampler(model, tok)
    with pytest.raises(ValueError):
        sampler([[1, 2]], [1, 2])
    with pytest.raises(ValueError):
        sampler([[]], [3])
    with pytest.raises(ValueError):
        SamplingParams(top_p=0.0)


def test_prefixes_shared_inside_one_call_are_prefilled_once(tiny) -> None:
    model, tok = tiny
    opening = encode(tok, "You are helping a user plan a trip. Ask about their preferences "
                          "one at a time and recommend one option for each part of the trip.")
    tails = [encode(tok, t) for t in (" I fly from Rome to Chicago on August 10, two adults.",
                                      " Miami to London on November 19, and I need a hotel.")]
    # G=2 copies of each of two openings that share a long instruction text.
    prompts = [opening + tails[0]] * 2 + [opening + tails[1]] * 2
    sampler = TokenSampler(model, tok, SamplingParams(temperature=1.0, min_shared=8), seed=3)
    samples = sampler(prompts, [5] * 4)
    full = sum(map(len, prompts))
    # Shared instruction once, each opening's tail once, then one token per row.
    expected = len(opening) + sum(len(t) - 1 for t in tails) + 4
    assert sampler.prefill_tokens == expected < full / 2
    for prompt, sample in zip(prompts, samples, strict=True):
        ref = reference_logprobs(model, prompt, sample.ids, 1.0)
        assert sample.logprobs == pytest.approx(ref, abs=1e-4)


def test_gqa_attention_is_switched_on_for_the_call_only(tiny) -> None:
    from mimesis.models.engine.attention import NAME, gqa_attention

    model, tok = tiny
    assert model.config._attn_implementation == "sdpa"
    with gqa_attention(model):
        assert model.config._attn_implementation == NAME
        ids = torch.tensor([encode(tok, "grouped query attention, keys read in place")])
        with torch.no_grad():
            switched = model(ids).logits
    assert model.config._attn_implementation == "sdpa"
    with torch.no_grad():
        assert torch.allclose(switched, model(ids).logits, atol=1e-5)


def test_growing_cache_layer_equals_concatenation() -> None:
    from mimesis.models.engine.kv import GrowingLayer, left_padded_cache

    parts = [torch.randn(3, 2, n, 4) for n in (3, 1, 4)]
    layer = GrowingLayer(capacity=2, past=(parts[0], -parts[0]))  # grows past its capacity
    for part in parts[1:]:
        keys, values = layer.update(part, -part)
    assert torch.equal(keys, torch.cat(parts, dim=2)) and torch.equal(values, -keys)
    assert layer.get_seq_length() == 8 and layer.capacity >= 8
    layer.batch_select_indices(torch.tensor([2, 0]))
    assert torch.equal(layer.keys, torch.cat(parts, dim=2)[[2, 0]])
    with pytest.raises(ValueError, match="2 layers"):  # one layer of keys for a 2-layer model
        left_padded_cache(2, [(3, [(parts[0][0], parts[0][0])])], 3, 4, 2, 4, torch.float32, "cpu")
    with pytest.raises(ValueError, match="longer than past"):
        left_padded_cache(1, [(3, [(parts[0][0], parts[0][0])])], 2, 4, 2, 4, torch.float32, "cpu")


def reference_greedy(model, prompt: list[int], n: int) -> list[int]:
    """The unoptimised path: ``n`` greedy tokens, each from a full forward of everything so far
    (no cache, no batching, no padding)."""
    ids = list(prompt)
    with torch.no_grad():
        for _ in range(n):
            ids.append(int(model(torch.tensor([ids])).logits[0, -1].argmax()))
    return ids[len(prompt):]


def test_grouped_prefill_and_shrinking_batch_give_the_unbatched_greedy_tokens(tiny) -> None:
    """Rows with reused prefixes and short follow-ups share a call with fresh long and short
    prompts (prefill in several groups, written into one cache) and leave the decode batch at
    different steps (holes filled from the tail): every row must still get exactly the tokens of
    a plain greedy loop on its prompt alone."""
    model, tok = tiny
    sampler = TokenSampler(model, tok, SamplingParams(temperature=0.0))
    first_prompts = [encode(tok, "one two three"), encode(tok, "the cat sat on the mat and")]
    first = sampler(first_prompts, [4, 6])
    follow = encode(tok, " ok?")
    prompts = [p + s.ids + follow for p, s in zip(first_prompts, first, strict=True)]
    prompts += [encode(tok, " ".join(f"word{i}" for i in range(40))), encode(tok, "hi")]
    limits = [3, 8, 5, 1]
    widths: list[int] = []
    hook = model.register_forward_pre_hook(
        lambda _, args, kwargs: widths.append(kwargs["input_ids"].shape[1]), with_kwargs=True)
    try:
        second = sampler(prompts, limits)
    finally:
        hook.remove()
    prefill_widths = [w for w in widths if w > 1]
    assert len(prefill_widths) >= 2 and max(prefill_widths) >= 40 and min(prefill_widths) < 10
    assert sampler.cache.hits == 2
    for prompt, sample, limit in [*zip(first_prompts, first, [4, 6]),
                                  *zip(prompts, second, limits, strict=True)]:
        assert len(sample.ids) == limit  # a random model does not say EOS this soon
        assert sample.ids == reference_greedy(model, prompt, limit)
        assert sample.logprobs == pytest.approx(
            reference_logprobs(model, prompt, sample.ids, 1.0), abs=1e-4)


def test_prefill_groups_split_only_where_padding_costs_more_than_a_forward() -> None:
    from mimesis.models.engine.sampling import prefill_groups

    assert prefill_groups([5, 6, 6, 7], forward_cost=16) == [(0, 4)]
    assert prefill_groups([3, 4, 4, 300], forward_cost=16) == [(0, 3), (3, 4)]
    assert prefill_groups([10, 200, 210], forward_cost=16) == [(0, 1), (1, 3)]
    assert prefill_groups([7], forward_cost=16) == [(0, 1)]
    with pytest.raises(ValueError):
        prefill_groups([4, 3], forward_cost=16)


def test_rows_leave_the_batch_by_moving_tail_rows_in_place() -> None:
    from mimesis.models.engine.kv import GrowingLayer
    from mimesis.models.engine.sampling import fill_from_tail

    index = fill_from_tail(6, {1, 3})
    assert sorted(index) == [0, 2, 4, 5] and all(i >= j for j, i in enumerate(index))
    assert fill_from_tail(3, {0, 1, 2}) == [] and fill_from_tail(3, set()) == [0, 1, 2]
    keys = torch.randn(6, 2, 5, 4)
    layer = GrowingLayer(capacity=8, past=(keys, -keys))
    buffer = layer._keys.data_ptr()
    layer.batch_select_indices(torch.tensor(index))
    assert torch.equal(layer.keys, keys[index]) and torch.equal(layer.values, -keys[index])
    assert layer._keys.data_ptr() == buffer  # moved inside the buffer, not gathered anew
    new = torch.randn(4, 2, 1, 4)
    assert torch.equal(layer.update(new, -new)[0], torch.cat([keys[index], new], dim=2))


def test_nucleus_draw_samples_the_sorted_nucleus() -> None:
    """Top-k search with growing k draws from the same nucleus as sorting the whole vocabulary:
    nuclei of 2, 8 and 111 tokens with ``first_k=4`` need k = 4, 32 and 256."""
    from mimesis.models.engine.sampling import nucleus_draw

    vocab, top_p, draws = 300, 0.9, 6000
    g = torch.Generator().manual_seed(0)
    logits = torch.stack([torch.randn(vocab, generator=g) * s for s in (3.5, 2.2, 1.5)])
    probs = torch.softmax(logits, dim=-1)
    sorted_p, order = probs.sort(dim=-1, descending=True)
    keep = sorted_p.cumsum(dim=-1) - sorted_p <= top_p
    expected = torch.zeros_like(probs).scatter(-1, order, sorted_p * keep)
    expected /= expected.sum(dim=-1, keepdim=True)
    sizes = keep.sum(dim=-1).tolist()
    assert sizes[0] <= 4 < sizes[1] <= 32 < sizes[2] <= 256
    rows = logits.repeat(draws, 1)
    tokens = nucleus_draw(rows, torch.logsumexp(rows, dim=-1), top_p,
                          torch.Generator().manual_seed(1), first_k=4).view(draws, 3)
    for r in range(3):
        freq = torch.bincount(tokens[:, r], minlength=vocab).float() / draws
        assert bool((freq[expected[r] == 0] == 0).all())  # never outside the nucleus
        assert 0.5 * (freq - expected[r]).abs().sum() < 0.08  # total variation distance
    full = nucleus_draw(logits, torch.logsumexp(logits, -1), 1.0, torch.Generator().manual_seed(2))
    assert full.shape == (3,) and bool((full < vocab).all())


def test_fast_linears_give_the_same_outputs_for_every_row_count_and_follow_weight_changes(
        tiny) -> None:
    from mimesis.models.engine.attention import PACKED_ROWS, fast_linears

    layer = torch.nn.Linear(32, 48)
    wrapper = torch.nn.Sequential(layer)
    for rows in (1, 2, 3, PACKED_ROWS[0], PACKED_ROWS[1] - 1, PACKED_ROWS[1], 100):
        x = torch.randn(rows, 3, 32)[:, -1:]  # strided, as logits_to_keep leaves it
        with torch.inference_mode():
            plain = layer(x)
            with fast_linears(wrapper):
                fast = layer(x)
        assert fast.shape == plain.shape == (rows, 1, 48)
        assert torch.allclose(fast, plain, atol=1e-5)
    assert "forward" not in layer.__dict__  # the module's own forward is back

    model, tok = tiny
    ids = torch.tensor([encode(tok, "fast linear layers, same maths")] * 5)
    with torch.inference_mode():
        plain = model(ids).logits
        with fast_linears(model):
            assert torch.allclose(model(ids).logits, plain, atol=1e-5)
    down = model.model.layers[0].mlp.down_proj
    saved = down.weight.detach().clone()
    try:
        with torch.no_grad():
            down.weight.data.mul_(2.0)  # through .data: the version counter does not move
        with torch.inference_mode():
            changed = model(ids[:1]).logits
            with fast_linears(model):
                assert torch.allclose(model(ids[:1]).logits, changed, atol=1e-5)
    finally:
        with torch.no_grad():
            down.weight.data.copy_(saved)
