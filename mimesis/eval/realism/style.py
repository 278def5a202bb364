"""Style statistics of user turns and distances between two samples of turns.

Source: ours (docs/metrics.md, "Style distances"). Real users write short, casual, often lowercase
turns without markdown; assistant-like simulators write long, formatted, polite ones. Each rate
below is the share of turns showing the feature; the distance between two samples is the absolute
difference of the rates, and the Wasserstein-1 distance of log turn lengths.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np
from scipy.stats import wasserstein_distance

# Order of the binary features in ``style_matrix`` (after ``log_chars``).
STYLE_RATES: tuple[str, ...] = (
    "lowercase_start", "no_final_punct", "typo", "markdown", "assistant_phrase", "question",
)
STYLE_FEATURES: tuple[str, ...] = ("log_chars", *STYLE_RATES)

# Casual spellings that real users type and assistant-LLMs almost never do: a lowercase "I",
# contractions without apostrophes, chat abbreviations, doubled punctuation, a space before
# punctuation.
_TYPO = re.compile(
    r"(?:\bi\b(?!\.)|(?i:\b(?:dont|cant|wont|doesnt|isnt|didnt|im|ive|thats|whats|youre|"
    r"theyre|wasnt|arent|couldnt|shouldnt|wouldnt|u|ur|pls|plz|thx|thnx|idk|bc|gonna|wanna)\b)|"
    r"[?!]{2,}|\s[,.?!](?:\s|$)|\S {2,}\S)"
)
_MARKDOWN = re.compile(
    r"(?m)(?:^\s*(?:[-*+]|\d{1,2}[.)])\s+\S|^#{1,6}\s+\S|^```|\*\*[^*\n]+\*\*|^\|.+\|\s*$)"
)
_ASSISTANT_PHRASES = re.compile(
    r"\b(?:certainly|i'?d be (?:happy|glad) to|i would be (?:happy|glad) to|happy to help|"
    r"as an ai|i hope this helps|let me know if you|feel free to|great question|"
    r"i'?m here to help|how can i (?:help|assist)|here'?s (?:a|an|the|some) (?:list|summary|"
    r"example|breakdown|revised|updated)|sure[!,] here)",
    re.IGNORECASE,
)


def turn_style(text: str) -> dict[str, float]:
    """Style features of one turn.

    Args:
        text: The turn's text.

    Returns:
        ``log_chars`` (natural log of 1 + characters) and one 0/1 value per name in
        ``STYLE_RATES``: first letter lowercase; last non-space character not ``.!?``; a casual
        spelling (lowercase "i", "dont", "u", "??", …); markdown (list items, headings, fences,
        bold, tables); an assistant phrase ("Certainly", "I'd be happy to", …); a question mark.

    Source: ours (docs/metrics.md, style distances).

    >>> turn_style("ok but why dont u use pandas")["typo"]
    1.0
    """
    stripped = text.strip()
    first_letter = next((c for c in stripped if c.isalpha()), "")
    return {
        "log_chars": math.log1p(len(stripped)),
        "lowercase_start": float(first_letter.islower()),
        "no_final_punct": float(bool(stripped) and stripped[-1] not in ".!?"),
        "typo": float(bool(_TYPO.search(stripped))),
        "markdown": float(bool(_MARKDOWN.search(stripped))),
        "assistant_phrase": float(bool(_ASSISTANT_PHRASES.search(stripped))),
        "question": float("?" in stripped),
    }


def style_matrix(texts: Sequence[str]) -> np.ndarray:
    """Style features of many turns, shape ``(len(texts), len(STYLE_FEATURES))``, float64,
    columns in ``STYLE_FEATURES`` order."""
    rows = [[turn_style(t)[name] for name in STYLE_FEATURES] for t in texts]
    return np.asarray(rows, dtype=np.float64).reshape(len(rows), len(STYLE_FEATURES))


def style_rates(texts: Sequence[str]) -> dict[str, float]:
    """Mean of every style feature over ``texts`` (rates in [0, 1]; ``log_chars`` in nats).

    Raises:
        ValueError: ``texts`` is empty.
    """
    if not texts:
        raise ValueError("style_rates needs at least one turn")
    means = style_matrix(texts).mean(axis=0)
    return {name: float(v) for name, v in zip(STYLE_FEATURES, means, strict=True)}


def style_distances(a_texts: Sequence[str], b_texts: Sequence[str]) -> dict[str, float]:
    """Distances between the style distributions of two samples of turns.

    Args:
        a_texts: Turns of one sample (e.g. simulated).
        b_texts: Turns of the other sample (e.g. real).

    Returns:
        ``length_w1``: Wasserstein-1 distance between the two distributions of log(1 + chars)
        (nats; 0.69 ≈ one sample twice as long); for every name in ``STYLE_RATES`` the absolute
        difference of the two rates (0..1). Lower is more alike.

    Raises:
        ValueError: either sample is empty.

    Source: ours (docs/metrics.md, style distances).
    """
    if not a_texts or not b_texts:
        raise ValueError("style_distances needs two non-empty samples")
    a, b = style_matrix(a_texts), style_matrix(b_texts)
    out = {"length_w1": float(wasserstein_distance(a[:, 0], b[:, 0]))}
    for j, name in enumerate(STYLE_RATES, start=1):
        out[name] = float(abs(a[:, j].mean() - b[:, j].mean()))
    return out
