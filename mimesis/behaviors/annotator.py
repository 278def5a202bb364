"""The annotator: private reasoning, scenario goals, end reasoning and (optionally) behaviour labels
from a chat model, with checks and rule-based fallbacks.

One ``Annotator`` wraps one backend (``mimesis.behaviors.backends``): a local HF model or an
OpenAI-compatible endpoint. Every method takes *all* items of its kind at once, so the stage makes
one batched backend call per kind of prompt. Every returned text carries its producer:
``annotator:<backend>:<model>`` when the model's output passed the checks, ``rules:fallback``
when it did not (empty, not first/second person, off-topic, or a copy of the user's words).
Prompt templates are data: ``mimesis/prompts/annotate_{reasoning,goal,end,behaviors}.md``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from mimesis.behaviors import fallbacks, parsing
from mimesis.behaviors.backends import ChatBackend
from mimesis.behaviors.catalog import BEHAVIORS
from mimesis.behaviors.lexicon import content_stems
from mimesis.prompts import load_prompt
from mimesis.schemas import Messages
from mimesis.text import clip

KINDS = ("reasoning", "goal", "end", "behaviors")
_SECTION = re.compile(r"<!--\s*(system|user|prefill)\s*-->\n?")
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


@dataclass(frozen=True)
class AnnotatorParams:
    """Settings of the annotator (params.yaml ``label.annotator``)."""

    backend: str = "hf"  # hf (local model) | openai (OpenAI-compatible endpoint) | none (rules only)
    model: str = "smollm2-135m"  # hf: load_base name or local folder; openai: the model id
    base_url: str = ""  # openai: endpoint base URL ("" = api.openai.com)
    api_key_env: str = "OPENAI_API_KEY"  # openai: environment variable holding the API key
    timeout_s: float = 60.0  # openai: per-request timeout
    max_retries: int = 3  # openai: client retries with backoff
    concurrency: int = 4  # openai: requests in flight
    temperature: float = 0.0  # 0 = greedy (deterministic)
    repetition_penalty: float = 1.0  # hf only
    dtype: str = "float32"  # hf only: float32 on CPU, bfloat16 on GPU
    device_map: str = ""  # hf only: "" = CPU, "auto" on GPU
    stop_at_sentence_end: bool = True  # hf only: a row ends at its first ".", "!" or "?"
    batch_size: int = 16  # hf only
    max_prompt_tokens: int = 320  # hf only: longer prompts keep their tail
    utterance_chars: int = 240  # clip of the user turn inside prompts
    context_chars: int = 0  # clip of the agent reply shown before a turn (0 = not shown)
    reasoning_max_new_tokens: int = 30
    goal_max_new_tokens: int = 30
    end_max_new_tokens: int = 24
    behaviors_max_new_tokens: int = 16
    label_behaviors: bool = False  # ask the model for behaviour ids too (weak on small models)
    goal_max_common_run: int = 6  # a goal sharing this many consecutive words with turn 1 copies
    goal_max_jaccard: float = 0.5  # ... or this content-word Jaccard with turn 1
    reasoning_max_common_run: int = 12  # a reasoning repeating this much of its turn is a copy

    def __post_init__(self) -> None:
        if self.backend not in ("hf", "openai", "none"):
            raise ValueError(f"annotator.backend {self.backend!r} not in hf|openai|none")
        if self.backend == "openai" and not self.model:
            raise ValueError("annotator.model must name the endpoint's model")
        if min(self.reasoning_max_new_tokens, self.goal_max_new_tokens,
               self.end_max_new_tokens, self.behaviors_max_new_tokens, self.batch_size) < 1:
            raise ValueError("annotator token limits and batch_size must be >= 1")
        if self.goal_max_common_run < 1 or not 0 < self.goal_max_jaccard <= 1:
            raise ValueError("goal_max_common_run >= 1 and 0 < goal_max_jaccard <= 1 required")


@dataclass(frozen=True)
class TurnView:
    """A user turn as the annotator sees it (``labels``: its rule behaviour ids and traits)."""

    utterance: str
    prev_agent: str = ""
    labels: tuple[str, ...] = ()
    first: bool = False


@dataclass(frozen=True)
class ConversationView:
    """A conversation as the annotator sees it: the user turns and the last exchange."""

    user_turns: tuple[str, ...]
    last_agent: str = ""
    last_labels: tuple[str, ...] = ()


@dataclass(frozen=True)
class Produced:
    """A text and the producer that made it."""

    text: str
    producer: str


@dataclass(frozen=True)
class PromptTemplate:
    """A chat prompt read from ``mimesis/prompts/<name>.md`` (sections ``<!-- system -->``,
    ``<!-- user -->``, ``<!-- prefill -->``; other comments are notes for humans)."""

    name: str
    source: str
    system: str
    user: str
    prefill: str

    @classmethod
    def load(cls, name: str) -> PromptTemplate:
        source = load_prompt(name)
        parts = _SECTION.split(source)
        sections = {parts[i]: _COMMENT.sub("", parts[i + 1]).strip()
                    for i in range(1, len(parts) - 1, 2)}
        if "user" not in sections:
            raise ValueError(f"prompt {name}: no <!-- user --> section")
        return cls(name, source, sections.get("system", ""), sections["user"],
                   sections.get("prefill", ""))

    def messages(self, **values: str) -> Messages:
        out = [{"role": "system", "content": self.system}] if self.system else []
        return out + [{"role": "user", "content": self.user.format(**values)}]


class Annotator:
    """Reasoning, goals and end reasoning (and optionally behaviour ids) for many items at once.

    Args:
        backend: The chat backend, or ``None`` for rules only (every text is a fallback).
        params: Annotator settings.
    """

    def __init__(self, backend: ChatBackend | None, params: AnnotatorParams):
        self.backend, self.params = backend, params
        self.templates = {k: PromptTemplate.load(f"annotate_{k}") for k in KINDS}

    @property
    def producer(self) -> str:
        """Producer id of model outputs, e.g. ``annotator:hf:smollm2-135m``."""
        return f"annotator:{self.backend.name}" if self.backend else fallbacks.FALLBACK

    def _complete(self, kind: str, values: list[dict[str, str]], max_new_tokens: int) -> list[str]:
        if self.backend is None or not values:
            return [""] * len(values)
        template = self.templates[kind]
        prompts = [template.messages(**v) for v in values]
        prefill = template.prefill if self.backend.supports_prefill else ""
        return self.backend.complete(prompts, [prefill] * len(prompts), max_new_tokens,
                                     desc=f"annotate {kind}")

    def _context(self, prev_agent: str) -> str:
        if not prev_agent or self.params.context_chars <= 0:
            return ""
        return f'The AI assistant had written: "{clip(prev_agent, self.params.context_chars)}"\n'

    def _turn_values(self, turn: TurnView) -> dict[str, str]:
        return {"utterance": clip(turn.utterance, self.params.utterance_chars),
                "context": self._context(turn.prev_agent)}

    def reasonings(self, turns: Sequence[TurnView]) -> list[Produced]:
        """First-person, 1–2 sentence thought before each turn (model output or fallback)."""
        raw = self._complete("reasoning", [self._turn_values(t) for t in turns],
                             self.params.reasoning_max_new_tokens)
        out = []
        for turn, text in zip(turns, raw, strict=True):
            text = parsing.clean_first_person(text)
            ok = text and parsing.relevant(text, turn.utterance, turn.prev_agent) and (
                parsing.longest_common_run(text, turn.utterance)
                < self.params.reasoning_max_common_run)
            out.append(Produced(text, self.producer) if ok else Produced(
                fallbacks.fallback_reasoning(turn.utterance, turn.labels, turn.first),
                fallbacks.FALLBACK))
        return out

    def is_copy(self, goal: str, first_message: str) -> bool:
        """True when ``goal`` copies the first user message (see ``parsing.copies``)."""
        return parsing.copies(goal, first_message, self.params.goal_max_common_run,
                              self.params.goal_max_jaccard)

    def goals(self, convs: Sequence[ConversationView]) -> list[Produced | None]:
        """Second-person scenario goal per conversation, never a copy of the first user message;
        ``None`` when neither the model nor the abstraction gives an acceptable goal."""
        def listing(c: ConversationView) -> str:
            # The opening and one follow-up: enough for the goal, short enough for a small model.
            return "\n".join(f'"{clip(u, self.params.utterance_chars // 2)}"'
                             for u in c.user_turns[:2])

        raw = self._complete("goal", [{"messages": listing(c)} for c in convs],
                             self.params.goal_max_new_tokens)
        out: list[Produced | None] = []
        for conv, text in zip(convs, raw, strict=True):
            first = conv.user_turns[0]
            text = parsing.clean_goal(text)
            if text and parsing.relevant(text, *conv.user_turns) and not self.is_copy(text, first):
                out.append(Produced(text, self.producer))
                continue
            goal = fallbacks.abstract_goal(conv.user_turns, lambda g, f=first: self.is_copy(g, f))
            out.append(Produced(goal, fallbacks.FALLBACK) if goal else None)
        return out

    def end_reasonings(self, convs: Sequence[ConversationView]) -> list[Produced]:
        """First-person reason for stopping after the last agent reply, per conversation."""
        values = [{"last_user": clip(c.user_turns[-1], self.params.utterance_chars // 2),
                   "last_agent": clip(c.last_agent, self.params.utterance_chars // 2)}
                  for c in convs]
        raw = self._complete("end", values, self.params.end_max_new_tokens)
        opening = content_stems(self.templates["end"].prefill)
        out = []
        for conv, text in zip(convs, raw, strict=True):
            text = parsing.clean_first_person(text)
            # "I am done because I am too." says nothing: a reason needs a content word.
            ok = text and content_stems(text) - opening
            out.append(Produced(text, self.producer) if ok else Produced(
                fallbacks.fallback_end_reasoning(conv.last_labels), fallbacks.FALLBACK))
        return out

    def behaviors(self, turns: Sequence[TurnView]) -> list[list[str]] | None:
        """Behaviour ids per turn from the model (valid ids only), or ``None`` when the params
        do not ask for them or there is no backend."""
        if not self.params.label_behaviors or self.backend is None:
            return None
        catalog = "\n".join(f"{b.id}: {b.definition}" for b in BEHAVIORS)
        values = [{**self._turn_values(t), "catalog": catalog} for t in turns]
        raw = self._complete("behaviors", values, self.params.behaviors_max_new_tokens)
        return [parsing.parse_behavior_ids(text) for text in raw]


def make_annotator(params: AnnotatorParams, seed: int = 0) -> Annotator:
    """Build the annotator ``params`` describe (loads the local model for ``hf``).

    Raises:
        AnnotatorError: ``openai`` without an API key in ``params.api_key_env``.
        ValueError: ``hf`` with an unknown model name.
    """
    from mimesis.behaviors.backends import HFBackend, OpenAIBackend, backend_name

    if params.backend == "none":
        return Annotator(None, params)
    if params.backend == "openai":
        backend: ChatBackend = OpenAIBackend(
            params.base_url, params.model, params.api_key_env, timeout_s=params.timeout_s,
            max_retries=params.max_retries, concurrency=params.concurrency,
            temperature=params.temperature)
    else:
        from mimesis.models.base import load_base

        model, tokenizer = load_base(params.model, dtype=params.dtype,
                                     device_map=params.device_map or None)
        backend = HFBackend.from_model(
            model, tokenizer, f"hf:{backend_name(params.model)}",
            temperature=params.temperature, batch_size=params.batch_size,
            max_prompt_tokens=params.max_prompt_tokens,
            repetition_penalty=params.repetition_penalty, seed=seed,
            stop_texts=(".", "!", "?") if params.stop_at_sentence_end else ())
    return Annotator(backend, params)
