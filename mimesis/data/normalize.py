"""Turn ShareGPT chunk records into ``Conversation`` objects, and the filters that reject them.

Rules (each rejection names a reason code; every record of a rejected conversation gets it):
- ``malformed``: an element that is not ``{"id": str, "conversations": [{"from": str,
  "value": str}, ...]}``. The other chunks of its conversation get ``sibling_malformed:<key>``,
  because a missing chunk leaves a hole in the dialogue.
- ``bad_unicode``: an id, role or text holding a byte that is not UTF-8 or a lone surrogate
  escape (``\\ud800``): it cannot be written as UTF-8. Its siblings get
  ``sibling_bad_unicode:<key>``, for the same reason.
- ``empty_conversation``: an element with no turns (ShareGPT repeats some ids as an empty element
  followed by the real one); ``duplicate_chunk:<key>``: a second non-empty element for the same
  chunk of a conversation (the first is kept).
- Roles: human/user → ``user``; gpt/chatgpt/bing/bard/assistant → ``assistant`` (bard is the only
  addition to the issue's list: two real Google Bard answers). ``system`` → ``system_turn`` (in
  ShareGPT these are "shared from TypingMind/ChatHub" banners); any other → ``unknown_role``.
- ``empty_turn``: a turn whose text is blank.
- Chunks are concatenated in chunk order. Later chunks often start with the assistant; when two
  same-role turns meet at a chunk boundary they are merged into one turn joined by a newline
  (counted as ``boundary_merges``). Same-role turns inside a chunk → ``roles_not_alternating``.
- ``assistant_first``: the first turn is not the user's.
- A trailing user turn with no reply is dropped (counted as ``trailing_user_turns_trimmed``);
  a conversation left with no turn at all → ``no_reply``.
- ``too_long``: more than ``max_turns`` turns, a turn over ``max_turn_chars`` characters, or a
  conversation over ``max_conversation_chars`` characters (whole conversations are kept or
  rejected, never cut, so a downstream "the user ended here" signal stays true).
- ``not_english``: langdetect's probability of ``en`` on a sample of the user's own text (code
  and URLs removed) is below ``min_english_prob``; very short samples are judged by script
  (see :func:`detect_english`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mimesis.data.sharegpt import RawRecord, has_bad_unicode, split_chunk_id
from mimesis.schemas import Conversation, Reject, Turn

STAGE = "curate"
ROLE_MAP = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "chatgpt": "assistant",
    "bing": "assistant",
    "bard": "assistant",
    "assistant": "assistant",
}
LANG_SAMPLE_CHARS = 400  # user-text characters per conversation given to the language check
SHORT_SAMPLE_LETTERS = 40  # below this, langdetect guesses (see detect_english)
# Frequent English function words (and chat verbs); rare in other languages' running text.
# fmt: off
ENGLISH_FUNCTION_WORDS = frozenset({
    "the", "a", "an", "and", "or", "of", "to", "in", "on", "for", "with", "is", "are", "was",
    "be", "it", "this", "that", "you", "i", "my", "me", "we", "your", "can", "what", "how", "why",
    "do", "does", "please", "write", "give", "make", "about", "from", "as", "at", "by", "if",
    "not", "have", "has", "will", "would", "should", "could", "which", "who", "there", "their",
    "they", "them",
})
# fmt: on
_WORD = re.compile(r"[^\W\d_]+")
_LANG_TURN_CHARS = 160  # at most this much from each user turn, so one long paste can't dominate
_CODE_BLOCK = re.compile(r"```.*?(```|$)", re.DOTALL)
_URL = re.compile(r"https?://\S+")


class RejectError(Exception):
    """A conversation (or record) fails a rule; ``reason`` is its code, ``detail`` says where."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass
class GroupResult:
    """Outcome of one conversation's chunk records.

    Attributes:
        conversation: The assembled conversation, or None when it was rejected.
        rejects: One Reject per record that does not reach the output.
        trimmed: True when a trailing user turn without reply was dropped.
        boundary_merges: Same-role turns merged at chunk boundaries.
    """

    conversation: Conversation | None = None
    rejects: list[Reject] = field(default_factory=list)
    trimmed: bool = False
    boundary_merges: int = 0


def parse_turns(record: RawRecord) -> list[tuple[str, str]]:
    """Check one raw element's shape and return its ``(from, value)`` pairs.

    Raises:
        RejectError: ``malformed``, ``bad_unicode`` or ``empty_conversation``.
    """
    data = record.data
    if not isinstance(data, dict) or not record.id:
        raise RejectError("malformed", "element is not an object with a string id")
    if has_bad_unicode(record.id):
        raise RejectError("bad_unicode", "the id is not valid UTF-8")
    turns = data.get("conversations")
    if not isinstance(turns, list):
        raise RejectError("malformed", "'conversations' is not a list")
    pairs = []
    for j, turn in enumerate(turns):
        ok = isinstance(turn, dict) and isinstance(turn.get("from"), str)
        if not ok or not isinstance(turn.get("value"), str):
            raise RejectError("malformed", f"turn {j} lacks string 'from'/'value'")
        for name in ("from", "value"):
            if has_bad_unicode(turn[name]):
                raise RejectError(
                    "bad_unicode", f"turn {j} '{name}': a non-UTF-8 byte or a lone surrogate"
                )
        pairs.append((turn["from"], turn["value"]))
    if not pairs:
        raise RejectError("empty_conversation", "element has no turns")
    return pairs


def normalize_group(conv_id: str, records: list[RawRecord]) -> GroupResult:
    """Assemble the chunk records of one conversation (rules in the module docstring).

    Args:
        conv_id: The conversation id (record id without its ``_k`` suffix).
        records: Its records in file order.
    """
    out = GroupResult()
    chunks: dict[int, tuple[str, list[tuple[str, str]]]] = {}
    for rec in records:
        try:
            pairs = parse_turns(rec)
        except RejectError as err:
            out.rejects.append(
                Reject(id=rec.key, stage=STAGE, reason=err.reason, detail=err.detail)
            )
            if err.reason in ("malformed", "bad_unicode"):
                return _reject_rest(out, records, f"sibling_{err.reason}:{rec.key}")
            continue
        k = split_chunk_id(rec.id)[1]
        if k in chunks:
            reason = f"duplicate_chunk:{chunks[k][0]}"
            out.rejects.append(Reject(id=rec.key, stage=STAGE, reason=reason))
            continue
        chunks[k] = (rec.key, pairs)
    if not chunks:
        return out
    keys = [chunks[k][0] for k in sorted(chunks)]
    try:
        turns, out.boundary_merges = _join_chunks([chunks[k] for k in sorted(chunks)])
        out.trimmed = turns[-1].role == "user"
        if out.trimmed:
            turns.pop()
        if not turns:
            raise RejectError("no_reply", "only a user turn without reply")
    except RejectError as err:
        out.rejects += [
            Reject(id=key, stage=STAGE, reason=err.reason, detail=err.detail) for key in keys
        ]
        out.trimmed, out.boundary_merges = False, 0
        return out
    out.conversation = Conversation(id=conv_id, source_ids=keys, turns=turns)
    return out


def _reject_rest(out: GroupResult, records: list[RawRecord], reason: str) -> GroupResult:
    done = {r.id for r in out.rejects}
    out.rejects += [
        Reject(id=r.key, stage=STAGE, reason=reason) for r in records if r.key not in done
    ]
    return out


def _join_chunks(chunks: list[tuple[str, list[tuple[str, str]]]]) -> tuple[list[Turn], int]:
    """Map roles and concatenate chunks; merge same-role turns only at chunk boundaries."""
    roles: list[str] = []
    texts: list[str] = []
    merges = 0
    for n, (key, pairs) in enumerate(chunks):
        for j, (raw_role, text) in enumerate(pairs):
            role = ROLE_MAP.get(raw_role.strip().lower())
            if role is None:
                code = "system_turn" if raw_role.strip().lower() == "system" else "unknown_role"
                raise RejectError(code, f"{key} turn {j} role {raw_role[:40]!r}")
            if not text.strip():
                raise RejectError("empty_turn", f"{key} turn {j} ({role}) is blank")
            if not roles and role != "user":
                raise RejectError("assistant_first", f"{key} starts with the {role}")
            if roles and roles[-1] == role:
                if n == 0 or j > 0:
                    raise RejectError("roles_not_alternating", f"{key} turns {j - 1},{j}: {role}")
                texts[-1] = f"{texts[-1]}\n{text}"
                merges += 1
                continue
            roles.append(role)
            texts.append(text)
    return [Turn(role=r, text=t) for r, t in zip(roles, texts, strict=True)], merges


def check_caps(
    conv: Conversation, max_turns: int, max_turn_chars: int, max_conversation_chars: int
) -> None:
    """Raise ``RejectError("too_long")`` when a length cap is exceeded (all in characters)."""
    lengths = [len(t.text) for t in conv.turns]
    if len(lengths) > max_turns:
        raise RejectError("too_long", f"{len(lengths)} turns > max_turns {max_turns}")
    longest = max(lengths)
    if longest > max_turn_chars:
        raise RejectError(
            "too_long", f"a turn has {longest} chars > max_turn_chars {max_turn_chars}"
        )
    if sum(lengths) > max_conversation_chars:
        raise RejectError(
            "too_long", f"{sum(lengths)} chars > max_conversation_chars {max_conversation_chars}"
        )


def language_sample(conv: Conversation) -> str:
    """Up to ``LANG_SAMPLE_CHARS`` of the user's own words: fenced code and URLs removed, at most
    ``_LANG_TURN_CHARS`` per user turn. Falls back to the raw user text when almost no letters are
    left (a user who only pastes code)."""
    parts, total = [], 0
    for _, turn in conv.user_turns():
        piece = _URL.sub(" ", _CODE_BLOCK.sub(" ", turn.text)).strip()[:_LANG_TURN_CHARS]
        parts.append(piece)
        total += len(piece)
        if total >= LANG_SAMPLE_CHARS:
            break
    sample = " ".join(p for p in parts if p)[:LANG_SAMPLE_CHARS]
    if sum(c.isalpha() for c in sample) < 20:
        sample = " ".join(t.text for _, t in conv.user_turns())[:LANG_SAMPLE_CHARS]
    return sample


def detect_english(conv: Conversation, min_english_prob: float, seed: int) -> str:
    """Return ``"en"`` when the user's text (:func:`language_sample`) is English enough, else raise.

    Four steps, cheapest first:
    1. Short samples (< ``SHORT_SAMPLE_LETTERS`` letters: "test", "continue", a one-line
       question) are too short for langdetect (it calls "tech" Czech); they pass when ≥ 90% of
       their letters are ASCII.
    2. Plain English passes at once: ≥ 8 words, ≥ 98% ASCII letters and ≥ 25% of the words in
       ``ENGLISH_FUNCTION_WORDS``. On 4,000 ShareGPT conversations this decided 86%; it disagreed
       with langdetect 6 times, each an English text that langdetect misread. It also saves
       most of the stage's time (langdetect costs ~3-20 ms a call on mixed text).
    3. More than 10% non-ASCII letters (CJK, Hangul, Cyrillic, Arabic, ... or a Latin language
       heavy in accents) is not English; langdetect gets fooled by code mixed with such text.
    4. Otherwise langdetect (Google's language-detection ported: naive Bayes over character
       n-grams, 7 random trials, so probabilities come in steps of ~1/7), with
       ``DetectorFactory.seed`` fixed to ``seed`` for reproducible results: P(en) must reach
       ``min_english_prob``.

    Raises:
        RejectError: ``not_english``, with the evidence in its detail.
    """
    from langdetect import DetectorFactory, detect_langs
    from langdetect.lang_detect_exception import LangDetectException

    sample = language_sample(conv)
    letters = [c for c in sample if c.isalpha()]
    ascii_share = sum(c.isascii() for c in letters) / max(len(letters), 1)
    if len(letters) < SHORT_SAMPLE_LETTERS:
        if ascii_share >= 0.9:
            return "en"
        raise RejectError("not_english", f"short sample, {ascii_share:.0%} ASCII letters")
    words = _WORD.findall(sample.lower())
    function_share = sum(w in ENGLISH_FUNCTION_WORDS for w in words) / max(len(words), 1)
    if len(words) >= 8 and ascii_share >= 0.98 and function_share >= 0.25:
        return "en"
    if ascii_share < 0.9:
        raise RejectError("not_english", f"{1 - ascii_share:.0%} of letters are not ASCII")
    DetectorFactory.seed = seed
    try:
        langs = detect_langs(sample)
    except LangDetectException as err:
        raise RejectError("not_english", f"no language detected ({err})") from err
    p_en = next((lang.prob for lang in langs if lang.lang == "en"), 0.0)
    if p_en < min_english_prob:
        raise RejectError(
            "not_english",
            f"top {langs[0].lang}:{langs[0].prob:.2f}, en:{p_en:.2f} < {min_english_prob}",
        )
    return "en"
