"""TurtleGym's judges: what scores an explanation of a story, and the text matching they use.

Split from :mod:`mimesis.envs.turtle.gym` (the env, its reward and its task loaders), which
scores every explanation with one of these. Here: the stories' data (:class:`TurtleStory`,
:class:`KeyFact`), the judge protocol (:class:`TurtleJudge`: ``judge(story, explanation)`` →
score in [0, 1], plus a ``name``) and the judges:

- :data:`key_fact_judge` (offline and deterministic): the weighted fraction of the story's key
  facts that the explanation covers (:func:`key_fact_score`, :func:`fact_covered`), matched on
  light stems (:func:`stem`, :func:`word_stems`).
- :class:`OpenAIJudge`: asks an OpenAI-compatible endpoint for a number in [0, 1], read by
  :func:`parse_judge_score`; failures raise :class:`TurtleJudgeError`.

The text helpers (:func:`stem`, :func:`content_words`) are shared with
:mod:`mimesis.envs.intention.gym`. This module registers no env.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from mimesis.behaviors.lexicon import STOPWORDS
from mimesis.openai_chat import ChatAPIError, ChatClient
from mimesis.schemas import Messages

# Suffixes stripped by :func:`stem` (first match only), with their replacement.
_SUFFIXES = (("ies", "y", 2), ("ied", "y", 2), ("ing", "", 3), ("ed", "", 3), ("es", "", 3),
             ("s", "", 3), ("e", "", 3))
_WORD = re.compile(r"[a-z0-9]+")
_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)


class TurtleJudgeError(ChatAPIError):
    """A judge could not score an explanation (endpoint error or an unreadable reply)."""


@dataclass(frozen=True)
class KeyFact:
    """A point a correct explanation must contain.

    Attributes:
        text: The fact in words (shown to an LLM judge).
        keywords: Accepted alternatives, each a word or a phrase (all its words must appear).
        weight: Share of the score (weights are normalised over the story's facts).
        min_matches: Alternatives that must appear for the fact to count as covered.
    """

    text: str
    keywords: tuple[str, ...]
    weight: float = 1.0
    min_matches: int = 1


@dataclass(frozen=True)
class TurtleStory:
    """A story: ``surface`` is shown to the agent, ``bottom`` is known only to the user."""

    id: str
    title: str
    surface: str
    bottom: str
    key_facts: tuple[KeyFact, ...]


# ----------------------------------------------------------------------- text matching
def stem(word: str) -> str:
    """Strip one common English suffix so word forms match: ``drowned``/``drowning`` → ``drown``.

    A suffix is stripped only when enough of the word stays; a final ``s`` stays after ``ss``,
    ``us`` and ``is``; after ``-ed``/``-ing`` a doubled final consonant is undone (``stopped`` →
    ``stop``), except ``ll``, ``ss`` and ``zz``.

    Examples:
        >>> [stem(w) for w in ("corpses", "corpse", "copied", "stopped", "killed", "ice")]
        ['corps', 'corps', 'copy', 'stop', 'kill', 'ice']
        >>> [stem(w) for w in ("class", "classes", "focus", "focused")]
        ['class', 'class', 'focus', 'focus']
    """
    for suffix, replacement, keep in _SUFFIXES:
        if suffix == "s" and word.endswith(("ss", "us", "is")):  # class, focus, analysis
            continue
        if word.endswith(suffix) and len(word) - len(suffix) >= keep:
            base = word[: -len(suffix)] + replacement
            if suffix in ("ing", "ed") and len(base) >= 4 and base[-1] == base[-2]:
                base = base if base[-1] in "lsz" else base[:-1]
            return base
    return word


def word_stems(text: str) -> set[str]:
    """Stems of every word of ``text`` (lower-cased; letters and digits)."""
    return {stem(w) for w in _WORD.findall(text.lower())}


def content_words(text: str) -> list[str]:
    """Distinct words of ``text`` that carry content (3+ characters, no stopword, no number), in
    order of first appearance, one per stem."""
    seen: set[str] = set()
    out = []
    for w in _WORD.findall(text.lower()):
        if len(w) < 3 or w in STOPWORDS or w.isdigit() or stem(w) in seen:
            continue
        seen.add(stem(w))
        out.append(w)
    return out


def fact_covered(fact: KeyFact, explanation: str) -> bool:
    """True when at least ``fact.min_matches`` of the fact's keyword alternatives appear.

    Examples:
        >>> fact = KeyFact("The shadow was a corpse", ("corpse", "dead body"))
        >>> fact_covered(fact, "He was carrying a dead man's body"), fact_covered(fact, "A ghost")
        (True, False)
    """
    found = word_stems(explanation)
    hits = sum(1 for alt in fact.keywords if alt.strip() and word_stems(alt) <= found)
    return hits >= fact.min_matches


def key_fact_score(facts: Sequence[KeyFact], explanation: str) -> float:
    """Weighted fraction of ``facts`` that ``explanation`` covers (see :func:`fact_covered`).

    Returns:
        A score in [0, 1]; 0.0 when there are no facts or the explanation is blank.

    Examples:
        >>> facts = (KeyFact("a", ("leap year", "february 29")), KeyFact("b", ("every four",)))
        >>> key_fact_score(facts, "He was born on February 29"), key_fact_score(facts, "")
        (0.5, 0.0)
    """
    total = sum(f.weight for f in facts)
    if total <= 0 or not explanation.strip():
        return 0.0
    return sum(f.weight for f in facts if fact_covered(f, explanation)) / total


# ----------------------------------------------------------------------- judges
@runtime_checkable
class TurtleJudge(Protocol):
    """Scores an explanation of a story: ``judge(story, explanation)`` → float in [0, 1].

    ``name`` identifies the judge in records (``key_facts``, ``openai:<model>``).
    """

    name: str

    def __call__(self, story: TurtleStory, explanation: str) -> float: ...


class KeyFactJudge:
    """The offline judge: :func:`key_fact_score` over the story's key facts."""

    name = "key_facts"

    def __call__(self, story: TurtleStory, explanation: str) -> float:
        return key_fact_score(story.key_facts, explanation)


key_fact_judge = KeyFactJudge()

JUDGE_SYSTEM = (
    "You grade answers to lateral-thinking puzzles (turtle soup). You get the puzzle, its hidden "
    "explanation, the key facts a correct answer must contain (with weights) and the player's "
    "explanation. Give each key fact 1 if the player's explanation states it, 0.5 if it is "
    "partly right, 0 otherwise, and reply with the weighted average: one number between 0 and "
    "1, and nothing else."
)


def parse_judge_score(text: str) -> float:
    """Read a judge's reply: the first number, as a fraction (``x/y``), a percentage or a plain
    number in [0, 1]; reasoning in ``<think>…</think>`` is skipped.

    Raises:
        TurtleJudgeError: no number, or a plain number outside [0, 1].

    Examples:
        >>> parse_judge_score("0.75"), parse_judge_score("Score: 8/10"), parse_judge_score("60%")
        (0.75, 0.8, 0.6)
    """
    body = _THINK.sub("", text)
    match = re.search(r"(\d+(?:\.\d+)?)\s*(?:(/)\s*(\d+(?:\.\d+)?)|(%))?", body)
    if match is None:
        raise TurtleJudgeError(f"judge reply has no score: {text[:200]!r}")
    value = float(match.group(1))
    if match.group(2) and float(match.group(3)) > 0:
        value /= float(match.group(3))
    elif match.group(4):
        value /= 100
    if not 0.0 <= value <= 1.0:
        raise TurtleJudgeError(f"judge score {value} is outside [0, 1]: {text[:200]!r}")
    return value


class OpenAIJudge:
    """An LLM judge behind any OpenAI-compatible chat-completions endpoint.

    Args:
        model: Model id at the endpoint.
        base_url: Endpoint base URL (``""``: api.openai.com).
        api_key_env: Environment variable holding the API key.
        timeout_s: Per-request timeout.
        max_retries: Client retries (connection errors, 429, 5xx) with backoff.
        max_tokens: Reply budget (raise it for models that think before answering).
        client: A ready ``openai.OpenAI``-like client (tests); skips the key lookup.

    Raises:
        TurtleJudgeError: ``api_key_env`` is unset or empty (without ``client``).
    """

    def __init__(
        self,
        model: str,
        base_url: str = "",
        api_key_env: str = "OPENAI_API_KEY",
        *,
        timeout_s: float = 60.0,
        max_retries: int = 3,
        max_tokens: int = 32,
        client: Any = None,
    ) -> None:
        self._client = ChatClient(model, base_url, api_key_env, timeout_s=timeout_s,
                                  max_retries=max_retries, error=TurtleJudgeError,
                                  label=f"OpenAIJudge openai:{model}", client=client)
        self.model, self.max_tokens = model, max_tokens
        self.name = self._client.name

    @staticmethod
    def messages(story: TurtleStory, explanation: str) -> Messages:
        """The judge's chat messages for one explanation."""
        facts = "\n".join(f"- ({f.weight:g}) {f.text}" for f in story.key_facts)
        user = (
            f"Puzzle: {story.surface}\n\nHidden explanation: {story.bottom}\n\n"
            f"Key facts (weight):\n{facts}\n\nPlayer's explanation: {explanation}\n\nScore:"
        )
        return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]

    def __call__(self, story: TurtleStory, explanation: str) -> float:
        """Score ``explanation``.

        Raises:
            TurtleJudgeError: the endpoint failed or its reply holds no score in [0, 1].
        """
        reply = self._client.complete(self.messages(story, explanation), max_tokens=self.max_tokens,
                                      temperature=0.0)
        if reply.rejected:
            raise TurtleJudgeError(f"{self.name} rejected the request: {reply.rejected}")
        return parse_judge_score(reply.text)
