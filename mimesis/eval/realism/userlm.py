"""User-simulator metrics of UserLM (Naous et al., "Flipping the Dialogue: Training and Evaluating
User Language Models", arXiv 2510.06552): first-turn diversity, intent decomposition, termination
F1 and role adherence, computed offline as defined in docs/metrics.md.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS
from sklearn.metrics import precision_recall_fscore_support

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def unigrams(text: str, drop_stop_words: bool = False) -> frozenset[str]:
    """Set of lowercase word unigrams of ``text`` (letters/digits, inner apostrophes kept),
    optionally without scikit-learn's English stop words."""
    words = _WORD.findall(text.lower())
    if drop_stop_words:
        words = [w for w in words if w not in ENGLISH_STOP_WORDS]
    return frozenset(words)


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """|a ∩ b| / |a ∪ b|; two empty sets count as identical (1.0)."""
    union = a | b
    return len(a & b) / len(union) if union else 1.0


def first_turn_diversity(first_turns: Sequence[str]) -> float:
    """1 − mean pairwise unigram Jaccard similarity of first user turns across conversations.

    Args:
        first_turns: One opening user turn per conversation (at least 2).

    Returns:
        Diversity in [0, 1]; higher means openings share fewer words.

    Raises:
        ValueError: fewer than 2 turns.

    Source: UserLM (arXiv 2510.06552), first-turn diversity.

    >>> round(first_turn_diversity(["a b", "a c", "d"]), 4)  # 1 - (1/3 + 0 + 0) / 3
    0.8889
    """
    if len(first_turns) < 2:
        raise ValueError("first_turn_diversity needs at least 2 first turns")
    sets = [unigrams(t) for t in first_turns]
    sims = [jaccard(a, b) for a, b in itertools.combinations(sets, 2)]
    return 1.0 - sum(sims) / len(sims)


def intent_decomposition(intent: str, turn: str) -> float:
    """|I ∩ U| / |U| over stop-word-filtered unigrams of the intent I and the user turn U.

    How much of the turn is the goal restated — a user who dumps the whole goal at once scores
    near 1; a human who reveals it bit by bit scores low. A turn with no content words
    (e.g. "hi") reveals nothing and scores 0.

    Args:
        intent: The scenario goal given to the simulator (or the goal of the real conversation).
        turn: The user turn (usually the first).

    Returns:
        Share in [0, 1]; lower is more human.

    Source: UserLM (arXiv 2510.06552), intent decomposition, as defined in docs/metrics.md.

    >>> intent_decomposition("book a cheap flight to Paris", "need a flight to paris asap")
    0.5
    """
    goal, words = unigrams(intent, True), unigrams(turn, True)
    return len(goal & words) / len(words) if words else 0.0


def mean_intent_decomposition(intents: Sequence[str], turns: Sequence[str]) -> float:
    """Mean of ``intent_decomposition`` over paired (intent, turn).

    Raises:
        ValueError: lengths differ or no pairs.
    """
    if len(intents) != len(turns) or not turns:
        raise ValueError("mean_intent_decomposition needs equally many (>0) intents and turns")
    return sum(intent_decomposition(i, t) for i, t in zip(intents, turns, strict=True)) / len(turns)


def termination_f1(predicted_end: Sequence[bool], real_end: Sequence[bool]) -> dict[str, float]:
    """F1 of the simulator's end-of-conversation decisions against where real users ended.

    Each position is one point where the user could answer an agent reply; the positive class is
    "the user ends here".

    Args:
        predicted_end: Simulator ended at the position.
        real_end: The real user ended at the position.

    Returns:
        ``precision``, ``recall`` (the true-end rate), ``f1`` (0 when undefined),
        ``false_end_rate`` (share of the positions where the real user went on at which the
        simulator ended; 0 when there are none), ``positives`` (real ends), ``predicted``
        (simulator ends), ``n`` (positions).

    Raises:
        ValueError: lengths differ or no positions.

    Source: UserLM (arXiv 2510.06552), dialogue termination.
    """
    if len(predicted_end) != len(real_end) or not real_end:
        raise ValueError("termination_f1 needs equally many (>0) predictions and targets")
    pred, real = [bool(x) for x in predicted_end], [bool(x) for x in real_end]
    precision, recall, f1, _ = precision_recall_fscore_support(
        real, pred, average="binary", pos_label=True, labels=[False, True], zero_division=0.0)
    went_on = [p for p, r in zip(pred, real, strict=True) if not r]
    return {"precision": float(precision), "recall": float(recall), "f1": float(f1),
            "false_end_rate": sum(went_on) / len(went_on) if went_on else 0.0,
            "positives": float(sum(real)), "predicted": float(sum(pred)), "n": float(len(real))}


def role_adherence(utterances: Sequence[str], is_assistant_like: Callable[[str], bool]) -> float:
    """Share of turns in which the simulator stays the user.

    Args:
        utterances: Simulated user utterances (private reasoning already removed).
        is_assistant_like: The role rule, e.g. ``mimesis.simulator.guards.is_assistant_like``.

    Returns:
        Share in [0, 1] of utterances the rule does not flag; higher is better.

    Raises:
        ValueError: no utterances.

    Source: UserLM (arXiv 2510.06552), role adherence (rule-based estimator).
    """
    if not utterances:
        raise ValueError("role_adherence needs at least one utterance")
    return sum(not is_assistant_like(u) for u in utterances) / len(utterances)
