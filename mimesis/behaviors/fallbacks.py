"""Rule-based fallbacks for when the annotator's output is unusable (producer ``rules:fallback``).

* :func:`abstract_goal` — the documented goal abstraction: the kind of request (code, writing,
  plan, explanation, other) read from the first substantive user turn, plus up to three topic
  keywords (the most frequent content words over all user turns, ordered by frequency, not by
  position, so no phrase of the first message is reproduced). Candidates with fewer keywords,
  then generic ones, are tried until one passes the copy check against the first user message.
* :func:`fallback_reasoning` / :func:`fallback_end_reasoning` — first-person templates chosen by
  the turn's rule labels.

Source: ours.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence

from mimesis.behaviors.lexicon import content_words, own_words

FALLBACK = "rules:fallback"

_KINDS: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("code", re.compile(r"```|\b(?:code|function|script|python|javascript|typescript|java|sql|"
                        r"bug|error|api|regex|css|html|react|compile|program)\b", re.IGNORECASE),
     "You want working code for a task involving {topics}."),
    ("writing", re.compile(r"\b(?:write|rewrite|draft|essay|post|email|letter|story|poem|"
                           r"article|blog|caption|summar\w*|paraphrase|rephrase|tagline)\b", re.IGNORECASE),
     "You want a piece of writing about {topics}."),
    ("plan", re.compile(r"\b(?:plan|list|ideas|schedule|outline|steps|strategy|itinerary|"
                        r"names)\b", re.IGNORECASE),
     "You want a plan or a set of ideas around {topics}."),
    ("explain", re.compile(r"^\W*(?:what|why|how|who|when|where|which|is|are|does|do)\b|"
                           r"\bexplain\b", re.IGNORECASE),
     "You want to understand {topics}."),
)
_OTHER = "You want help with a task involving {topics}."
_GENERIC = (
    "You want an AI assistant's help with a request of your own.",
    "You want assistance from an AI model.",
)
# Words that name the kind of request rather than its topic.
_NOT_TOPIC_TEXT = (
    "write rewrite create code function script essay post email letter story article blog "
    "list ideas plan explain give provide generate example examples please following text "
    "continue using based would could should like want need help make also into answer"
)
_NOT_TOPIC = frozenset(_NOT_TOPIC_TEXT.split())


def keywords(texts: Sequence[str], k: int = 3) -> list[str]:
    """The ``k`` most frequent topic words (3+ letters; no stopwords, request words or "-ly"
    adverbs) over ``texts``, most frequent first; ties keep first occurrence."""
    counts: Counter[str] = Counter()
    for text in texts:
        counts.update(w for w in content_words(own_words(text))
                      if w.isalpha() and w not in _NOT_TOPIC and not w.endswith("ly"))
    return [w for w, _ in counts.most_common(k)]


def _join(topics: Sequence[str]) -> str:
    return topics[0] if len(topics) == 1 else ", ".join(topics[:-1]) + " and " + topics[-1]


def request_kind(text: str) -> str:
    """``code``, ``writing``, ``plan``, ``explain`` or ``other`` for a user request."""
    return next((name for name, rx, _ in _KINDS if rx.search(own_words(text))), "other")


def abstract_goal(user_turns: Sequence[str], is_copy: Callable[[str], bool]) -> str:
    """Second-person goal abstracted from the user turns, or ``""`` when every candidate copies.

    Args:
        user_turns: The conversation's user turns in order (the first one is the opening).
        is_copy: The copy check against the first user message (True = reject the candidate).

    >>> abstract_goal(["how do i sort a dict by value in python", "and descending?"],
    ...               lambda g: False)
    'You want working code for a task involving sort, dict and value.'
    """
    opening = next((t for t in user_turns if len(content_words(t)) >= 2), user_turns[0])
    template = next((tpl for name, _, tpl in _KINDS if name == request_kind(opening)), _OTHER)
    topics = keywords(user_turns)
    candidates = [template.format(topics=_join(topics[:n])) for n in (3, 2, 1) if len(topics) >= n]
    for goal in [*candidates, *_GENERIC]:
        if not is_copy(goal):
            return goal
    return ""


_REASONING_BY_LABEL: tuple[tuple[str, str], ...] = (
    ("thanks_and_leave", "I got what I needed, so I just want to thank the assistant."),
    ("B13", "I am fed up with the assistant and want it to simply do what I ask."),
    ("B9", "I am annoyed because the last answer still is not what I asked for."),
    ("B10", "I am giving up on this thread because it is not getting anywhere."),
    ("B3", "I do not feel like answering its question; I just want it to get on with it."),
    ("B4", "I still want what I asked for, even though the assistant said it cannot do it."),
    ("B6", "I want to move on to something else now."),
    ("B11", "I have changed my mind about what I want."),
    ("B7", "I want the answer to work within my restrictions."),
    ("B2", "I want the answer adjusted to a requirement I had not mentioned yet."),
    ("B12", "I want several things done at once, so I put them all in one message."),
    ("pasted_content", "I want the assistant to work with the material I am pasting in."),
)


def fallback_reasoning(utterance: str, labels: Sequence[str], first: bool) -> str:
    """First-person thought for a user turn from its rule labels (behaviour ids and traits).

    >>> fallback_reasoning("continue", ["terse"], first=False)
    'I want the assistant to keep going with its answer.'
    """
    for label, text in _REASONING_BY_LABEL:
        if label in labels:
            return text
    topics = keywords([utterance], k=2)
    if first:
        return f"I want help with {_join(topics)}." if topics else "I want help with something."
    if "terse" in labels or not topics:
        return "I want the assistant to keep going with its answer."
    return f"I want to follow up on the last answer about {_join(topics)}."


def fallback_end_reasoning(last_labels: Sequence[str]) -> str:
    """First-person reason for leaving after the last agent reply, from the last turn's labels."""
    if "thanks_and_leave" in last_labels:
        return "I got what I needed, so I thanked the assistant and left."
    if {"B9", "B10", "B13"} & set(last_labels):
        return "I was not getting what I wanted, so I gave up on the chat."
    return "I had enough from the last answer, so I stopped there."
