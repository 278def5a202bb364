"""Parsing and checking annotator output: behaviour ids, first-person reasoning, second-person goals.

Small local models (SmolLM2-135M) echo the prompt, answer as the assistant, repeat themselves and
stop mid-sentence; API models add quotes and labels. These functions keep what is usable and
return ``""`` for what is not, so the caller can fall back (and record that it did).
Source: ours.
"""

from __future__ import annotations

import re

from mimesis.behaviors.catalog import BEHAVIOR_IDS
from mimesis.behaviors.lexicon import content_stems, sentences, words

MIN_WORDS = 3
MAX_WORD_CHARS = 24
_STUTTER = re.compile(r"([a-z]{2,}?)\1{2,}")  # a letter chunk three times in a row
_IDS = re.compile(r"\bB(1[0-3]|[1-9])\b")
_SPECIAL = re.compile(r"<\|[^|>]*\|>|</?think>|</?s>")
_ROLE_PREFIX = re.compile(
    r"^\s*(?:assistant|user|human|ai|system|thought|thinking|reasoning|answer|output|response|"
    r"private thought|goal|a|q)\s*:\s*",
    re.IGNORECASE,
)
_MARKDOWN = re.compile(r"[*_#`>]+|^\s*(?:[-•]|\d+[.)])\s+", re.MULTILINE)
_QUOTES = "\"'“”‘’"
# Sentences that echo the instruction or speak as the assistant are not the user's thought.
_LEAK = re.compile(
    r"private thought|\bsender\b|starts? with|short sentence|first person|second person|"
    r"rewrite (?:it|this)|addressed to|as an ai|language model|i'?m (?:sorry|glad|here to help|"
    r"happy to help)|how (?:can|may) i (?:help|assist)|smollm|i am an ai|i'?m an ai|"
    r"as a (?:chatbot|text-based|helpful)|\bassistant named\b",
    re.IGNORECASE,
)
_FIRST_PERSON = re.compile(r"^(?:I|I'm|I've|I'd|I'll|My|Me)\b")
_SECOND_PERSON = re.compile(r"^You(?:'re|'d|'ve)?\b")


def parse_behavior_ids(text: str) -> list[str]:
    """Valid behaviour ids named in ``text`` (``B1``..``B13``), catalogue order, no duplicates.

    >>> parse_behavior_ids("B9, B2 and B14; also b3? NONE")
    ['B2', 'B9']
    """
    found = {f"B{m}" for m in _IDS.findall(text)}
    return [bid for bid in BEHAVIOR_IDS if bid in found]


def _scrub(text: str) -> str:
    """Drop special tokens, role labels, markdown and wrapping quotes; keep the first paragraph."""
    text = _SPECIAL.sub(" ", text)
    text = text.strip().split("\n\n")[0]
    lines = [_ROLE_PREFIX.sub("", line) for line in text.splitlines()]
    text = _MARKDOWN.sub("", " ".join(lines))
    text = re.sub(r"\s+", " ", text).strip().strip(_QUOTES).strip()
    return _ROLE_PREFIX.sub("", text).strip(_QUOTES).strip()


def _loops(sentence: str, n: int = 3) -> bool:
    """True when a word ``n``-gram with a content word occurs twice in ``sentence`` (small
    models loop: "to love her, not to love her"; a repeated "I want to" is fine)."""
    tokens = words(sentence)
    if any(len(w) > MAX_WORD_CHARS or _STUTTER.search(w) for w in tokens):
        return True  # "Iodododododod": a token loop inside a word
    grams = [" ".join(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]
    return any(grams.count(g) > 1 and content_stems(g) for g in set(grams))


def _keep_sentences(text: str, max_sentences: int) -> list[str]:
    """Complete, non-leaking, non-repeated sentences, at most ``max_sentences``. A trailing
    fragment (generation cut at the token limit) is kept only when it is all there is."""
    kept: list[str] = []
    parts = sentences(text)
    for i, sent in enumerate(parts):
        complete = sent[-1] in ".!?"
        if _LEAK.search(sent) or sent.lower() in (k.lower() for k in kept):
            continue
        if sum(w.isalpha() for w in words(sent)) < 2 or _loops(sent):
            continue  # list numbers, stray tokens, or a degenerate repetition loop
        if not complete and (kept or i < len(parts) - 1):
            continue
        kept.append(sent if complete else sent.rstrip(",;: ") + ".")
        if len(kept) == max_sentences:
            break
    return kept


def clean_first_person(text: str, max_sentences: int = 2) -> str:
    """A first-person thought of one or two sentences from raw annotator output, or ``""``.

    >>> clean_first_person('Assistant: "I want a shorter list. I want a shorter list. Here is')
    'I want a shorter list.'
    >>> clean_first_person("The user wants a list.")
    ''
    """
    kept = _keep_sentences(_scrub(text), max_sentences)
    result = " ".join(kept)
    if not _FIRST_PERSON.match(result) or len(words(result)) < MIN_WORDS:
        return ""
    return result


def clean_goal(text: str, max_sentences: int = 2) -> str:
    """A second-person goal ("You want …") of one or two sentences from raw output, or ``""``.

    >>> clean_goal("Goal: You want help with a loan calculation. 1. \\"calculate")
    'You want help with a loan calculation.'
    """
    kept = _keep_sentences(_scrub(text), max_sentences)
    result = " ".join(kept)
    if not _SECOND_PERSON.match(result) or not content_stems(result) - {"want", "help"}:
        return ""
    if len(words(result)) < MIN_WORDS + 1 or any(q in result for q in "\"“”"):
        return ""
    if {"i", "me", "my", "mine", "myself"} & set(words(result)):  # person mix-up: "help me"
        return ""
    return result


def longest_common_run(a: str, b: str) -> int:
    """Length in words of the longest run of consecutive words shared by ``a`` and ``b``
    (lowercased word tokens; dynamic programming, O(len(a)·len(b)))."""
    wa, wb = words(a), words(b)
    best = 0
    prev = [0] * (len(wb) + 1)
    for x in wa:
        cur = [0] * (len(wb) + 1)
        for j, y in enumerate(wb, start=1):
            if x == y:
                cur[j] = prev[j - 1] + 1
                best = max(best, cur[j])
        prev = cur
    return best


def jaccard(a: str, b: str) -> float:
    """Jaccard similarity of the content-word stems of ``a`` and ``b`` (0 when both are empty)."""
    sa, sb = content_stems(a), content_stems(b)
    return len(sa & sb) / len(sa | sb) if sa | sb else 0.0


def copies(text: str, source: str, max_run: int, max_jaccard: float) -> bool:
    """True when ``text`` copies ``source``: it repeats ``min(max_run, len(source))`` consecutive
    words of it (so a short source contained verbatim counts), or their content-word Jaccard is
    ``max_jaccard`` or more.

    >>> copies("You want to say hi.", "hi", max_run=6, max_jaccard=0.5)
    True
    >>> copies("You want a loan interest figure.", "calculate the interest paid on my loan",
    ...        max_run=6, max_jaccard=0.5)
    False
    """
    n_source = len(words(source))
    if n_source == 0:
        return False
    if longest_common_run(text, source) >= min(max_run, n_source):
        return True
    return jaccard(text, source) >= max_jaccard


def relevant(text: str, *sources: str) -> bool:
    """True when ``text`` shares a content word with one of ``sources``, or when the sources have
    no content words at all ("continue", "thanks"), so relevance cannot be judged."""
    pool = set().union(*(content_stems(s) for s in sources)) if sources else set()
    return not pool or bool(content_stems(text) & pool)
