"""SearchGym (held out): answer a multi-hop question with a document search tool.

After UserRL's SearchGym (SalesforceAIResearch/UserRL, ``gyms/SearchGym``, Apache-2.0; there the
tool is a web search API and the questions are Bamboogle's) and the MIMESIS paper's environment
table. Here the tool is offline: ``[search] <keywords>`` runs BM25 (the ``bm25s`` library) over a
local document collection and returns the best few documents. The agent sees the user's
question; the user knows what they mean (some shipped questions are ambiguous on purpose, e.g.
two bridges share a name) but not the answer, and clarifies when asked with ``[action]``.
``[answer] <text>`` ends the episode.

Data: ``mimesis/envs/search/data/search_docs.json`` (111 short documents about a fictional region,
written for this project, so answers cannot come from a model's memory) and
``search_questions.json`` (36 questions, 32 multi-hop, with accepted answers, the user's intent
and the supporting documents). ``SearchGym(docs_path=…)`` searches the user's own documents
(:func:`load_docs`: JSON or JSONL of ``{id, title, text}``); :func:`load_userrl_tasks` reads
UserRL's ``questions.json`` (those questions need a matching document set to be answerable).

Reward: :func:`search_reward` — 1.0 when the answer equals an accepted answer after SQuAD-style
normalisation (:func:`normalize_answer`), else 0.0 (also when the episode ends without one).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import bm25s
from bm25s.tokenization import Tokenizer

from mimesis.envs.base import UserEnv, action_format
from mimesis.envs.registry import register
from mimesis.envs.userrl import userrl_files
from mimesis.schemas import Reject

_ARTICLES = re.compile(r"\b(a|an|the)\b")


@dataclass(frozen=True)
class SearchDoc:
    """One searchable document."""

    id: str
    title: str
    text: str


@dataclass(frozen=True)
class SearchTask:
    """A question with its accepted answers.

    Attributes:
        id: Question id.
        question: What the user asks (shown to the agent).
        answers: Accepted answers; any one matches (after :func:`normalize_answer`).
        intent: What the user means, told only to the user simulator (empty: the question as
            written).
        support: Ids of the documents that hold the facts, in hop order (informational).
    """

    id: str
    question: str
    answers: tuple[str, ...]
    intent: str = ""
    support: tuple[str, ...] = ()


# ----------------------------------------------------------------- answers and reward
def normalize_answer(text: str) -> str:
    """SQuAD-style normalisation: lower-case, drop punctuation (any Unicode punctuation),
    drop the articles a/an/the, collapse whitespace.

    Examples:
        >>> normalize_answer("The  Grey-Heron!")
        'greyheron'
        >>> normalize_answer("18,400"), normalize_answer("An Ibex")
        ('18400', 'ibex')
    """
    lowered = text.lower()
    no_punct = "".join(ch for ch in lowered if not unicodedata.category(ch).startswith("P"))
    return " ".join(_ARTICLES.sub(" ", no_punct).split())


def answer_matches(prediction: str, answers: Iterable[str]) -> bool:
    """True when ``prediction`` equals one of ``answers`` after normalisation (a blank
    prediction never matches).

    Examples:
        >>> answer_matches("the Sallow river.", ("Sallow River", "Sallow"))
        True
        >>> answer_matches("Sallow River, near Drennick", ("Sallow River",))
        False
    """
    guess = normalize_answer(prediction)
    return bool(guess) and any(guess == normalize_answer(a) for a in answers)


def search_reward(prediction: str | None, answers: Iterable[str]) -> float:
    """Exact-match reward: 1.0 for a matching answer, 0.0 otherwise or with no answer.

    Examples:
        >>> search_reward("1,732", ("1732",)), search_reward(None, ("1732",))
        (1.0, 0.0)
    """
    return float(prediction is not None and answer_matches(prediction, answers))


# ----------------------------------------------------------------- BM25 index
class BM25Index:
    """BM25 over documents' title and text (``bm25s``; English stop words removed, no stemming).

    Building takes a few milliseconds per hundred short documents.

    Args:
        docs: The collection.

    Raises:
        ValueError: no documents, or two with the same id.
    """

    def __init__(self, docs: Sequence[SearchDoc]) -> None:
        if not docs:
            raise ValueError("BM25Index needs at least one document")
        if len({d.id for d in docs}) != len(docs):
            raise ValueError("document ids must be unique")
        self.docs = list(docs)
        self._tokenizer = Tokenizer(stopwords="en")
        corpus = self._tokenizer.tokenize(
            [f"{d.title}\n{d.text}" for d in self.docs], show_progress=False
        )
        self._bm25 = bm25s.BM25()
        self._bm25.index(corpus, show_progress=False)

    def search(self, query: str, k: int = 3) -> list[tuple[SearchDoc, float]]:
        """The best ``k`` documents with a positive score, best first.

        Returns:
            ``[(doc, score)]``; empty when no query word occurs in the collection.
        """
        # Unknown words are dropped rather than added: the index vocabulary is fixed.
        tokens = self._tokenizer.tokenize([query], update_vocab=False, show_progress=False)
        ids, scores = self._bm25.retrieve(
            tokens, k=min(k, len(self.docs)), show_progress=False, n_threads=1
        )
        return [(self.docs[i], float(s)) for i, s in zip(ids[0], scores[0]) if s > 0]


# ----------------------------------------------------------------- data
def _doc_rows(path: Path) -> list[Any]:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    data = json.loads(text)
    return data["docs"] if isinstance(data, dict) else data


def load_docs(path: Path) -> tuple[list[SearchDoc], list[Reject]]:
    """Read a document collection: ``.jsonl`` (one ``{id, title, text}`` per line) or ``.json``
    (a list of them, or ``{"docs": [...]}``).

    ``title`` may be missing (empty); ``id`` defaults to the row number.

    Returns:
        ``(docs, rejects)``: rows without text and repeated ids are rejected.

    Raises:
        FileNotFoundError: no file at ``path``. ValueError: the file is not JSON/JSONL.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no document file at {path}")
    docs: list[SearchDoc] = []
    rejects: list[Reject] = []
    seen: set[str] = set()
    for i, row in enumerate(_doc_rows(path)):
        rid = str(row.get("id", i)) if isinstance(row, dict) else str(i)
        text = row.get("text") if isinstance(row, dict) else None
        reason = (
            "missing_text"
            if not isinstance(text, str) or not text.strip()
            else "duplicate_id"
            if rid in seen
            else None
        )
        if reason:
            rejects.append(Reject(id=rid, stage="envs.SearchGym", reason=reason))
            continue
        seen.add(rid)
        docs.append(SearchDoc(rid, str(row.get("title") or ""), text.strip()))
    return docs, rejects


def _data_file(name: str) -> Any:
    return json.loads((resources.files("mimesis.envs.search") / "data" / name).read_text("utf-8"))


@cache
def shipped_docs() -> tuple[SearchDoc, ...]:
    """The shipped document collection (``data/search_docs.json``)."""
    return tuple(
        SearchDoc(r["id"], r["title"], r["text"]) for r in _data_file("search_docs.json")["docs"]
    )


@cache
def _shipped_index() -> BM25Index:
    return BM25Index(shipped_docs())


@cache
def _shipped_tasks() -> tuple[SearchTask, ...]:
    return tuple(
        SearchTask(r["id"], r["question"], tuple(r["answers"]), r["intent"], tuple(r["support"]))
        for r in _data_file("search_questions.json")["questions"]
    )


def load_userrl_tasks(path: Path) -> tuple[list[SearchTask], list[Reject]]:
    """Read UserRL's SearchGym ``questions.json`` (``[{id, question, answer}]``; ``answer`` may
    also be a list of accepted answers).

    Args:
        path: The JSON file, or a folder holding it directly or under ``SearchGym/``.

    Returns:
        ``(tasks, rejects)``; every record is in exactly one of them.

    Raises:
        FileNotFoundError: no ``questions.json`` at ``path``.
    """
    candidate = userrl_files(path, "SearchGym", ["questions.json"])[0]
    tasks: list[SearchTask] = []
    rejects: list[Reject] = []
    for i, row in enumerate(json.loads(candidate.read_text(encoding="utf-8"))):
        rid = str(row.get("id", i)) if isinstance(row, dict) else str(i)
        question = row.get("question") if isinstance(row, dict) else None
        raw = row.get("answer") if isinstance(row, dict) else None
        answers = tuple(
            str(a).strip()
            for a in (raw if isinstance(raw, list) else [raw])
            if a is not None and str(a).strip()
        )
        if not isinstance(question, str) or not question.strip() or not answers:
            rejects.append(
                Reject(id=rid, stage="envs.SearchGym", reason="missing_question_or_answer")
            )
            continue
        tasks.append(SearchTask(rid, question.strip(), answers))
    return tasks, rejects


# ----------------------------------------------------------------- environment
@register
class SearchGym(UserEnv[SearchTask]):
    """Multi-hop question answering with BM25 search over a local collection.

    Args:
        tasks: Questions to play instead of the shipped ones.
        max_turns: Agent messages per episode (searches included).
        docs: Documents to search instead of the shipped ones.
        docs_path: A file to read the documents from (see :func:`load_docs`); wins over
            ``docs``. Its rejected rows are kept in ``self.doc_rejects``.
        top_k: Documents returned per search.
        snippet_chars: Characters of each document's text shown per result.

    Raises:
        ValueError: no usable documents.
    """

    name = "SearchGym"
    split = "held_out"
    # success: the answer matches an accepted answer (the reward is 0 or 1)
    success_threshold = 1.0
    order = 8
    source = (
        "mimesis/envs/search/data/search_{docs,questions}.json (written for MIMESIS); "
        "reads UserRL questions.json and user documents"
    )

    def __init__(
        self,
        tasks: list[SearchTask] | None = None,
        max_turns: int = 12,
        docs: Sequence[SearchDoc] | None = None,
        docs_path: Path | str | None = None,
        top_k: int = 3,
        snippet_chars: int = 400,
    ) -> None:
        super().__init__(tasks, max_turns)
        self.doc_rejects: list[Reject] = []
        if docs_path is not None:
            docs, self.doc_rejects = load_docs(Path(docs_path))
        self.index = _shipped_index() if docs is None else BM25Index(docs)
        self.top_k, self.snippet_chars = top_k, snippet_chars
        self.prediction: str | None = None

    @classmethod
    def default_tasks(cls) -> list[SearchTask]:
        return list(_shipped_tasks())

    def start_episode(self) -> None:
        self.prediction = None

    def agent_prompt(self) -> str:
        return (
            f'The user asks: "{self.task.question}"\n'
            "Answer it from a collection of "
            f"{len(self.index.docs)} short documents. `[search] <keywords>` returns the "
            f"{self.top_k} best-matching documents; the question may need several searches "
            "(find one fact, then search for the next). If the question could mean more than one "
            "thing, ask the user with [action]: they know what they mean, not the answer. Give a "
            "short final answer (a name, number or date) with `[answer] <answer>`; you get one "
            f"answer. You have {self.max_turns} messages.\n\n"
            f"{action_format('search the documents: [search] <keywords>')}"
        )

    def user_goal(self) -> str:
        meaning = self.task.intent or "exactly what the question says"
        return (
            f'You asked an assistant this question: "{self.task.question}"\n'
            f"What you mean: {meaning}\n"
            "You do not know the answer and cannot look it up; if the assistant asks you for "
            "it, say you do not know. Answer questions about what you mean briefly and "
            "truthfully, and do not volunteer more than is asked."
        )

    def user_directives(self) -> list[str]:
        """Instructions of :meth:`user_goal` (drift: tests/pipeline/test_directive_copies.py checks each
        is in the goal), without the question or its meaning."""
        return [
            ("You do not know the answer and cannot look it up; if the assistant asks you for "
             "it, say you do not know."),
            ("Answer questions about what you mean briefly and truthfully, and do not volunteer "
             "more than is asked."),
        ]

    def on_search(self, query: str) -> str:
        if not query:
            return "Empty search: write keywords after [search]."
        hits = self.index.search(query, self.top_k)
        if not hits:
            return f'No documents match "{query}".'
        lines = [
            f"[{i}] {doc.title}: {doc.text[: self.snippet_chars]}"
            for i, (doc, _) in enumerate(hits, 1)
        ]
        return "\n".join(lines)

    def on_answer(self, content: str) -> tuple[str, bool]:
        self.prediction = content
        return ("Correct!" if self.score() else "Wrong answer."), True

    def score(self) -> float:
        return search_reward(self.prediction, self.task.answers)
