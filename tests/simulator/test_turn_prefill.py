"""The trained simulator's turns open with the reasoning tag on every sampling path.

Why: with no prefill the CPU default's frozen simulator chose at its first token between
thinking and speaking, and often did both in turn (``<think>…</think>\\n<think>…``): on the
fact-reveal probes of the default run, 21 of 40 first draws held more than one think block and
21 had no utterance left after parsing (docs/pitfalls.md #15).
"""

from __future__ import annotations

import pytest

from mimesis.format import THINK_OPEN, TURN_PREFILL
from mimesis.models.base import load_base
from mimesis.models.engine.sampling import SamplingParams, TokenSampler
from mimesis.models.engine.tokens import encode, render


@pytest.fixture(scope="module")
def tiny():
    return load_base("tiny-llama")


CHAT = [{"role": "system", "content": "You are a user."},
        {"role": "user", "content": "What is your budget?"}]


def test_the_turn_prefill_is_the_reasoning_tag() -> None:
    assert TURN_PREFILL == THINK_OPEN


def test_chat_prefills_the_prompt_and_returns_the_prefill(tiny) -> None:
    model, tok = tiny
    sampler = TokenSampler(model, tok, SamplingParams(temperature=0.0, max_new_tokens=4,
                                                      prefill=TURN_PREFILL))
    plain = TokenSampler(model, tok, SamplingParams(temperature=0.0, max_new_tokens=4))
    [text] = sampler.chat([CHAT])
    assert text.startswith(TURN_PREFILL)
    # the model continued the prefilled prompt: greedy tokens equal a direct call on it
    prompt = encode(tok, render(tok, CHAT, add_generation_prompt=True) + TURN_PREFILL)
    [sample] = plain([prompt], [4])
    assert text == TURN_PREFILL + tok.decode(sample.ids, skip_special_tokens=True)


def test_the_frozen_simulator_sampler_prefills_its_turns(tmp_path, monkeypatch, tiny) -> None:
    from mimesis.users import frozen
    from mimesis.users.spec import UserSamplingParams

    model, tok = tiny
    monkeypatch.setattr(frozen, "load_frozen", lambda *a, **k: (model, tok, {}))
    user = frozen.load_frozen_user(tmp_path, dtype="float32", sampling=UserSamplingParams(),
                                   seed=0, max_turns=2)
    sampler = user.simulator.generate_fn.__self__
    assert sampler.params.prefill == TURN_PREFILL


def test_realism_samples_the_trained_row_with_the_prefill_and_the_baseline_without(
        monkeypatch, tiny) -> None:
    from types import SimpleNamespace

    import mimesis.eval.realism.generate as gen

    seen = {}

    def fake_runtime(generate_fn, prompt_style, *args, **kwargs):
        seen[prompt_style] = generate_fn.__self__.params.prefill
        return []

    monkeypatch.setattr(gen, "simulate_runtime", fake_runtime)
    model, tok = tiny
    params = SimpleNamespace(temperature=0.8, top_p=0.95, max_new_tokens=8, batch_size=2, seed=0,
                             max_prompt_tokens=64, max_user_chars=100, max_agent_chars=100)
    for style in ("user_simulator", "prompted_user"):
        gen.simulate_local(model, tok, style, [], params, "t")
    assert seen == {"user_simulator": TURN_PREFILL, "prompted_user": ""}


def test_served_prompts_end_with_the_prefill(tiny) -> None:
    from mimesis.serve.backends import build_vllm_prompts

    _, tok = tiny
    [prompt] = build_vllm_prompts(tok, [CHAT], 10_000)
    want = encode(tok, render(tok, CHAT, add_generation_prompt=True) + TURN_PREFILL)
    assert prompt["prompt_token_ids"] == want


def test_a_frozen_folder_declares_the_prefill_every_loader_uses(tmp_path, tiny) -> None:
    """``meta.json``'s ``turn_prefill`` reaches the served backend; a folder without the key is
    the recipe's (``<think>``), ``""`` is a simulator without a private channel."""
    from mimesis.io import write_json
    from mimesis.serve.backends import Sampling, load_backend
    from mimesis.simulator.frozen import hash_files, turn_prefill

    model, tok = tiny
    for declared, want in ((None, TURN_PREFILL), ("", ""), ("<think>", "<think>")):
        sim_dir = tmp_path / f"sim-{want or 'none'}-{declared is None}"
        model.save_pretrained(sim_dir)
        tok.save_pretrained(sim_dir)
        meta = {"stage": "test-fixture", "base_model": "tiny-llama", "finetune": "none",
                **({} if declared is None else {"turn_prefill": declared}),
                "files": hash_files(sim_dir)}
        write_json(sim_dir / "meta.json", meta)
        assert turn_prefill(meta) == want
        backend = load_backend("transformers", sim_dir, trust_folder=True)
        assert backend.prefill == want
        [text] = backend.generate([CHAT], Sampling(3, 0.0, 1.0))
        assert text.startswith(want)
    with pytest.raises(TypeError, match="turn_prefill must be a string"):
        turn_prefill({"turn_prefill": 1})
