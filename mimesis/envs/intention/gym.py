"""IntentionGym (held out): a vague request hides details; ask the right clarifying questions.

After UserRL's IntentionGym (SalesforceAIResearch/UserRL, ``gyms/IntentionGym``, Apache-2.0) and
the MIMESIS paper's environment table. The agent sees only the user's vague request; the user
knows the missing details (each with an importance 1–3 and the user's answer). The agent asks
with ``[action]``; every message sent to the user counts as a question. It ends the episode by
summarising the clarified task with ``[answer] <summary>`` or with ``[finish]`` (the summary is
not scored). The tasks are ours (``mimesis/envs/intention/data/intention_tasks.json``: 32 tasks);
:func:`load_userrl_tasks` reads UserRL's ``all_intentions_{train,test}.json``.

Matching a question to a detail (no model): a detail's *cues* are the stems (:func:`stem`) of
the content words of its description, keywords and example inquiry, minus generic words
("prefer", "type", "kind" …) and minus the words of the request itself (every question about
"a trip to Paris" says "Paris"), unless the description has no other words. A question matches the details whose cues it shares; it covers
one of them: an uncovered one first, then the one with most shared cues, then the first listed.
A question that only matches covered details repeats one (no credit, no penalty); a question
that matches none is *unmatched*.

Reward: :func:`intention_reward` — importance-weighted coverage (weights
:data:`IMPORTANCE_WEIGHTS`, UserRL's 1.0 / 0.7 / 0.4 for importance 3 / 2 / 1) minus
:data:`UNMATCHED_PENALTY` = 0.1 per unmatched question, clipped to [0, 1].
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from mimesis.envs.base import StepResult, UserEnv, action_format
from mimesis.envs.registry import register
from mimesis.envs.turtle_judge import content_words, stem
from mimesis.envs.userrl import userrl_files
from mimesis.schemas import Reject

IMPORTANCE_WEIGHTS: dict[int, float] = {3: 1.0, 2: 0.7, 1: 0.4}
UNMATCHED_PENALTY = 0.1
# Words that appear in questions about any detail, so they cannot tell details apart.
_GENERIC_TEXT = """
prefer preference preferred type kind sort specific particular detail requirement option choice
level plan planning looking interested information would like idea important consider including
include exactly share provide specify describe user certain particularly already general across
receive
"""
_GENERIC = frozenset(stem(w) for w in _GENERIC_TEXT.split())


@dataclass(frozen=True)
class MissingDetail:
    """A detail the request leaves out.

    Attributes:
        description: What the detail is ("Trip length").
        importance: 3 (critical), 2 (important) or 1 (nice to have).
        answer: The user's answer when asked; ``""`` lets the user pick one of ``options``.
        keywords: Extra words that mark a question about this detail.
        options: Plausible answers (UserRL lists these instead of an answer).
        inquiry: An example question about the detail (UserRL's ``inquiry``); adds cues.
    """

    description: str
    importance: int
    answer: str = ""
    keywords: tuple[str, ...] = ()
    options: tuple[str, ...] = ()
    inquiry: str = ""

    def __post_init__(self) -> None:
        if self.importance not in IMPORTANCE_WEIGHTS:
            raise ValueError(f"importance {self.importance!r} is not 1, 2 or 3")


@dataclass(frozen=True)
class IntentionTask:
    """A vague ``request`` and the ``details`` the user has in mind."""

    id: str
    category: str
    request: str
    details: tuple[MissingDetail, ...]


def detail_cues(detail: MissingDetail, request: str) -> frozenset[str]:
    """Stems that mark a question about ``detail`` (see the module docstring); when the request
    uses all of them, the request's words are kept so the detail stays reachable.

    Examples:
        >>> d = MissingDetail("Trip length", 3, keywords=("how long", "days"))
        >>> sorted(detail_cues(d, "Plan a trip to Paris"))
        ['day', 'length', 'long']
    """
    requested = {stem(w) for w in content_words(request)}
    described = {stem(w) for w in content_words(detail.description)} - _GENERIC
    words = " ".join((*detail.keywords, detail.inquiry))
    cues = (described | {stem(w) for w in content_words(words)}) - _GENERIC - requested
    # "Which instrument" for "I want to play an instrument": the description is all request
    # words, so they stay (the keywords alone would miss "Which instrument do you want?").
    return frozenset(cues | described if described <= requested else cues)


def match_questions(
    questions: Sequence[str], cues: Sequence[Collection[str]]
) -> list[int | None]:
    """For each question in order, the index of the detail it covers or repeats, or ``None``.

    A question's candidates are the details sharing a cue with it; it takes an uncovered one
    first, then the one sharing most cues, then the first listed.

    Examples:
        >>> cues = [{"budget", "cost"}, {"day", "long"}]
        >>> match_questions(["What's your budget?", "How long?", "Any budget cap?", "Hi!"], cues)
        [0, 1, 0, None]
    """
    covered: set[int] = set()
    out: list[int | None] = []
    for question in questions:
        asked = {stem(w) for w in content_words(question)}
        candidates = [(i, len(asked & set(c))) for i, c in enumerate(cues) if asked & set(c)]
        if not candidates:
            out.append(None)
            continue
        best = min(candidates, key=lambda ic: (ic[0] in covered, -ic[1], ic[0]))[0]
        covered.add(best)
        out.append(best)
    return out


def intention_reward(
    importances: Sequence[int],
    matches: Sequence[int | None],
    penalty: float = UNMATCHED_PENALTY,
) -> float:
    """Importance-weighted coverage minus ``penalty`` per unmatched question, clipped to [0, 1].

    Args:
        importances: Importance (1–3) of each detail of the task.
        matches: :func:`match_questions` output: the detail each question covered, or ``None``.
        penalty: Cost of a question that matches no detail.

    Examples:
        >>> round(intention_reward([3, 2, 1], [0, None, 2]), 3)  # (1.0 + 0.4) / 2.1 - 0.1
        0.567
        >>> intention_reward([3, 2], [0, 1, 1]), intention_reward([2], [None, None])
        (1.0, 0.0)
    """
    total = sum(IMPORTANCE_WEIGHTS[i] for i in importances)
    if total <= 0:
        return 0.0
    covered = {m for m in matches if m is not None}
    gained = sum(IMPORTANCE_WEIGHTS[importances[i]] for i in covered) / total
    unmatched = sum(1 for m in matches if m is None)
    return max(0.0, min(1.0, gained - penalty * unmatched))


def _task_from_json(row: dict[str, Any]) -> IntentionTask:
    details = tuple(
        MissingDetail(str(d["description"]).strip(), int(d["importance"]),
                      str(d.get("answer") or ""), tuple(str(k) for k in d.get("keywords") or ()),
                      tuple(str(o) for o in d.get("options") or ()), str(d.get("inquiry") or ""))
        for d in row["missing_details"]
    )
    return IntentionTask(str(row["id"]), str(row.get("category") or ""), row["task"].strip(), details)


@cache
def _shipped_tasks() -> tuple[IntentionTask, ...]:
    data_path = resources.files("mimesis.envs.intention") / "data" / "intention_tasks.json"
    rows = json.loads(data_path.read_text(encoding="utf-8"))["tasks"]
    return tuple(_task_from_json(r) for r in rows)


@register
class IntentionGym(UserEnv[IntentionTask]):
    """Clarifying questions over the shipped tasks (or UserRL's).

    Args:
        tasks: Tasks to play instead of the shipped ones.
        max_turns: Agent messages per episode.
        penalty: Cost of a question that matches no detail.
    """

    name = "IntentionGym"
    split = "held_out"
    # success: every missing detail clarified and no off-target question (reward =
    # importance-weighted coverage - 0.1 per unmatched question, clipped to [0, 1])
    success_threshold = 1.0
    order = 6
    source = "mimesis/envs/intention/data/intention_tasks.json; reads UserRL all_intentions_*.json"

    def __init__(
        self,
        tasks: list[IntentionTask] | None = None,
        max_turns: int = 12,
        penalty: float = UNMATCHED_PENALTY,
    ) -> None:
        self.penalty = penalty
        super().__init__(tasks, max_turns)
        self.questions: list[str] = []
        self.summary: str | None = None

    @classmethod
    def default_tasks(cls) -> list[IntentionTask]:
        return list(_shipped_tasks())

    def start_episode(self) -> None:
        self.questions, self.summary = [], None
        self._cues = [detail_cues(d, self.task.request) for d in self.task.details]

    def matches(self) -> list[int | None]:
        """The detail each question of this episode covered or repeated (``None``: unmatched)."""
        return match_questions(self.questions, self._cues)

    def agent_prompt(self) -> str:
        return (
            f"A user sent this request: \"{self.task.request}\"\n\nIt leaves out details that the "
            "user has in mind. Before doing the task, find them out by asking the user "
            "clarifying questions with [action], one detail per question. Each detail the user "
            "cares about earns reward, more for more important ones; every message to the user "
            f"that asks about nothing they care about costs {self.penalty:g}. When you know "
            "enough, summarise the clarified task with `[answer] <summary>`, or stop with "
            f"[finish]. There is no search tool. You have {self.max_turns} messages.\n\n"
            f"{action_format('(no tool in this game)')}"
        )

    def user_goal(self) -> str:
        lines = []
        for d in self.task.details:
            known = d.answer or (
                f"pick one of: {' / '.join(d.options)}; keep that choice" if d.options
                else "decide an answer and keep it"
            )
            lines.append(f"- {d.description}: {known}")
        return (
            f"You asked an assistant: \"{self.task.request}\" You did not say these details, but "
            "you know them:\n" + "\n".join(lines) + "\nThe assistant will ask clarifying "
            "questions. Answer each one briefly and truthfully from these details, only about "
            "what was asked; do not volunteer details that were not asked about. If asked about "
            "something not on the list, say you have no preference."
        )

    def user_directives(self) -> list[str]:
        """Instructions of :meth:`user_goal` (drift: tests/pipeline/test_directive_copies.py checks each
        is in the goal), without the request or the details, and without the scripted
        'say you have no preference'."""
        return [
            "You did not say these details, but you know them:",
            *(["decide an answer and keep it"]
              if any(not d.answer and not d.options for d in self.task.details) else []),
            "The assistant will ask clarifying questions.",
            ("Answer each one briefly and truthfully from these details, only about what was "
             "asked; do not volunteer details that were not asked about."),
            "If asked about something not on the list,",
        ]

    def on_search(self, query: str) -> str:
        return "There is no search tool in this game; ask the user with [action]."

    def on_answer(self, content: str) -> tuple[str, bool]:
        self.summary = content
        return "Thanks; the request is clarified.", True

    def step(self, action: str) -> StepResult:
        """Apply one agent message; a message sent to the user is recorded as a question."""
        result = super().step(action)
        if result[4]["to_user"] is not None:
            self.questions.append(result[4]["to_user"])
        return result

    def score(self) -> float:
        importances = [d.importance for d in self.task.details]
        return intention_reward(importances, self.matches(), self.penalty)


def load_userrl_tasks(path: Path) -> tuple[list[IntentionTask], list[Reject]]:
    """Read UserRL's ``all_intentions_{train,test}.json`` (``[{id, category, task,
    missing_details: [{description, importance, inquiry, options}]}]``, importance ``"1"``–``"3"``).

    UserRL gives options instead of the user's answer, so the user picks one of them
    (:meth:`IntentionGym.user_goal`); the ``inquiry`` adds cues.

    Args:
        path: A JSON file, or a folder holding ``all_intentions_train.json`` and/or
            ``all_intentions_test.json`` directly or under ``IntentionGym/`` (train first).

    Returns:
        ``(tasks, rejects)``; every record is in exactly one of them. A record is rejected for
        no task text, no missing details, a malformed detail or an importance outside 1–3.

    Raises:
        FileNotFoundError: no such file at ``path``.
    """
    files = userrl_files(path, "IntentionGym",
                         ["all_intentions_train.json", "all_intentions_test.json"],
                         folders=("IntentionGym", ""))
    tasks: list[IntentionTask] = []
    rejects: list[Reject] = []
    for file in files:
        for i, row in enumerate(json.loads(file.read_text(encoding="utf-8"))):
            rid = str(row.get("id", f"{file.stem}-{i}")) if isinstance(row, dict) else str(i)
            reason = _userrl_problem(row)
            if reason:
                rejects.append(Reject(id=rid, stage="envs.IntentionGym", reason=reason,
                                      detail=file.name))
                continue
            tasks.append(_task_from_json({**row, "id": rid}))
    return tasks, rejects


def _userrl_problem(row: Any) -> str:
    """Why a UserRL record cannot become a task (``""``: it can)."""
    if not isinstance(row, dict) or not str(row.get("task") or "").strip():
        return "missing_task"
    details = row.get("missing_details")
    if not isinstance(details, list) or not details:
        return "no_missing_details"
    for d in details:
        if not isinstance(d, dict) or not str(d.get("description") or "").strip():
            return "bad_detail"
        if str(d.get("importance", "")).strip() not in ("1", "2", "3"):
            return "bad_importance"
        if not isinstance(d.get("options", []), list):
            return "bad_detail"
    return ""
