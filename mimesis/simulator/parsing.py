"""Split one raw simulator generation into private reasoning, utterance and end signal.

What the agent may see is only :attr:`ParsedTurn.utterance`. Everything that looks like the
simulator thinking to itself goes to :attr:`ParsedTurn.reasoning`:

* tagged blocks ``<think>…</think>`` (also ``<thinking>``/``<reasoning>``), several per turn;
* an unclosed ``<think>…`` cut by the token limit (the rest of the text is reasoning);
* a stray ``…</think>`` whose opening tag was in a prefill or dropped by a chat template;
* untagged prose that base instruct models write instead (PITFALLS 3): a turn that *starts* with
  a reasoning header ("Thinking Process:", "Reasoning:", "(thinking) …", "Let me think…") keeps
  its first block and the following reasoning-like blocks (numbered steps, talk about "the
  user"/"the assistant"/"my goal") private; a final-message marker ("Final message:", "User:")
  after such prose marks exactly where the utterance starts. A header turn that cannot be split
  yields an empty utterance (flag ``untagged_reasoning_unsplit``): leaking thoughts to the agent
  is worse than a resampled turn.

End signal: :data:`~mimesis.simulator.format.END_SIGNAL` and tolerant variants (case and spaces
free: ``<|endconversation|>``, ``<end_conversation>``, ``|end-of-conversation|``) anywhere in the
utterance; the loose forms ``[END]``, ``[END CONVERSATION]``, ``###STOP###`` (tau2-bench's stop
token) and bare ``END_CONVERSATION`` only at the very start or end of the utterance, so that
pasted text containing them mid-message does not end a conversation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_TAG_NAMES = r"think|thinking|reasoning"
_TAG_BLOCK = re.compile(rf"[ \t]*<\s*({_TAG_NAMES})\s*>(.*?)<\s*/\s*\1\s*>[ \t]*",
                        re.DOTALL | re.IGNORECASE)
_TAG_OPEN = re.compile(rf"<\s*(?:{_TAG_NAMES})\s*>", re.IGNORECASE)
_TAG_CLOSE = re.compile(rf"<\s*/\s*(?:{_TAG_NAMES})\s*>", re.IGNORECASE)
# Chat-control residue: anything after it is the model writing past its own turn.
_CONTROL = re.compile(r"<\|(?:im_end|im_start|eot_id|endoftext|end_of_turn)\|>|</s>")

_END_TOKEN = re.compile(
    r"(?:<\s*/?\s*\|?|\|)\s*end[\s_\-]*(?:of[\s_\-]*)?(?:the[\s_\-]*)?conversation"
    r"\s*(?:\|?\s*/?\s*>|\|)", re.IGNORECASE)
_LOOSE_END = (r"\[\s*end(?:[\s_\-]*(?:of[\s_\-]*)?conversation)?\s*\]|#{2,}\s*stop\s*#{2,}"
              r"|\[\s*stop\s*\]|\bend_conversation\b")
_LOOSE_END_EDGE = re.compile(rf"^\s*(?:{_LOOSE_END})[\s.!]*|\s*(?:{_LOOSE_END})[\s.!]*$",
                             re.IGNORECASE)

_HEADER = re.compile(
    r"^\s*(?:\*\*|#+\s*)?(?:thinking(?:\s+process)?|thought\s+process|thoughts?|reasoning"
    r"(?:\s+process)?|scratch\s*pad|(?:my|internal|private|inner)\s+(?:thoughts?|reasoning"
    r"|monologue))\s*(?:\*\*)?\s*:", re.IGNORECASE)
_LABEL = r"thinking|thinks|thought|thoughts|reasoning|internal\s+thoughts?|inner\s+monologue"
_BRACKET_LABEL = re.compile(rf"^\s*(?:\(\s*(?:{_LABEL})\b|\[\s*(?:{_LABEL})\b|\*\s*(?:{_LABEL})\b)",
                            re.IGNORECASE)
_ENCLOSED = re.compile(
    rf"^\s*(?:\(\s*(?:{_LABEL})\s*:?\s*(?P<p>[^)]+?)\s*\)|\[\s*(?:{_LABEL})\s*:?\s*(?P<b>[^\]]+?)"
    rf"\s*\]|\*\s*(?:{_LABEL})\s*:?\s*(?P<s>[^*]+?)\s*\*)", re.IGNORECASE | re.DOTALL)
_LET_ME_THINK = re.compile(
    r"^\s*(?:(?:ok(?:ay)?|alright|hmm+|so|well)[\s,.!…]+)*(?:let me think|let's think"
    r"|let me reason|i need to think)\b", re.IGNORECASE)
# Talk *about* the conversation rather than *to* the agent: only a model planning its turn does it.
_META = re.compile(
    r"\b(?:the (?:user|assistant|agent|ai)(?:'s)?\b|as the user\b|in character\b|the scenario\b"
    r"|my (?:goal|persona|character|role|task|instructions?|next (?:message|turn)|reply|response)"
    r"\b|i(?:'ll| will| should| need to| must| want to)\s+(?:not\s+)?(?:say|write|ask|reply"
    r"|respond|mention|give|tell|keep|stay|reveal|answer|sound|act|play|pretend|avoid|be)\b"
    r"|let me (?:write|craft|draft|think|reason)\b|\bdraft\b)", re.IGNORECASE)
_FILLER = r"(?:ok(?:ay)?|alright|so|hmm+|well)[\s,.!]+"
_STRONG_META_START = re.compile(
    rf"^\s*(?:{_FILLER})*(?:so\s+)?(?:the (?:assistant|ai)\b|as the user\b|i(?:'m| am) (?:the user"
    rf"|playing|role-?playing|simulating)\b)|^\s*(?:{_FILLER})+(?:so\s+)?i need to (?:respond"
    r"|reply|write|answer)\b", re.IGNORECASE)
_LIST_ITEM = re.compile(r"^\s*(?:[-*•]|\d+[.)]|#+)\s+|^\s*\*\*", re.MULTILINE)
_MARKER = re.compile(
    r"^[ \t]*(?:\*\*)?(?:final\s+(?:message|answer|response|reply|output|utterance)|(?:my\s+)?"
    r"(?:next\s+)?(?:message|reply|response|utterance|output)|user(?:\s+message)?|human)"
    r"(?:\*\*)?[ \t]*:(?:\*\*)?[ \t]*", re.IGNORECASE | re.MULTILINE)
_TRAILING_NOTE = re.compile(rf"^\s*(?:\(\s*note\b|[(\[]?\s*(?:{_LABEL})\s*[:)\]])", re.IGNORECASE)
_QUOTES = {'"': '"', "“": "”", "'": "'", "«": "»"}


@dataclass
class ParsedTurn:
    """One simulator generation, split.

    Attributes:
        reasoning: Private text (tagged and untagged parts joined by newlines); never shown.
        utterance: What the agent may see, stripped; may be empty.
        ended: The turn carries an end-of-conversation signal (removed from ``utterance``).
        flags: What parsing had to repair: ``think_tagged``, ``think_unclosed``,
            ``think_unopened``, ``untagged_reasoning``, ``untagged_reasoning_unsplit``,
            ``end_signal_variant``, ``role_prefix``, ``control_token``.
    """

    reasoning: str
    utterance: str
    ended: bool
    flags: list[str] = field(default_factory=list)


def parse_turn(text: str) -> ParsedTurn:
    """Split a raw generation into reasoning, utterance and end signal (see module docstring).

    >>> turn = parse_turn("<think>they asked my dates</think>\\nmarch 3 <|end_conversation|>")
    >>> turn.reasoning, turn.utterance, turn.ended
    ('they asked my dates', 'march 3', True)
    """
    flags: list[str] = []
    reasoning: list[str] = []
    control = _CONTROL.search(text)
    if control:
        text, flags = text[:control.start()], flags + ["control_token"]
    text = _strip_tags(text, reasoning, flags)
    thought, text, untagged_flags = split_untagged(text)
    flags += untagged_flags
    if thought:
        reasoning.append(thought)
    utterance, ended, variant = _take_end_signal(text)
    if variant:
        flags.append("end_signal_variant")
    if reasoning:
        utterance = _unquote(utterance)
    return ParsedTurn("\n".join(r for r in reasoning if r), utterance.strip(), ended, flags)


def _strip_tags(text: str, reasoning: list[str], flags: list[str]) -> str:
    """Move tagged reasoning out of ``text`` into ``reasoning``; return the rest."""
    blocks = [m.group(2).strip() for m in _TAG_BLOCK.finditer(text)]
    if blocks:
        reasoning.extend(blocks)
        flags.append("think_tagged")
        text = _TAG_BLOCK.sub(" ", text)
    closes = list(_TAG_CLOSE.finditer(text))
    if closes and not _TAG_OPEN.search(text[:closes[-1].start()]):
        reasoning.append(_TAG_CLOSE.sub(" ", text[:closes[-1].start()]).strip())
        flags.append("think_unopened")
        text = text[closes[-1].end():]
    opened = _TAG_OPEN.search(text)
    if opened:
        reasoning.append(_TAG_OPEN.sub(" ", text[opened.end():]).strip())
        flags.append("think_unclosed")
        text = text[:opened.start()]
    return text


def split_untagged(text: str) -> tuple[str, str, list[str]]:
    """Split untagged reasoning prose from the utterance.

    Returns:
        ``(reasoning, utterance, flags)``; ``reasoning`` is ``""`` when the text does not start
        like reasoning (it is then returned unchanged as the utterance, minus trailing notes).
    """
    text = text.strip()
    marker = _last_marker(text)
    if marker is not None:
        before, after = text[:marker.start()].strip(), text[marker.end():].strip()
        if not before:
            return "", after, ["role_prefix"]
        if starts_like_reasoning(before):
            return before, _unquote(after), ["untagged_reasoning"]
    enclosed = _ENCLOSED.match(text)
    if enclosed and (enclosed.group("p") or enclosed.group("b") or enclosed.group("s")):
        thought = enclosed.group("p") or enclosed.group("b") or enclosed.group("s")
        rest, note = _drop_trailing_notes(text[enclosed.end():].strip())
        return "\n".join(x for x in (thought.strip(), note) if x), rest, ["untagged_reasoning"]
    if starts_like_reasoning(text):
        blocks = _blocks(text)
        cut = 1
        while cut < len(blocks) and _reasoning_like(blocks[cut]):
            cut += 1
        thought, rest = "\n\n".join(blocks[:cut]), "\n\n".join(blocks[cut:])
        flags = ["untagged_reasoning"] + ([] if rest else ["untagged_reasoning_unsplit"])
        return thought, rest, flags
    rest, note = _drop_trailing_notes(text)
    return note, rest, ["untagged_reasoning"] if note else []


def starts_like_reasoning(text: str) -> bool:
    """True when ``text`` opens the way models open private reasoning (header, label, meta)."""
    return bool(_HEADER.match(text) or _BRACKET_LABEL.match(text) or _LET_ME_THINK.match(text)
                or _STRONG_META_START.match(text))


def _reasoning_like(block: str) -> bool:
    return bool(_LIST_ITEM.match(block) or _META.search(block) or starts_like_reasoning(block))


def _blocks(text: str) -> list[str]:
    """Paragraphs; a single paragraph is split into lines."""
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
    if len(paragraphs) == 1:
        return [line.strip() for line in paragraphs[0].splitlines() if line.strip()]
    return paragraphs


def _last_marker(text: str) -> re.Match[str] | None:
    found = None
    for found in _MARKER.finditer(text):
        pass
    return found


def _drop_trailing_notes(text: str) -> tuple[str, str]:
    """Trailing "(Note: …)" / "Reasoning: …" paragraphs are asides, not speech."""
    paragraphs = [p for p in re.split(r"\n\s*\n", text.strip()) if p.strip()]
    notes: list[str] = []
    while len(paragraphs) > 1 and _TRAILING_NOTE.match(paragraphs[-1]):
        notes.insert(0, paragraphs.pop().strip())
    return "\n\n".join(paragraphs).strip(), "\n\n".join(notes)


def _take_end_signal(text: str) -> tuple[str, bool, bool]:
    """Remove end signals; returns ``(rest, ended, a non-canonical variant was used)``."""
    tokens = _END_TOKEN.findall(text)
    rest = _END_TOKEN.sub(" ", text)
    loose = False
    while (m := _LOOSE_END_EDGE.search(rest)) is not None and m.group(0).strip():
        rest, loose = rest[:m.start()] + " " + rest[m.end():], True
    ended = bool(tokens) or loose
    variant = loose or any(t != "<|end_conversation|>" for t in tokens)
    return re.sub(r"[ \t]+\n", "\n", rest).strip(), ended, variant


def _unquote(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and _QUOTES.get(text[0]) == text[-1] and text.count(text[0]) <= 2:
        return text[1:-1].strip()
    return text
