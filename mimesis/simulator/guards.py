"""Run-time guards of the user simulator: pure checks on one utterance (docs/pitfalls.md #2, #4-#6).

* :func:`is_assistant_like` — the role-adherence rule (UserLM, arXiv 2510.06552, "role
  adherence"; our offline rule estimator): the simulated user talks like the assistant.
* :func:`goal_overlap` — UserLM's intent-decomposition measure: stop-word-filtered unigram
  overlap of the hidden goal and a user turn; a first turn that covers most of the goal is goal
  dumping.
* :func:`repeats_earlier` — a turn that (near-)verbatim repeats an earlier user turn is a
  restart of the same request.
* :func:`is_pleasantry` — a turn with no content but thanks / goodbyes, the material of the
  endless thank-you loop.
* :func:`strip_directive_copies` — sentences that copy the scenario's instructions to the
  simulator (``Scenario.directives``) verbatim are cut: how to play the user is not something
  the user says.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import lru_cache
from typing import Literal

# Phrases an assistant uses and a user talking to an assistant practically never does.
ASSISTANT_PATTERNS: dict[str, re.Pattern[str]] = {
    name: re.compile(rx, re.IGNORECASE | re.MULTILINE) for name, rx in {
        "certainly_opening": r"^\W*(?:certainly|of course|absolutely|great question)\s*[!,.]",
        "happy_to_help": r"\b(?:i'?d|i would|i'?m|i am)\s+(?:be\s+)?(?:happy|glad|delighted)\s+"
                         r"to\s+(?:help|assist)",
        "as_an_ai": r"\bas an ai\b|\bas a (?:large )?language model\b|\bi'?m an ai\b",
        "how_can_i_help": r"\bhow (?:can|may|might) i (?:help|assist)\b|\bwhat can i (?:help you"
                          r" with|do for you)\b",
        "anything_else": r"\bis there anything else (?:i can|you need|you'?d like)\b"
                         r"|\bif you have any (?:other |further |more )?questions\b",
        "here_are_options": r"\bhere are (?:some|a few|several|the following|your|a couple of)"
                            r" (?:options|suggestions|ideas|ways|steps|tips|choices"
                            r"|recommendations)\b",
        "hope_this_helps": r"\bi hope (?:this|that) helps\b|\bfeel free to (?:ask|reach out)\b",
        "i_can_help_you": r"\bi can (?:help|assist) you (?:with|to)\b",
    }.items()
}
_LIST_ITEM = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s+\S", re.MULTILINE)
# Offering choices *to the other party* (a user listing their own requirements does not).
_OFFER = re.compile(
    r"\b(?:would you like|do you prefer|which (?:one|option) (?:would|do) you (?:like|prefer|want)"
    r"|you (?:can|could) (?:choose|pick|select)|let me know which|here are)\b", re.IGNORECASE)

# Standard English function words, plus the framing words of goal descriptions ("the user wants
# help to ..."), which say nothing about what the goal is.
_STOP_WORDS = frozenset([
    "a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are",
    "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but",
    "by", "can", "could", "did", "do", "does", "doing", "down", "during", "each", "few", "for",
    "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers", "herself",
    "him", "himself", "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself", "just",
    "me", "more", "most", "my", "myself", "no", "nor", "not", "now", "of", "off", "on", "once",
    "only", "or", "other", "our", "ours", "ourselves", "out", "over", "own", "same", "she",
    "should", "so", "some", "such", "than", "that", "the", "their", "theirs", "them", "themselves",
    "then", "there", "these", "they", "this", "those", "through", "to", "too", "under", "until",
    "up", "very", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom",
    "why", "will", "with", "would", "you", "your", "yours", "yourself", "yourselves", "also",
    "get", "got", "want", "wants", "need", "needs", "like", "please", "im", "i'm", "i'd", "i'll",
    "i've", "it's", "don't", "can't", "let", "user", "users", "help",
])
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?")

_PLEASANTRY_CORE = frozenset([
    "thanks", "thank", "thx", "ty", "welcome", "bye", "goodbye", "cheers", "appreciate",
    "appreciated", "np",
])
_PLEASANTRY_FILLER = frozenset([
    "you", "you're", "youre", "your", "so", "much", "very", "a", "lot", "again", "ok", "okay",
    "great", "perfect", "awesome", "cool", "nice", "good", "have", "day", "night", "evening",
    "weekend", "no", "problem", "alright", "all", "right", "got", "it", "that's", "thats", "that",
    "this", "is", "helps", "helped", "helpful", "for", "the", "help", "too", "as", "well",
    "wonderful", "amazing", "lovely", "excellent", "sure", "will", "do", "kind", "really", "oh",
    "ah", "and", "just", "once", "more", "was", "my", "pleasure", "anytime", "take", "care", "see",
    "ya", "later",
])


@dataclass(frozen=True)
class GuardParams:
    """Settings of the run-time guards (one field per params key when a stage configures them).

    Attributes:
        goal_dump_threshold: Flag the first user turn as goal dumping when its
            :func:`goal_overlap` (share of the goal's content words) is at least this, in [0, 1].
        repeat_threshold: A turn whose normalised text has a difflib ratio ≥ this with an
            earlier user turn of the episode is a repeat (restart), in (0, 1].
        repeat_min_words: Turns shorter than this many words ("yes", "ok thanks") never count
            as restarts.
        pleasantries_limit: The N-th consecutive content-free user turn (thanks / bye only) ends
            the episode with reason ``pleasantries_loop`` instead of being sent; ≥ 1.
        resample_empty: Regenerate once when a turn has no utterance and no end signal.
        resample_role_flip: Regenerate once when a turn is assistant-like (flag kept either way).
        resample_goal_dump: Regenerate once when the first turn dumps the goal (flag kept).
        resample_open_end: Draw the opening again when it is only the end signal, as
            ``end_draws`` says: a user cannot leave a conversation they have not started (flag
            ``open_end``; measured: 4 of 32 openings of the CPU default's frozen simulator).
        end_draws: Draws of a turn that is only the end signal before the episode ends: each
            end is drawn again until this many draws all ended (flag ``end_confirm``; on the
            opening only with ``resample_open_end``, flag ``open_end``); 1 = the first end
            ends. A position where the simulator ends with probability p then ends with
            p^end_draws: confident ends survive, coin-flip ends mostly do not. Why: on
            held-out real conversations the CPU default's simulator ended with no better than
            chance aim (9 of the 41 next-turn positions where the real user went on, 4 of the
            17 where the real user stopped), and every such end costs an RL episode its
            remaining turns. Measured at 128 conversations: with 2 draws it still ended 15 of
            the 126 positions where the real user went on.
        resample_restart: Regenerate once when a turn repeats an earlier one (a restart); a
            second repeat ends the episode.
        resample_off_topic: Regenerate once when the user speaks first and its opening shares
            no content word with the goal (flag ``off_topic`` kept either way; a first reply to
            an agent's question is never off-topic): 60 of 128 openings of the CPU default's
            simulator did, against held-out real conversations' goals.
        resample_junk: Regenerate once when the utterance is degenerate (:func:`is_junk`:
            markup tags, a token repeated; flag ``junk`` kept either way): 5 of 128 openings of
            the CPU default's simulator were (``<village>…</village>`` wrappers, tag loops).
        directive_min_words: A sentence sharing a run of at least this many consecutive words
            with a scenario directive is cut from the utterance (:func:`strip_directive_copies`).
    """

    goal_dump_threshold: float = 0.7
    repeat_threshold: float = 0.9
    repeat_min_words: int = 4
    pleasantries_limit: int = 2
    resample_empty: bool = True
    resample_role_flip: bool = False
    resample_goal_dump: bool = False
    resample_open_end: bool = True
    end_draws: int = 3
    resample_restart: bool = True
    resample_off_topic: bool = True
    resample_junk: bool = True
    directive_min_words: int = 6

    def __post_init__(self) -> None:
        if not 0.0 <= self.goal_dump_threshold <= 1.0:
            raise ValueError(
                f"goal_dump_threshold must be in [0, 1], got {self.goal_dump_threshold}")
        if not 0.0 < self.repeat_threshold <= 1.0:
            raise ValueError(f"repeat_threshold must be in (0, 1], got {self.repeat_threshold}")
        if min(self.pleasantries_limit, self.repeat_min_words, self.directive_min_words,
               self.end_draws) < 1:
            raise ValueError(
                "pleasantries_limit, repeat_min_words, directive_min_words and end_draws "
                "must be ≥ 1")


def assistant_like_reasons(text: str) -> list[str]:
    """Names of the assistant-style rules ``text`` matches (empty list = stays the user).

    Rules: the phrases in :data:`ASSISTANT_PATTERNS`, and ``offers_options``: a list of at least
    two numbered/bulleted items together with an offer to the other party ("would you like",
    "here are", "let me know which").
    """
    reasons = [name for name, rx in ASSISTANT_PATTERNS.items() if rx.search(text)]
    if len(_LIST_ITEM.findall(text)) >= 2 and _OFFER.search(text):
        reasons.append("offers_options")
    return reasons


def is_assistant_like(text: str) -> bool:
    """True when ``text`` reads like the assistant, not the user (role-adherence rule).

    Source: UserLM (arXiv 2510.06552) role adherence; rule-based offline estimator.

    >>> is_assistant_like("Certainly! I'd be happy to help you book a flight.")
    True
    >>> is_assistant_like("can you book me a flight to denver")
    False
    """
    return bool(assistant_like_reasons(text))


def content_words(text: str) -> set[str]:
    """Lower-cased unigrams of ``text`` minus stop words (the UserLM overlap unit)."""
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP_WORDS}


def goal_overlap(goal: str, text: str,
                 denominator: Literal["goal", "message"] = "goal") -> float:
    """Stop-word-filtered unigram overlap of a goal (intent) I and a user turn U.

    ``denominator="goal"`` gives |I ∩ U| / |I|, the share of the goal the turn reveals (used for
    the goal-dump guard); ``"message"`` gives |I ∩ U| / |U|, the share of the turn taken from
    the goal. Source: UserLM (arXiv 2510.06552), intent decomposition.

    Returns:
        A value in [0, 1]; 0.0 when the denominator set is empty.

    >>> goal_overlap("book a flight to Denver on March 3", "flight to denver pls")
    0.4
    """
    intent, turn = content_words(goal), content_words(text)
    base = intent if denominator == "goal" else turn
    return len(intent & turn) / len(base) if base else 0.0


def normalize(text: str) -> str:
    """Lower-case words joined by single spaces (punctuation and spacing ignored)."""
    return " ".join(_WORD.findall(text.lower()))


def repeats_earlier(text: str, earlier: list[str], threshold: float = 0.9,
                    min_words: int = 4) -> bool:
    """True when ``text`` repeats one of ``earlier`` near-verbatim (normalised difflib ratio).

    Turns with fewer than ``min_words`` words are never repeats: "yes" twice is not a restart.
    """
    norm = normalize(text)
    if len(norm.split()) < min_words:
        return False
    return any(SequenceMatcher(None, norm, normalize(e)).ratio() >= threshold for e in earlier)


def is_pleasantry(text: str) -> bool:
    """True when ``text`` only thanks or says goodbye (at least one thanks/bye word, nothing else).

    >>> is_pleasantry("Thanks so much, have a great day!")
    True
    >>> is_pleasantry("thanks, and can you also cancel the hotel?")
    False
    """
    words = set(_WORD.findall(text.lower()))
    return bool(words & _PLEASANTRY_CORE) and words <= _PLEASANTRY_CORE | _PLEASANTRY_FILLER


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@lru_cache(maxsize=256)
def _word_runs(directives: tuple[str, ...], n: int) -> frozenset[tuple[str, ...]]:
    """Every run of ``n`` consecutive normalised words of ``directives`` (cached: an episode's
    scenario is the same on every turn)."""
    runs = set()
    for directive in directives:
        words = normalize(directive).split()
        runs.update(tuple(words[i:i + n]) for i in range(len(words) - n + 1))
    return frozenset(runs)


def strip_directive_copies(text: str, directives: list[str] | tuple[str, ...],
                           min_words: int = 6, public: str = "") -> tuple[str, bool]:
    r"""Cut the sentences of ``text`` that copy a directive (an instruction of the scenario to
    the simulator, never a fact the user states).

    A sentence (split at ``.!?`` + space and at line breaks) is cut when it shares a run of
    ``min_words`` consecutive words (:func:`normalize`: case and punctuation ignored) with one
    directive. Six words by default: the copies seen in runs were paraphrases keeping 7-9 words
    verbatim ("the option list: let the agent search and recommend"), while a user's own
    wording shares at most short generic runs with an instruction ("when the agent asks", "a
    yes/no question", 4-5 words). Cost: one set lookup per word of ``text``.

    A run that also occurs in ``public`` (what the agent has written so far) is not private: a
    user repeating the agent's "what pickup do you want for the rental car" shares six words
    with the directive "say this when the agent asks what you want for the rental car", and
    repeating the agent is not leaking.

    Returns:
        ``(kept_text, cut)``: ``text`` without the copying sentences (lines left empty by the
        cut are dropped), and whether anything was cut.

    >>> strip_directive_copies("area downtown.\n\ndon't show the option list: let the agent "
    ...     "search", ["You do not see the option list: let the agent search and recommend."])
    ('area downtown.', True)
    >>> strip_directive_copies("nonstop please", ["Answer its questions briefly."])
    ('nonstop please', False)
    >>> strip_directive_copies("What pickup do you want for the rental car?",
    ...     ["(say this when the agent asks what you want for the rental car)"],
    ...     public="What pickup do you want for the rental car?")
    ('What pickup do you want for the rental car?', False)
    """
    runs = _word_runs(tuple(directives), min_words) if directives else frozenset()
    if runs and public:
        runs = runs - _word_runs((public,), min_words)
    if not runs:
        return text, False
    lines, cut = [], False
    for line in text.split("\n"):
        kept = []
        for sentence in _SENTENCE_END.split(line):
            words = normalize(sentence).split()
            if any(tuple(words[i:i + min_words]) in runs
                   for i in range(len(words) - min_words + 1)):
                cut = True
            else:
                kept.append(sentence)
        if kept or not line.strip():
            lines.append(" ".join(kept) if kept else line)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip(), cut


# Markup a user never types to a chat UI: chat-template / reasoning tags and role headers.
_TAG = re.compile(r"<\|?/?[a-z_][\w\-]{0,30}\|?>|\[/?(?:INST|SYS)\]|^\s*(?:assistant|user|system)"
                  r"\s*:", re.IGNORECASE | re.MULTILINE)
_TOKEN = re.compile(r"\S+")


def is_junk(text: str, max_run: int = 4, min_distinct: float = 0.3) -> bool:
    """True when ``text`` is degenerate output: markup tags or role headers, one token repeated
    ``max_run`` times in a row, or (at 8+ tokens) under ``min_distinct`` distinct tokens.

    >>> is_junk("ok ok ok ok ok")
    True
    >>> is_junk("<think> plan </think> hi")
    True
    >>> is_junk("why does my loop never stop")
    False
    """
    if _TAG.search(text):
        return True
    tokens = [t.lower() for t in _TOKEN.findall(text)]
    run = 1
    for prev, cur in itertools.pairwise(tokens):
        run = run + 1 if cur == prev else 1
        if run >= max_run:
            return True
    return len(tokens) >= 8 and len(set(tokens)) / len(tokens) < min_distinct
