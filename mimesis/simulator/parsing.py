"""Split one raw simulator generation into private reasoning, utterance and end signal.

Contract: **nothing private ever reaches** :attr:`ParsedTurn.utterance`, the only part the agent
may see. Everything that looks like the simulator thinking to itself goes to
:attr:`ParsedTurn.reasoning`:

* tagged blocks in any dialect (:func:`~mimesis.simulator.private_forms.canonical_tags`:
  ``<think>``, ``<thought>``, ``<scratchpad>``, ``<analysis>``, ``[THINK]``, attributes,
  nesting), several per turn; an unclosed tag cut by the token limit (the rest of the text is
  reasoning); a stray closing tag whose opening tag was in a prefill;
* a JSON object with a reasoning key (``{"reasoning": …, "message": …}``);
* whatever follows an end-of-conversation token (the model explaining why it stopped);
* untagged prose that base instruct models write instead (docs/pitfalls.md #3): a turn that *starts*
  with a reasoning header or heading ("Thinking Process:", "Plan:", "Analysis:",
  "### Reasoning", "**Reasoning**"), a label ("(thinking) …"), "Let me think…" or role-play talk
  ("Okay, the user wants…") keeps everything but its last block private; a final-message marker
  ("Final message:", "My reply:") makes everything before it private wherever it stands, a weak
  one ("Message:", "User:", "### Response") only after such prose;
* trailing "(Note: …)" / "Reasoning: …" / role-play paragraphs after the message.

Last line (:func:`~mimesis.simulator.private_forms.private_signals`): an utterance that still
shows a sign of reasoning is not split safely; it becomes reasoning, the utterance is empty
(flag ``unsafe_split``) and the runtime resamples or ends the turn — leaking thoughts to the
agent is worse than a resampled turn. So is a header turn with a single block
(``untagged_reasoning_unsplit``).

End signal: :data:`~mimesis.format.END_SIGNAL` and tolerant variants (case and spaces
free: ``<|endconversation|>``, ``<end_conversation>``, ``|end-of-conversation|``) anywhere in the
utterance; the loose forms ``[END]``, ``[END CONVERSATION]``, ``###STOP###`` (tau2-bench's stop
token) and bare ``END_CONVERSATION`` only at the very start or end of the utterance, so that
pasted text containing them mid-message does not end a conversation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mimesis.simulator.markup import fold_markup
from mimesis.simulator.private_forms import (
    END_TOKEN,
    HEADER,
    HEADING,
    ROLEPLAY_START,
    STRONG_MARKER,
    canonical_tags,
    private_signals,
    split_json,
)

# After canonical_tags, every reasoning tag is <think>/</think>.
_TAG_BLOCK = re.compile(r"[ \t]*<think>(.*?)</think>[ \t]*", re.DOTALL)
_TAG_OPEN = re.compile(r"<think>")
_TAG_CLOSE = re.compile(r"</think>")
# Chat-control residue: anything after it is the model writing past its own turn.
_CONTROL = re.compile(r"<\|(?:im_end|im_start|eot_id|endoftext|end_of_turn)\|>|</s>")

_LOOSE_END = (r"\[\s*end(?:[\s_\-]*(?:of[\s_\-]*)?conversation)?\s*\]|#{2,}\s*stop\s*#{2,}"
              r"|\[\s*stop\s*\]|\bend_conversation\b")
_LOOSE_END_EDGE = re.compile(rf"^\s*(?:{_LOOSE_END})[\s.!]*|\s*(?:{_LOOSE_END})[\s.!]*$",
                             re.IGNORECASE)

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
_LIST_ITEM = re.compile(r"^\s*(?:[-*•]|\d+[.)]|#+)\s+|^\s*\*\*", re.MULTILINE)
# Weak markers: a role prefix, or the message after reasoning prose ("Message:", "### Reply").
_MARKER = re.compile(
    r"^[ \t]*(?:\*\*)?(?:final\s+(?:message|answer|response|reply|output|utterance)|(?:my\s+)?"
    r"(?:next\s+)?(?:message|reply|response|utterance|output)|user(?:\s+message)?|human)"
    r"(?:\*\*)?[ \t]*:(?:\*\*)?[ \t]*"
    r"|^[ \t]*(?:#{1,6}[ \t]*|\*\*|__)(?:final\s+)?(?:message|response|reply|utterance|output"
    r"|user\s+message|answer)[ \t]*(?:\*\*|__)?[ \t]*:?[ \t]*(?:\*\*|__)?[ \t]*$\n?",
    re.IGNORECASE | re.MULTILINE)
# A labelled aside: the label names a private channel, and a colon or dash follows it. "(Note: …)"
# is not one: users annotate their own messages that way.
_ASIDE_LABEL = (r"internal(?:ly)?|internal\s+(?:note|thoughts?|monologue)|thinking|thinks|thoughts?"
                r"|reasoning|private(?:\s+note)?|hidden|inner\s+(?:thoughts?|monologue)"
                r"|note\s+to\s+self|to\s+myself|ooc|out\s+of\s+character|aside\s+to\s+self"
                r"|not\s+said(?:\s+aloud)?|(?:my\s+)?(?:hidden|secret)\s+(?:goal|plan)")
_ASIDE = re.compile(
    rf"[ \t]*(?:\((?:\s*(?:{_ASIDE_LABEL})\s*[:\-–—]\s*)(?P<p>[^)]*)(?:\)|\Z)"
    rf"|\[(?:\s*(?:{_ASIDE_LABEL})\s*[:\-–—]\s*)(?P<b>[^\]]*)(?:\]|\Z)"
    rf"|(?<!\*)\*(?!\*)(?:\s*(?:{_ASIDE_LABEL})\s*[:\-–—]\s*)(?P<s>[^*]*)(?:\*|\Z))",
    re.IGNORECASE)
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
            ``end_signal_variant``, ``role_prefix``, ``control_token``, ``json_reasoning``,
            ``after_end_signal`` (text after the end token made private), ``unsafe_split``
            (the utterance still showed reasoning: emptied, see the module docstring).
    """

    reasoning: str
    utterance: str
    ended: bool
    flags: list[str] = field(default_factory=list)


def parse_turn(text: str) -> ParsedTurn:
    """Split a raw generation into reasoning, utterance and end signal (see module docstring).

    The text is parsed as written and as :func:`~mimesis.simulator.markup.fold_markup` reads it
    (look-alike and escaped markup undone); the folded parse wins, flagged ``folded_markup``,
    only when it would send something else, so a user's own ``…`` or ``&amp;`` are kept.

    >>> turn = parse_turn("<think>they asked my dates</think>\\nmarch 3 <|end_conversation|>")
    >>> turn.reasoning, turn.utterance, turn.ended
    ('they asked my dates', 'march 3', True)
    >>> parse_turn("### Reasoning\\nstay vague\\n\\n### Message\\nhi").utterance
    'hi'
    >>> parse_turn("&lt;thіnk&gt;stay vague&lt;/thіnk&gt; hi").utterance
    'hi'
    """
    turn = _parse(text)
    folded = fold_markup(text)
    if folded == text:
        return turn
    alt = _parse(folded)
    if alt.utterance == fold_markup(turn.utterance) and alt.ended == turn.ended:
        return turn
    alt.flags.append("folded_markup")
    return alt


def _parse(text: str) -> ParsedTurn:
    flags: list[str] = []
    reasoning: list[str] = []
    control = _CONTROL.search(text)
    if control:
        text, flags = text[:control.start()], flags + ["control_token"]
    as_json = split_json(text)
    if as_json is not None:
        reasoning.append(as_json[0])
        text = as_json[1]
        flags.append("json_reasoning")
    text = _strip_tags(canonical_tags(text), reasoning, flags)
    text = _cut_after_end(text, reasoning, flags)
    text = _cut_asides(text, reasoning, flags)
    thought, text, untagged_flags = split_untagged(text)
    flags += untagged_flags
    if thought:
        reasoning.append(thought)
    utterance, ended, variant = _take_end_signal(text)
    if variant:
        flags.append("end_signal_variant")
    if reasoning:
        utterance = _unquote(utterance)
    if private_signals(utterance):
        reasoning.append(utterance)
        utterance, flags = "", flags + ["unsafe_split"]
    return ParsedTurn("\n".join(r for r in reasoning if r), utterance.strip(), ended, flags)


def _strip_tags(text: str, reasoning: list[str], flags: list[str]) -> str:
    """Move tagged reasoning out of ``text`` into ``reasoning``; return the rest."""
    blocks = [m.group(1).strip() for m in _TAG_BLOCK.finditer(text)]
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


def _cut_asides(text: str, reasoning: list[str], flags: list[str]) -> str:
    """Labelled asides anywhere in the text ("(Internal: …)", "[thinking: …]", "*to myself:
    …*") are private; one cut by the token limit takes the rest of the text with it."""
    found = [(m.group("p") or m.group("b") or m.group("s") or "").strip()
             for m in _ASIDE.finditer(text)]
    if not found:
        return text
    reasoning.extend(found)
    flags.append("aside")
    return re.sub(r"(?<=\S)[ \t]{2,}", " ", _ASIDE.sub(" ", text))


def _cut_after_end(text: str, reasoning: list[str], flags: list[str]) -> str:
    """Text after the first end token is the model explaining itself: make it private."""
    end = END_TOKEN.search(text)
    if end is None or not text[end.end():].strip():
        return text
    reasoning.append(text[end.end():].strip())
    flags.append("after_end_signal")
    return text[:end.end()]


def split_untagged(text: str) -> tuple[str, str, list[str]]:
    """Split untagged reasoning prose from the utterance.

    Returns:
        ``(reasoning, utterance, flags)``; ``reasoning`` is ``""`` when the text does not start
        like reasoning (it is then returned unchanged as the utterance, minus trailing notes).
    """
    text = text.strip()
    strong = _last(STRONG_MARKER, text)
    if strong is not None:
        before, after = text[:strong.start()].strip(), text[strong.end():].strip()
        return before, _unquote(after), ["untagged_reasoning" if before else "role_prefix"]
    marker = _last(_MARKER, text)
    if marker is not None:
        before, after = text[:marker.start()].strip(), text[marker.end():].strip()
        if not before:
            return "", after, ["role_prefix"]
        # prose that talks about the role-play ("the agent asked…; I shouldn't say it yet")
        # before a "User:" marker is the model planning, whatever its first words
        if starts_like_reasoning(before) or _META.search(before) or private_signals(before):
            return before, _unquote(after), ["untagged_reasoning"]
    enclosed = _ENCLOSED.match(text)
    if enclosed and (enclosed.group("p") or enclosed.group("b") or enclosed.group("s")):
        thought = enclosed.group("p") or enclosed.group("b") or enclosed.group("s")
        rest, note = _drop_trailing_notes(text[enclosed.end():].strip())
        return "\n".join(x for x in (thought.strip(), note) if x), rest, ["untagged_reasoning"]
    if starts_like_reasoning(text):
        # Only the last block can be the message: a block the rules cannot tell apart from
        # speech stays private (a shorter message beats a leaked thought).
        blocks = _blocks(text)
        if len(blocks) > 1 and not _reasoning_like(blocks[-1]):
            return "\n\n".join(blocks[:-1]), blocks[-1], ["untagged_reasoning"]
        return text, "", ["untagged_reasoning", "untagged_reasoning_unsplit"]
    rest, note = _drop_trailing_notes(text)
    return note, rest, ["untagged_reasoning"] if note else []


def starts_like_reasoning(text: str) -> bool:
    """True when ``text`` opens the way models open private reasoning (header, heading, label,
    "let me think", role-play talk)."""
    return bool(HEADER.match(text) or HEADING.match(text) or _BRACKET_LABEL.match(text)
                or _LET_ME_THINK.match(text) or ROLEPLAY_START.match(text))


def _reasoning_like(block: str) -> bool:
    return bool(_LIST_ITEM.match(block) or _META.search(block) or starts_like_reasoning(block))


def _blocks(text: str) -> list[str]:
    """Paragraphs; a single paragraph is split into lines."""
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
    if len(paragraphs) == 1:
        return [line.strip() for line in paragraphs[0].splitlines() if line.strip()]
    return paragraphs


def _last(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    found = None
    for found in pattern.finditer(text):
        pass
    return found


def _drop_trailing_notes(text: str) -> tuple[str, str]:
    """Trailing "(Note: …)" / "Reasoning: …" / role-play paragraphs are asides, not speech."""
    paragraphs = [p for p in re.split(r"\n\s*\n", text.strip()) if p.strip()]
    notes: list[str] = []
    while len(paragraphs) > 1 and (_TRAILING_NOTE.match(paragraphs[-1])
                                   or starts_like_reasoning(paragraphs[-1])):
        notes.insert(0, paragraphs.pop().strip())
    return "\n\n".join(paragraphs).strip(), "\n\n".join(notes)


def _take_end_signal(text: str) -> tuple[str, bool, bool]:
    """Remove end signals; returns ``(rest, ended, a non-canonical variant was used)``."""
    tokens = END_TOKEN.findall(text)
    rest = END_TOKEN.sub(" ", text)
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
