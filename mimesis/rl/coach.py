"""The CSD coach: a short note on what the user needs next, and the filter that keeps it honest.

For agent turn ``k ≥ 1`` that answers a user reply, the coach reads the public history the agent
saw before turn ``k`` and the simulator's private reasoning so far (never anything later), and
writes at most 3 sentences — forward-looking, about what to ask or do next — or ``NONE``. The
coach is by default the frozen simulator itself, prompted (``mimesis/prompts/coach.md`` and
``coach_request.md``); any OpenAI-compatible endpoint can play it instead.

Every note request ends as one :class:`NoteRecord` with a status: ``kept`` (used by CSD),
``none`` (the coach wrote ``NONE``), ``empty`` (nothing left after stripping the coach's own
``<think>`` reasoning) or ``leak`` (:func:`find_leaks` found private-only content; reasons kept).

What the coach reads of the private channel is ``CoachParams.private``: ``reasoning`` (the paper,
Stage II: the simulator's private reasoning; a turn without any gets no note) or
``reasoning_and_goal`` (the scenario goal the simulator was given, then its reasoning). The goal
is as private as the reasoning (the leakage filter always counts it as private); reading it keeps
CSD coached when the simulator seldom writes reasoning — the CPU default's 135M simulator left it
empty on 47 of 49 user turns of one ``make run``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field

from mimesis.prompts import load_prompt
from mimesis.schemas import Messages
from mimesis.simulator.parsing import parse_turn

GenerateFn = Callable[[list[Messages]], list[str]]
NoteStatus = Literal["kept", "none", "empty", "leak"]
PrivateView = Literal["reasoning", "reasoning_and_goal"]
MAX_SENTENCES = 3
_LABELS = {"assistant": "AGENT", "user": "USER", "tool": "TOOL", "system": "SYSTEM"}
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_NONE = re.compile(r"^\W*none\b", re.IGNORECASE)
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_CAPITALISED = re.compile(r"\b[A-Z][A-Za-z]{2,}\b")
_LOWER_WORD = re.compile(r"\b[a-z][a-z]+\b")


@dataclass(frozen=True)
class CoachParams:
    """Who coaches and how (params.yaml ``distill_agent.coach``)."""

    backend: str = "simulator"  # simulator (the frozen user model, prompted) | openai
    model: str = ""  # openai: model id
    base_url: str = ""  # openai: endpoint ("" = api.openai.com)
    api_key_env: str = "OPENAI_API_KEY"  # openai: environment variable holding the key
    timeout_s: float = 60.0  # openai: per request
    max_retries: int = 3  # openai: client retries (429, 5xx, connection)
    concurrency: int = 4  # openai: requests in flight
    temperature: float = 0.0  # 0 = greedy
    max_new_tokens: int = 48  # per note (the coach's own <think> included, then stripped)
    max_notes_per_episode: int = 2  # first N eligible turns of an episode get a note request
    max_history_chars: int = 1500  # tail of the public history shown to the coach
    max_message_chars: int = 400  # clip of each message inside that history
    leak_ngram: int = 4  # word n-gram length of the quote check
    private: PrivateView = "reasoning_and_goal"  # | reasoning (the paper); see the module doc

    def __post_init__(self) -> None:
        if self.backend not in ("simulator", "openai"):
            raise ValueError("coach.backend must be simulator or openai")
        if self.backend == "openai" and not self.model:
            raise ValueError("coach.model is required with backend openai")
        if min(self.max_new_tokens, self.max_notes_per_episode, self.leak_ngram) < 1:
            raise ValueError("coach: max_new_tokens, max_notes_per_episode, leak_ngram >= 1")
        if self.private not in ("reasoning", "reasoning_and_goal"):
            raise ValueError("coach.private must be reasoning or reasoning_and_goal")


class NoteRequest(BaseModel):
    """One note to write: the coach's chat and the texts the leakage filter compares."""

    episode: int
    turn: int
    scenario_id: str
    messages: list[dict[str, str]]
    public: list[str]
    private: list[str]


class NoteRecord(BaseModel):
    """What became of one note request (``notes.jsonl`` row)."""

    step: int
    episode: int
    turn: int
    scenario_id: str
    coach: str
    raw: str
    note: str
    status: NoteStatus
    reasons: list[str] = Field(default_factory=list)


def render_history(messages: Sequence[dict[str, str]], max_chars: int, max_message_chars: int
                   ) -> str:
    """``LABEL: text`` lines (the first message is the task), keeping the last ``max_chars``."""
    lines = []
    for i, m in enumerate(messages):
        label = "TASK" if i == 0 and m["role"] == "user" else _LABELS.get(m["role"], m["role"])
        text = " ".join(m["content"].split())
        if len(text) > max_message_chars:
            text = text[:max_message_chars] + " …"
        lines.append(f"{label}: {text}")
    history = "\n".join(lines)
    return history if len(history) <= max_chars else "… " + history[-max_chars:]


def note_requests(episodes: Sequence[Any], p: CoachParams) -> list[NoteRequest]:
    """Requests for the first ``max_notes_per_episode`` turns ``k ≥ 1`` of each episode that
    follow a user reply and have private context (reasoning so far, or with
    ``p.private == "reasoning_and_goal"`` the scenario goal); the coach sees nothing after turn
    ``k − 1``.

    Args:
        episodes: :class:`~mimesis.rollout.records.Episode` records, indexed by position.
        p: Coach settings.
    """
    system, template = load_prompt("coach").strip(), load_prompt("coach_request").strip()
    requests = []
    for e_idx, ep in enumerate(episodes):
        assistant = [i for i, m in enumerate(ep.messages) if m["role"] == "assistant"]
        for k in range(1, min(len(ep.turns), len(assistant))):
            if ep.turns[k - 1].obs_source != "user":
                continue
            private = [t.user_reasoning for t in ep.turns[:k] if t.user_reasoning]
            shown = [f"- {r}" for r in private]
            if p.private == "reasoning_and_goal" and ep.scenario.goal.strip():
                goal = " ".join(ep.scenario.goal.split())[:p.max_history_chars // 2]
                shown.insert(0, f"- (what the user set out to do) {goal}")
            if not shown:
                continue
            public = ep.messages[:assistant[k]]
            content = template.format(
                history=render_history(public, p.max_history_chars, p.max_message_chars),
                private="\n".join(shown))
            requests.append(NoteRequest(
                episode=e_idx, turn=k, scenario_id=ep.scenario_id,
                messages=[{"role": "system", "content": system},
                          {"role": "user", "content": content}],
                public=[m["content"] for m in public], private=[*private, ep.scenario.goal]))
            if sum(r.episode == e_idx for r in requests) >= p.max_notes_per_episode:
                break
    return requests


def parse_note(raw: str) -> tuple[str, NoteStatus]:
    """The note in a coach output: reasoning stripped, ``NONE`` recognised, at most 3 sentences.

    Examples:
        >>> parse_note("<think>hm</think>Ask about the budget. Then propose. Then confirm. Bye.")
        ('Ask about the budget. Then propose. Then confirm.', 'kept')
        >>> parse_note("NONE.")
        ('', 'none')
    """
    text = " ".join(parse_turn(raw).utterance.split())
    if not text:
        return "", "empty"
    if _NONE.match(text):
        return "", "none"
    return " ".join(_SENTENCE_END.split(text)[:MAX_SENTENCES]), "kept"


def _ngrams(words: list[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def find_leaks(note: str, private: Sequence[str], public: Sequence[str], ngram: int = 4
               ) -> list[str]:
    """Private-only content that ``note`` states; empty when the note is clean.

    Three checks, each against text in the private channel (reasoning, hidden goal) and *absent*
    from the public history the agent saw:

    - ``number:<n>`` — a number of the note;
    - ``entity:<Word>`` — a capitalised word of the note that is never written in lower case in
      either channel (a proper noun: "Seoul", not a sentence-initial "Ask");
    - ``ngram:<words>`` — a word ``ngram``-gram of the note (a quote of the private text).

    Examples:
        >>> find_leaks("Ask about the budget.", ["budget is $250"], ["Plan my trip."])
        []
        >>> find_leaks("Offer something under 250.", ["budget is $250"], ["Plan my trip."])
        ['number:250']
    """
    priv, pub = " ".join(private), " ".join(public)
    reasons = []
    pub_numbers, priv_numbers = set(_NUMBER.findall(pub)), set(_NUMBER.findall(priv))
    reasons += [f"number:{n}" for n in dict.fromkeys(_NUMBER.findall(note))
                if n in priv_numbers and n not in pub_numbers]
    lower = set(_LOWER_WORD.findall(priv + " " + pub))
    pub_words = set(_WORD.findall(pub.lower()))
    priv_words = set(_WORD.findall(priv.lower()))
    for word in dict.fromkeys(_CAPITALISED.findall(note)):
        w = word.lower()
        if w in priv_words and w not in pub_words and w not in lower:
            reasons.append(f"entity:{word}")
    note_words = _WORD.findall(note.lower())
    pub_grams = _ngrams(_WORD.findall(pub.lower()), ngram)
    priv_grams = _ngrams(_WORD.findall(priv.lower()), ngram)
    reasons += [f"ngram:{' '.join(g)}" for g in sorted(_ngrams(note_words, ngram))
                if g in priv_grams and g not in pub_grams]
    return reasons


class Coach:
    """Writes and filters notes for a batch of episodes with one batched ``generate_fn`` call.

    Args:
        generate_fn: ``batch of chats -> texts`` (one completion per chat, in order).
        name: Recorded with every note (``simulator:<run>``, ``openai:<model>``).
        params: Coach settings.
    """

    def __init__(self, generate_fn: GenerateFn, name: str, params: CoachParams) -> None:
        self.generate_fn, self.name, self.params = generate_fn, name, params

    def notes(self, episodes: Sequence[Any], step: int) -> list[NoteRecord]:
        """One :class:`NoteRecord` per note request of ``episodes`` (see the module docstring)."""
        requests = note_requests(episodes, self.params)
        raws = self.generate_fn([r.messages for r in requests]) if requests else []
        if len(raws) != len(requests):
            raise ValueError(f"coach returned {len(raws)} notes for {len(requests)} requests")
        records = []
        for req, raw in zip(requests, raws, strict=True):
            note, status = parse_note(raw)
            reasons = find_leaks(note, req.private, req.public, self.params.leak_ngram) \
                if status == "kept" else []
            records.append(NoteRecord(
                step=step, episode=req.episode, turn=req.turn, scenario_id=req.scenario_id,
                coach=self.name, raw=raw, note=note if not reasons else "",
                status="leak" if reasons else status, reasons=reasons))
        return records


def make_coach(p: CoachParams, sim_model, sim_tokenizer, sim_name: str, seed: int) -> Coach:
    """The coach of ``p``: the frozen simulator prompted (default) or an OpenAI-compatible API.

    Raises:
        mimesis.behaviors.backends.AnnotatorError: ``openai`` without an API key.
    """
    if p.backend == "openai":
        from mimesis.behaviors.backends import OpenAIBackend

        api = OpenAIBackend(p.base_url, p.model, p.api_key_env, timeout_s=p.timeout_s,
                            max_retries=p.max_retries, concurrency=p.concurrency,
                            temperature=p.temperature)
        return Coach(lambda batch: api.complete(batch, [""] * len(batch), p.max_new_tokens,
                                                "coach"), api.name, p)
    from mimesis.models.engine.sampling import SamplingParams, TokenSampler

    sampler = TokenSampler(sim_model, sim_tokenizer, SamplingParams(
        temperature=p.temperature, max_new_tokens=p.max_new_tokens, cache_entries=0), seed=seed)
    return Coach(sampler.chat, f"simulator:{sim_name}", p)
