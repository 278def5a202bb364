"""TokenSampler on the tiny random Llama: log-probs, limits, EOS, KV reuse across turns."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from mimesis.models.base import load_base
from mimesis.rl.sampling import SamplingParams, TokenSampler


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
    from mimesis.rl.attention import NAME, gqa_attention

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
    from mimesis.rl.kv import GrowingLayer, growing_cache

    parts = [torch.randn(3, 2, n, 4) for n in (3, 1, 4)]
    layer = GrowingLayer(capacity=2, past=(parts[0], -parts[0]))  # grows past its capacity
    for part in parts[1:]:
        keys, values = layer.update(part, -part)
    assert torch.equal(keys, torch.cat(parts, dim=2)) and torch.equal(values, -keys)
    assert layer.get_seq_length() == 8 and layer.capacity >= 8
    layer.batch_select_indices(torch.tensor([2, 0]))
    assert torch.equal(layer.keys, torch.cat(parts, dim=2)[[2, 0]])
    with pytest.raises(ValueError):
        growing_cache(2, 4, past=[(parts[0], parts[0])])
