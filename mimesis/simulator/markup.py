"""Disguised private-channel markup: look-alike and escaped tags, other model families' channels.

A model (or a template that strips special tokens) can write its reasoning tag in a form the
parser's patterns do not see: HTML-escaped (``&lt;think&gt;``), full-width (``＜think＞``), with a
Cyrillic letter (``thіnk``, U+0456), with a zero-width space inside, or as another family's
channel markup (gpt-oss "harmony": ``<|channel|>analysis<|message|>…<|end|>``, or the same
with its special tokens stripped: ``analysisThe user…assistantfinalhi``).

:func:`fold_markup` gives the text the parser should *look at*: Unicode NFKC (full-width and
compatibility forms to ASCII), :data:`CONFUSABLES` folded to ASCII, format characters (zero-width
spaces and joiners, category Cf) removed, and HTML / JSON escapes of markup undone. The parser
uses the folded text only when folding changes what would be sent (see
:func:`mimesis.simulator.parsing.parse_turn`), so a user's own ``…``, ``²`` or ``&amp;`` reach
the agent unchanged. :func:`rewrite_channels` turns harmony channels into ``<think>`` blocks.
"""

from __future__ import annotations

import html
import re
import unicodedata

# Letters that render like ASCII in tag names and markup brackets that NFKC leaves alone. A
# small table of our own (pyproject carries no confusables package): the Cyrillic and Greek
# homoglyphs of the Latin letters in channel names (think, thought, reasoning, analysis, plan,
# internal, scratchpad …), after Unicode's confusables.txt (UTS #39), plus angle-bracket
# look-alikes, including Kimi's ◁think▷ form.
CONFUSABLES: dict[str, str] = {
    # Cyrillic lower case
    "а": "a", "с": "c", "ԁ": "d", "е": "e", "һ": "h", "і": "i", "ј": "j", "к": "k", "м": "m",
    "п": "n", "о": "o", "р": "p", "ԛ": "q", "г": "r", "ѕ": "s", "т": "t", "у": "y", "х": "x",
    "ӏ": "l", "ԝ": "w",
    # Cyrillic upper case
    "А": "A", "В": "B", "С": "C", "Е": "E", "Н": "H", "І": "I", "Ј": "J", "К": "K", "М": "M",
    "О": "O", "Р": "P", "Ѕ": "S", "Т": "T", "Х": "X", "Ү": "Y",
    # Greek
    "α": "a", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p", "τ": "t", "υ": "u", "Α": "A",
    "Β": "B", "Ε": "E", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M", "Ν": "N", "Ο": "O", "Ρ": "P",
    "Τ": "T", "Χ": "X", "Υ": "Y", "Ζ": "Z",
    # Latin letters NFKC keeps: dotless i, small capitals
    "ı": "i", "ɪ": "i", "ʜ": "h", "ɴ": "n", "ᴛ": "t", "ᴋ": "k",
    # Angle brackets and slashes
    "‹": "<", "›": ">", "〈": "<", "〉": ">", "⟨": "<", "⟩": ">", "˂": "<", "˃": ">",
    "◁": "<", "▷": ">", "❮": "<", "❯": ">", "⁄": "/", "∕": "/", "⧸": "/",
}
_TABLE = str.maketrans(CONFUSABLES)
# JSON-escaped markup (a reasoning tag inside a string the model wrote as JSON).
_JSON_ESCAPE = re.compile(r"\\u003[cC]|\\u003[eE]|\\u007[cC]")
_JSON_CHARS = {"c": "<", "e": ">"}

# gpt-oss harmony: an analysis / commentary message is private until <|end|> or the next
# <|start|> / <|channel|>; the final channel is the message; the other tokens are framing.
_HARMONY_PRIVATE = re.compile(
    r"(?:<\|start\|>\s*assistant\s*)?(?:<\|channel\|>\s*)?(?:analysis|commentary)\b[^<\n]*?"
    r"<\|message\|>(?P<body>.*?)(?:<\|end\|>|(?=<\|start\|>)|(?=<\|channel\|>)|\Z)",
    re.DOTALL | re.IGNORECASE)
_HARMONY_FRAMING = re.compile(
    r"<\|start\|>\s*(?:assistant|user)?|<\|channel\|>\s*final\s*(?:<\|message\|>)?"
    r"|<\|(?:message|return|end|call|constrain)\|>", re.IGNORECASE)
# The same with the special tokens stripped by a decoder: "analysisWe need…assistantfinalhi".
_HARMONY_STRIPPED = re.compile(r"^\s*analysis(?=\S)(?P<body>.*?)assistant\s*final", re.DOTALL)


def fold_markup(text: str) -> str:
    """``text`` as the parser should read it: NFKC, confusables folded, format characters
    (category Cf: zero-width spaces, joiners, bidi marks) removed, HTML entities and JSON
    ``\\u003c`` escapes undone (twice, for double escaping).

    >>> fold_markup("&lt;thіnk&gt;＜/think＞")
    '<think></think>'
    """
    for _ in range(2):
        text = html.unescape(text)
    text = _JSON_ESCAPE.sub(lambda m: _JSON_CHARS.get(m.group(0)[-1].lower(), "|"), text)
    text = unicodedata.normalize("NFKC", text).translate(_TABLE)
    return "".join(c for c in text if unicodedata.category(c) != "Cf")


def rewrite_channels(text: str) -> str:
    """gpt-oss harmony channels as ``<think>`` blocks; the framing tokens removed.

    >>> rewrite_channels("<|channel|>analysis<|message|>stay vague<|end|>"
    ...                  "<|start|>assistant<|channel|>final<|message|>hi<|return|>")
    '<think>stay vague</think>hi'
    """
    stripped = _HARMONY_STRIPPED.match(text)
    if stripped:
        text = f"<think>{stripped.group('body')}</think>{text[stripped.end():]}"
    text = _HARMONY_PRIVATE.sub(lambda m: f"<think>{m.group('body')}</think>", text)
    return _HARMONY_FRAMING.sub("", text)
