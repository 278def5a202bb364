"""Offline unseen users: replay and agenda, cheap deterministic reference points.

:func:`mimesis.users.factory.make_user` builds these for the ``replay`` and ``agenda`` kinds
of :class:`~mimesis.users.spec.UserSpec`. Both are
``generate_fn`` callables behind :class:`~mimesis.simulator.runtime.UserSimulator`, with the goal
itself as system prompt (:func:`goal_prompt`):

* :class:`ReplayUser` — replays the nearest *real* user turn of a held-out corpus (label's or
  curate's ``test.jsonl``, read by :func:`read_corpus`).
* :class:`AgendaUser` — rule-based (:func:`agenda_reply` over :func:`agenda_items`), after
  Schatzmann et al. (2007), "Agenda-based user simulation for bootstrapping a POMDP dialogue
  system", NAACL-HLT.

Limits of the offline users: they read the goal text only. The agenda user cannot compute or
infer (on FunctionGym it can only say it does not know, then gives up); the replay user answers
with real turns of unrelated conversations. They are cheap, deterministic reference points, not
substitutes for model users.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mimesis.format import END_SIGNAL, format_target
from mimesis.io import read_jsonl
from mimesis.schemas import Conversation, LabeledConversation, Messages, Scenario
from mimesis.simulator.guards import content_words
from mimesis.simulator.parsing import parse_turn


# ----------------------------------------------------------------------------- replay
def goal_prompt(scenario: Scenario) -> str:
    """System prompt of the offline users: the goal itself (they read nothing else)."""
    return scenario.goal


def _said(view: Messages) -> list[str]:
    """The simulated user's own utterances in a view (its turns are ``assistant`` there)."""
    return [parse_turn(m["content"]).utterance for m in view if m["role"] == "assistant"]


def _agent_messages(view: Messages) -> list[str]:
    return [m["content"] for m in view if m["role"] == "user"]


def read_corpus(path: Path) -> list[Conversation]:
    """Conversations of a JSONL file: ``LabeledConversation`` rows (label's ``test.jsonl``) or
    ``Conversation`` rows (curate's ``test.jsonl``)."""
    return [LabeledConversation.model_validate(r) if "scenario" in r
            else Conversation.model_validate(r) for r in read_jsonl(Path(path))]


@dataclass(frozen=True)
class _Pair:
    key: str  # what is matched against the query
    reply: str  # the real user turn, or END_SIGNAL
    source: str  # conversation id and turn index


class ReplayUser:
    """Offline user that replays the nearest real user turn of a held-out corpus.

    Pairs: every real user turn after an agent turn is keyed by that agent turn; when a
    ``LabeledConversation`` ended (``ended``) its last agent turn is keyed to the end signal.
    First user turns are keyed by themselves (plus the real scenario goal when labelled).
    A reply is the pair whose key is nearest, by TF-IDF cosine (scikit-learn, fitted on all keys),
    to the agent's last message — or, on an opening turn, to the scenario goal. Ties go to corpus
    order; a real turn this episode already sent is skipped (it would be a restart). Deterministic.
    The reasoning records the source (``<think>replay conv:turn, cosine c</think>``).

    Args:
        conversations: Held-out conversations (never the simulator's training data).

    Raises:
        ValueError: no usable user turn in ``conversations``.
    """

    def __init__(self, conversations: Sequence[Conversation]) -> None:
        from sklearn.feature_extraction.text import TfidfVectorizer

        self.first: list[_Pair] = []
        self.replies: list[_Pair] = []
        for conv in conversations:
            turns = conv.turns
            goal = conv.scenario.goal if isinstance(conv, LabeledConversation) else ""
            for i, turn in enumerate(turns):
                if turn.role != "user":
                    continue
                if i == 0:
                    self.first.append(_Pair(f"{goal} {turn.text}".strip(), turn.text,
                                            f"{conv.id}:{i}"))
                elif turns[i - 1].role == "assistant":
                    self.replies.append(_Pair(turns[i - 1].text, turn.text, f"{conv.id}:{i}"))
            ended = isinstance(conv, LabeledConversation) and conv.ended
            if ended and turns and turns[-1].role == "assistant":
                self.replies.append(_Pair(turns[-1].text, END_SIGNAL, f"{conv.id}:end"))
        if not self.first and not self.replies:
            raise ValueError("replay corpus has no user turns")
        self.first = self.first or self.replies  # a corpus of cut conversations: any turn
        self.replies = self.replies or self.first
        self.vectorizer = TfidfVectorizer(sublinear_tf=True)
        self.vectorizer.fit([p.key for p in self.first + self.replies])
        self._first = self.vectorizer.transform([p.key for p in self.first])
        self._replies = self.vectorizer.transform([p.key for p in self.replies])

    def nearest(self, query: str, opening: bool, exclude: Sequence[str] = ()) -> tuple[_Pair, float]:
        """The nearest pair to ``query`` whose reply is not in ``exclude``, and its cosine.

        Returns the end signal pair ``(END_SIGNAL, -1.0)`` when every candidate is excluded.
        """
        pairs, matrix = (self.first, self._first) if opening else (self.replies, self._replies)
        scores = (matrix @ self.vectorizer.transform([query]).T).toarray()[:, 0]
        banned = {" ".join(t.split()).lower() for t in exclude}
        for i in np.argsort(-scores, kind="stable"):
            if " ".join(pairs[i].reply.split()).lower() not in banned:
                return pairs[i], float(scores[i])
        return _Pair("", END_SIGNAL, "exhausted"), -1.0

    def __call__(self, batch: Sequence[Messages]) -> list[str]:
        out = []
        for view in batch:
            agent = _agent_messages(view)
            opening = not agent
            pair, score = self.nearest(view[0]["content"] if opening else agent[-1], opening,
                                       _said(view))
            out.append(f"<think>replay {pair.source}, cosine {score:.3f}</think>\n{pair.reply}")
        return out

    def reseed(self, seed: int) -> None:
        """No-op: deterministic (the agent evaluation restarts every user's randomness)."""


# ----------------------------------------------------------------------------- agenda
_QUOTE = re.compile(r"\"([^\"]{12,})\"|“([^”]{12,})”")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")
# A parenthesis that tells the player how to play ("say this only if the agent asks …").
_STAGE_NOTE = re.compile(r"\s*\([^()]*\b(?:agent|assistant|say this|reveal|when asked)\b[^()]*\)",
                         re.IGNORECASE)
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'“(])")
_LABEL_LINE = re.compile(r"^([a-z][a-z_ ]{0,24}):\s+(.+)$")
_INSTRUCTION = re.compile(
    r"\b(?:the|an|a)\s+(?:agent|assistant)\b|\bagent'?s\b|^(?:never|always|answer|reply|respond|"
    r"refuse|say|give|do|don'?t|only|if|when|ask|let|write|reveal|keep|be|try|tell|use)\b",
    re.IGNORECASE)
_PRIVATE = re.compile(r"\b(?:secret|hidden|thinking of)\b", re.IGNORECASE)
_PERSON = [(re.compile(rf"\b{a}\b", re.IGNORECASE), b) for a, b in (
    ("you are", "I am"), ("you're", "I'm"), ("you were", "I was"), ("you have", "I have"),
    ("you've", "I've"), ("yourself", "myself"), ("yours", "mine"), ("your", "my"), ("you", "I"))]
_YES_NO = re.compile(r"^\W*(?:is|are|am|was|were|do|does|did|can|could|will|would|should|has|"
                     r"have|had|may|might|shall|isn'?t|aren'?t|doesn'?t|don'?t)\b", re.IGNORECASE)
_WH = re.compile(r"^\W*(?:what|which|who|whom|whose|where|when|why|how)\b", re.IGNORECASE)
_NEGATION = frozenset({"not", "no", "never", "non", "without", "nor", "cannot", "none"})
_TOKEN = re.compile(r"[^\W_]+(?:'[^\W_]+)?")
DONT_KNOW = "I don't know."
OPENING_FALLBACK = "Hi, I need some help with something."
PATIENCE = 3  # "I don't know" answers in a row, agenda exhausted, before the user gives up


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def _words(text: str) -> frozenset[str]:
    return frozenset(_stem(w) for w in content_words(text))


def _negated(text: str) -> bool:
    return any(w in _NEGATION or w.endswith("n't") for w in _TOKEN.findall(text.lower()))


def first_person(text: str) -> str:
    """Second person (the goal's "you") to the user's own first person.

    >>> first_person("Your budget is limited and you want the cheapest.")
    'My budget is limited and I want the cheapest.'
    """
    for pattern, repl in _PERSON:
        text = pattern.sub(lambda m, r=repl: r[0].upper() + r[1:] if m.group(0)[0].isupper()
                           or r.startswith("I") else r, text)
    return text


@dataclass(frozen=True)
class AgendaItem:
    """One fact of the goal: ``text`` (first person), its stemmed content ``words``, whether it
    is ``negated``, and ``private`` (a secret: used to answer yes/no, never said)."""

    text: str
    words: frozenset[str]
    negated: bool
    private: bool


def agenda_items(goal: str) -> list[AgendaItem]:
    """Split a scenario goal into agenda items, in goal order.

    Quoted requests (≥ 12 characters) become items as they are; the rest is split into lines and
    sentences; ``label: value`` lines read "For the label, value"; sentences that instruct the
    player (about "the agent", or imperative: "Never …", "Answer …", "If …") and parentheses of
    stage directions are dropped; items with fewer than two content words (headers) are dropped.

    >>> [(i.text, i.private) for i in agenda_items(
    ...     "You are thinking of Lion (a big cat). Never say the name. Your budget is 40 dollars.")]
    [('I am thinking of Lion (a big cat).', True), ('My budget is 40 dollars.', False)]
    """
    items: list[AgendaItem] = []
    texts = [next(g for g in m.groups() if g) for m in _QUOTE.finditer(goal)]
    for line in _QUOTE.sub("", goal).splitlines():
        line = _STAGE_NOTE.sub("", _BULLET.sub("", line)).strip()
        label = _LABEL_LINE.match(line)
        if label:
            line = f"For the {label.group(1).replace('_', ' ')}, {label.group(2)}"
        texts += [s for s in _SENTENCE.split(line) if s and not _INSTRUCTION.search(s)]
    for text in texts:
        text = first_person(text.strip())
        words = _words(text)
        if len(words) < 2 or text.endswith(":") or any(i.text == text for i in items):
            continue
        items.append(AgendaItem(text, words, _negated(text), bool(_PRIVATE.search(text))))
    return items


def _question(message: str) -> tuple[str, bool]:
    """The question of an agent message (its last sentence with "?", else the whole message) and
    whether it is a question at all."""
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", message.strip()) if s]
    asked = [s for s in sentences if s.rstrip().endswith("?")]
    text = asked[-1] if asked else message
    return text, bool(asked) or bool(_YES_NO.match(text) or _WH.match(text))


def agenda_reply(goal: str, agent_messages: Sequence[str], said: Sequence[str]) -> str:
    """The agenda user's next raw turn (``<think>why</think>\\nutterance``).

    Rules, in order, for the agent's last message (Schatzmann et al. 2007: the user answers what
    the system asks, otherwise pushes the next item of its agenda):

    1. opening turn (no agent message): say the first public item (or a greeting);
    2. a yes/no question whose content words all occur in one item (private or not): "Yes." —
       or "No." when exactly one of question and item is negated;
    3. a question sharing a content word with an item not yet said: say the item with the most
       shared words (earliest on ties) — one item per turn;
    4. any other question: "I don't know." — after :data:`PATIENCE` of these in a row with no
       item left to say, the user gives up (end signal);
    5. not a question (a statement, proposal or answer): say the next unsaid item; when none is
       left the agenda is exhausted and the user ends (end signal).

    >>> goal = "I want a vegetarian restaurant. The table must be for four people."
    >>> agenda_reply(goal, ["Do you want a vegetarian restaurant?"], []).split("\\n")[1]
    'Yes.'
    >>> agenda_reply(goal, ["How many people is the table for?"], []).split("\\n")[1]
    'The table must be for four people.'
    """
    items = agenda_items(goal)
    spoken = {" ".join(s.split()) for s in said}
    public = [i for i in items if not i.private and i.text not in spoken]
    if not agent_messages:
        text = public[0].text if public else OPENING_FALLBACK
        return format_target("agenda: opening with my first item", text)
    question, is_question = _question(agent_messages[-1])
    asked = _words(question)
    if is_question and asked and _YES_NO.match(question):
        for item in items:
            if asked <= item.words:
                yes = item.negated == _negated(question)
                return format_target(f"agenda: the item '{item.text}' settles it",
                                     "Yes." if yes else "No.")
    if is_question:
        scored = [(len(asked & i.words), -k, i) for k, i in enumerate(public)]
        best = max(scored, default=None, key=lambda s: s[:2])
        if best and best[0] > 0:
            return format_target("agenda: answering with the item asked about", best[2].text)
        streak = next((k for k, s in enumerate(reversed(said)) if s != DONT_KNOW), len(said))
        if not public and streak + 1 >= PATIENCE:
            return format_target("agenda: nothing I know helps; giving up", END_SIGNAL)
        return format_target("agenda: not on my agenda", DONT_KNOW)
    if public:
        return format_target("agenda: next item", public[0].text)
    return format_target("agenda: everything on my agenda is done", END_SIGNAL)


class AgendaUser:
    """Offline rule-based agenda user (``generate_fn``): :func:`agenda_reply` on each view; the
    goal is the view's system message (:func:`goal_prompt`). Deterministic."""

    def __call__(self, batch: Sequence[Messages]) -> list[str]:
        return [agenda_reply(view[0]["content"], _agent_messages(view), _said(view))
                for view in batch]

    def reseed(self, seed: int) -> None:
        """No-op: deterministic (the agent evaluation restarts every user's randomness)."""
