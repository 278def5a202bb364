"""Rule-based detectors of the plain style traits of a user turn (not among the 13 behaviours).

Each detector looks at the turn alone. Source: ours, written from the trait descriptions in
``mimesis.behaviors.catalog.TRAITS`` and ``docs/behaviors.md`` ("terse turns, typos and no
capitals, pasted documents or code, thanks-and-leave").
"""

from __future__ import annotations

import re

from mimesis.behaviors.lexicon import REQUEST_VERB, words

TERSE_MAX_WORDS = 4
TERSE_MAX_CHARS = 40
PASTE_MIN_CHARS = 1000  # a single block this long is almost never typed into a chat box
PASTE_DOC_CHARS = 500  # ... or this long when it spans several lines
THANKS_MAX_WORDS = 15
OWN_VOICE_SHARE = 0.08  # a long text this dense in "I/you/please/can..." was typed, not pasted
_OWN_VOICE_TEXT = "i my me you your please i'm i'd we our us can could want need"
_OWN_VOICE = frozenset(_OWN_VOICE_TEXT.split())

# Casual spellings real users type: lowercase "i", contractions without an apostrophe, chat
# abbreviations, doubled punctuation, tripled letters ("sooo"), frequent misspellings.
_CASUAL = re.compile(
    r"(?:(?<![\w.])i(?![\w.'’-])|(?i:\b(?:dont|cant|wont|doesnt|isnt|didnt|im|ive|thats|whats|"
    r"youre|theyre|wasnt|arent|couldnt|shouldnt|wouldnt|u|ur|pls|plz|thx|thnx|idk|bc|gonna|"
    r"wanna|teh|hte|adn|waht|wnat|recieve|definately|seperate|wich|thier|becuase|alot|untill|"
    r"occured|tommorow|goverment|wierd|pleae|plese|jsut|becasue|taht|knwo)\b)|[?!]{2,}|"
    r"(?i:\b[a-z]*([a-z])\1\1[a-z]*\b))"
)
CODE_LINE = re.compile(
    r"(?m)^\s*(?:def |class |import |from \S+ import|function |const |let |var |public |private |"
    r"return\b|#include|SELECT |INSERT |<\w+[ >]|\}|\{|//|/\*)|[;{]\s*$|=>"
)
_QUOTED_PASSAGE = re.compile(r"[\"“][^\"”]{250,}")  # a long quoted passage to work on
_SHELL_TOKEN = re.compile(r"(?:\s--[a-z][\w-]+|&&|\$\(|\s-[a-z]{1,2}\s)")  # a command line
_TABLE_LINE = re.compile(r"(?m)^\s*\|.*\|\s*$")
_INTRO_COLON = re.compile(r"(?i)\b(?:following|this|below|these|text|code|article|essay|story|"
                          r"email|script|data|rewrite|summari[sz]e|improve)\b[^.?!\n]{0,40}:\s*\S")
_THANKS = re.compile(
    r"(?i)\b(?:thanks?|thank you|thx|thnx|ty|tysm|cheers|appreciate (?:it|that|you|this)|much "
    r"appreciated|that'?s all|that is all|that'?s it|bye|goodbye|all set|that will do|i'?m good)\b"
)
_NEW_REQUEST = re.compile(r"(?i)\?|\b(?:can|could|would|will) you\b|\bhow (?:do|can|to)\b|"
                          r"\b(?:now|next|also|but)\b")


def _own_voice(text: str) -> float:
    """Share of the words of ``text`` that address the agent ("I", "you", "please", "can"...)."""
    tokens = words(text)
    return sum(w in _OWN_VOICE for w in tokens) / len(tokens) if tokens else 0.0


def is_pasted(text: str) -> bool:
    """True when the turn carries pasted material: a code fence, three code-like lines, a table, a
    long quoted passage, a command line, a long multi-line document or a very long block (unless
    it reads as the user's own request), or a long text introduced by "following:" etc."""
    if "```" in text:
        return True
    if len(CODE_LINE.findall(text)) >= 3 or len(_TABLE_LINE.findall(text)) >= 2:
        return True
    if _QUOTED_PASSAGE.search(text) or len(_SHELL_TOKEN.findall(text[:600])) >= 3:
        return True
    long_doc = len(text) >= PASTE_MIN_CHARS or (len(text) >= PASTE_DOC_CHARS
                                                 and text.count("\n") >= 3)
    if long_doc and _own_voice(text) < OWN_VOICE_SHARE:
        return True
    match = _INTRO_COLON.search(text)
    return bool(match) and len(text) - match.end() >= 300


def is_terse(text: str) -> bool:
    """True for a very short turn ("continue", "more please", "again?")."""
    return len(text.strip()) <= TERSE_MAX_CHARS and len(words(text)) <= TERSE_MAX_WORDS


def is_typo_rich(text: str) -> bool:
    """True for casual typing: a casual spelling or misspelling, or a message of five or more words
    without a single capital letter and without final punctuation (pasted material excluded)."""
    if is_pasted(text):
        return False
    own = text.strip()
    if _CASUAL.search(own):
        return True
    no_capitals = not any(c.isupper() for c in own)
    return no_capitals and len(words(own)) >= 5 and own[-1:] not in ".!?"


def is_thanks_and_leave(text: str) -> bool:
    """True for a short closing turn that thanks or signs off and asks for nothing new."""
    if len(words(text)) > THANKS_MAX_WORDS or not _THANKS.search(text):
        return False
    return not _NEW_REQUEST.search(text) and not REQUEST_VERB.search(text)


def detect_traits(text: str) -> list[str]:
    """Style traits of one user turn, in ``catalog.TRAIT_IDS`` order.

    >>> detect_traits("Thanks!")
    ['terse', 'thanks_and_leave']
    """
    found = []
    if is_terse(text) and not is_pasted(text):
        found.append("terse")
    if is_typo_rich(text):
        found.append("typo_rich")
    if is_pasted(text):
        found.append("pasted_content")
    if is_thanks_and_leave(text):
        found.append("thanks_and_leave")
    return found
