"""The shapes private reasoning takes in a raw generation, and the last check before sending.

:func:`canonical_tags` rewrites every reasoning-tag dialect to ``<think>``/``</think>`` so the
parser handles one form: XML-like tags with any reasoning name (``<thought>``, ``<scratchpad>``,
``<analysis>``, ``<plan>``, ``<reflection>``, ``<inner_monologue>`` …, with attributes and
spaces), square-bracket tags (``[THINK]…[/THINK]``) and pipe tokens
(``<|begin_of_thought|>…<|end_of_thought|>``). :func:`split_json` reads a generation that is a
JSON object with a reasoning key. :func:`private_signals` is the contract's last line: an
utterance with any sign of reasoning left in it (a tag, a reasoning header or heading at a line
start, a final-message marker, an end token, talk about the role-play) is never sent.
"""

from __future__ import annotations

import json
import re

from mimesis.simulator.markup import fold_markup, rewrite_channels

# Names a model gives its private channel, in tags and headers alike.
TAG_NAMES = (r"think|thinking|thoughts?|reasoning|reason|rationale|scratch_?pad|scratch"
             r"|analysis|analyze|plan|planning|reflection|reflect|inner_?monologue|monologue"
             r"|internal(?:_thoughts?)?|private|hidden|secret|cot|chain_of_thought"
             r"|inner_thoughts?|internal_notes|notes_to_self")
# Pipe tokens: <|begin_of_thought|> (OpenThoughts), <|START_THINKING|> (Command R), <|think|>.
_OPEN = re.compile(rf"<\s*(?:{TAG_NAMES})(?:\s+[^<>]*)?>|\[\s*(?:{TAG_NAMES})\s*\]"
                   rf"|<\|\s*(?:(?:begin|start)_(?:of_)?)?(?:{TAG_NAMES})\s*\|>", re.IGNORECASE)
_CLOSE = re.compile(rf"<\s*/\s*(?:{TAG_NAMES})\s*>|\[\s*/\s*(?:{TAG_NAMES})\s*\]"
                    rf"|<\|\s*(?:end_(?:of_)?|/\s*)(?:{TAG_NAMES})\s*\|>", re.IGNORECASE)

# Header words: the tag names in prose form, plus phrases that only label reasoning.
LABEL = (r"thinking(?:\s+process)?|thought\s+process|thoughts?|reasoning(?:\s+process)?"
         r"|rationale|scratch\s*pad|analysis|plan(?:ning)?|strategy|reflection"
         r"|chain\s+of\s+thought|self[- ]talk|brainstorm(?:ing)?"
         r"|(?:my|internal|private|inner|hidden)\s+(?:thoughts?|reasoning|monologue|notes?"
         r"|plan|analysis|goal|state)")
_DECOR = r"(?:\*\*|__|#{1,6}[ \t]*)?"
_UNDECOR = r"(?:\*\*|__)?"
# "Reasoning:", "**Plan:**", "### Analysis:" with text after it on the line.
HEADER = re.compile(rf"^[ \t]*{_DECOR}[ \t]*(?:{LABEL})[ \t]*{_UNDECOR}[ \t]*:", re.IGNORECASE)
# "### Reasoning", "**Reasoning**", "Plan" alone on a line (a markdown heading).
HEADING = re.compile(rf"^[ \t]*(?:#{{1,6}}[ \t]*|\*\*|__)?[ \t]*(?:{LABEL})[ \t]*:?[ \t]*"
                     rf"{_UNDECOR}[ \t]*:?[ \t]*$", re.IGNORECASE | re.MULTILINE)
_HEADER_ANYWHERE = re.compile(HEADER.pattern, re.IGNORECASE | re.MULTILINE)
# Markers that always end private prose: what follows is the message, what precedes is not.
# Mid-line, only the capitalised form: "the final answer: 42?" is a user asking.
_MARKED = (r"(?:inal[ \t]+(?:message|answer|response|reply|output|utterance)|y[ \t]+(?:final"
           r"[ \t]+|next[ \t]+)?(?:message|reply|response|utterance))[ \t]*(?:\*\*)?[ \t]*:"
           r"(?:\*\*)?[ \t]*")
STRONG_MARKER = re.compile(
    rf"^[ \t]*(?:\*\*|#{{1,6}}[ \t]*)?[fm]{_MARKED}|(?<=\s)(?:\*\*)?(?-i:[FM]){_MARKED}",
    re.IGNORECASE | re.MULTILINE)
# Talk about the role-play itself: only a model planning its turn opens a message like this.
_FILLER = r"(?:ok(?:ay)?|alright|so|hmm+|well|right)[\s,.!…]+"
ROLEPLAY_START = re.compile(
    rf"^\s*(?:{_FILLER})*(?:so\s+)?(?:the (?:assistant|ai)\b|as the user\b"
    rf"|i(?:'m| am) (?:the user|playing|role-?playing|simulating|acting as)\b)"
    # a persona introduced to itself: "Alright, I'm a traveler with …" (not "Okay, I'm a
    # beginner with python": a bare ok/okay opens ordinary requests too)
    rf"|^\s*(?:(?:alright|hmm+|right|okay so|ok so|so)[\s,.!…]+)+i(?:'m| am) an? [\w-]+"
    rf"(?: [\w-]+)? (?:with|who)\b"
    rf"|^\s*hmm+\b[^\n]*\bi (?:shouldn't|should not|mustn't|must not) (?:say|mention|tell|share)\b"
    rf"|^\s*(?:{_FILLER})+(?:so\s+)?(?:i need to (?:respond|reply|write|answer)\b"
    rf"|the user(?:'s)?\s+(?:wants|is|has|asked|just|needs|said|seems"
    rf"|greeted|responded|replied|will|would|should)\b)", re.IGNORECASE)
_ROLEPLAY_ANYWHERE = re.compile(
    r"\b(?:as the (?:simulated )?user\b|in character\b|my (?:hidden |secret )?(?:persona"
    r"|instructions|hidden goal|secret goal)\b|the simulated user\b|(?:i|we) (?:should(?:n't)?|"
    r"must(?:n't)?|will|won't|shall) (?:not )?reveal\b|without revealing\b"
    # holding something back from the agent: "…but I shouldn't say it", "don't mention it yet"
    r"|i (?:shouldn't|should not|mustn't|must not|won't|can't) (?:say|mention|tell|share"
    r"|disclose|bring up) (?:it|that|this|them|the \w+|my \w+)(?: \w+)? yet\b"
    r"|(?:don't|do not|not to) (?:reveal|mention|disclose|say) (?:it|that|this|my \w+) yet\b"
    r"|^\s*hmm+\b.*\bi (?:shouldn't|should not|mustn't|must not) (?:say|mention|tell|share)\b)",
    re.IGNORECASE | re.DOTALL)
END_TOKEN = re.compile(
    r"(?:<\s*/?\s*\|?|\|)\s*end[\s_\-]*(?:of[\s_\-]*)?(?:the[\s_\-]*)?conversation"
    r"\s*(?:\|?\s*/?\s*>|\|)", re.IGNORECASE)
_CHANNEL = re.compile(r"<\|(?:channel|message|start|end|return)\|>|^\s*analysis\S.*assistant\s*final",
                      re.IGNORECASE | re.DOTALL)
_JSON_FENCE = re.compile(r"^\s*```(?:json)?\s*\n(.*?)\n\s*```\s*$", re.DOTALL | re.IGNORECASE)
_JSON_PRIVATE = ("reasoning", "thought", "thoughts", "thinking", "analysis", "plan",
                 "scratchpad", "rationale", "inner_monologue")
_JSON_PUBLIC = ("message", "utterance", "response", "reply", "content", "text", "user_message",
                "final_message", "output")


def canonical_tags(text: str) -> str:
    """``text`` with every reasoning tag rewritten to ``<think>`` / ``</think>`` (gpt-oss
    channels too: :func:`~mimesis.simulator.markup.rewrite_channels`)."""
    return _CLOSE.sub("</think>", _OPEN.sub("<think>", rewrite_channels(text)))


def split_json(text: str) -> tuple[str, str] | None:
    """``(reasoning, utterance)`` of a generation that is one JSON object with a reasoning key
    (optionally in a ```json fence); ``None`` when it is not such an object. A reasoning object
    without a message key gives an empty utterance."""
    fenced = _JSON_FENCE.match(text)
    body = fenced.group(1) if fenced else text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        return None
    try:
        obj = json.loads(body)
    except ValueError:
        return None
    if not isinstance(obj, dict) or not any(k.lower() in _JSON_PRIVATE for k in obj):
        return None
    private = [str(v) for k, v in obj.items() if k.lower() in _JSON_PRIVATE]
    public = [v for k, v in obj.items() if k.lower() in _JSON_PUBLIC and isinstance(v, str)]
    return "\n".join(private), (public[0] if public else "")


def private_signals(utterance: str) -> list[str]:
    """Signs of private reasoning left in an utterance (empty list: safe to send).

    Checked: a reasoning tag of any dialect; a reasoning header (``Plan:``) or heading
    (``### Reasoning``) at the start of a line; a final-message marker; an end-of-conversation
    token; a role-play opening ("Okay, the user wants…") or talk about the role-play anywhere
    ("without revealing", "my hidden goal").

    >>> private_signals("can you book it for friday?")
    []
    >>> private_signals("sure\\n\\nPlan: stay vague")
    ['header']
    """
    utterance = fold_markup(utterance)  # look-alike and escaped markup count as markup
    checks = {
        "tag": bool(_OPEN.search(utterance) or _CLOSE.search(utterance) or _CHANNEL.search(utterance)
                    or re.search(r"</?\s*think\b", utterance, re.IGNORECASE)),
        "header": bool(_HEADER_ANYWHERE.search(utterance) or HEADING.search(utterance)),
        "marker": bool(STRONG_MARKER.search(utterance)),
        "end_token": bool(END_TOKEN.search(utterance)),
        "roleplay": bool(ROLEPLAY_START.match(utterance)
                         or _ROLEPLAY_ANYWHERE.search(utterance)),
    }
    return [name for name, hit in checks.items() if hit]
