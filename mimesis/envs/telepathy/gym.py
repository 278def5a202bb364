"""TelepathyGym (held out): guess the entity the user is thinking of with yes/no questions.

After UserRL's TelepathyGym (SalesforceAIResearch/UserRL, ``gyms/TelepathyGym``, Apache-2.0) and
the MIMESIS paper's environment table. The entity set is ours
(``mimesis/envs/telepathy/data/telepathy_entities.json``: 297 entities in 11 categories, each with accepted
names and the facts the user knows); :func:`load_userrl_tasks` reads UserRL's
``all_entities_refined.json`` instead. The agent is told the category (as in UserRL), asks with
``[action]`` and guesses once with ``[answer] <name>``.

Guesses are judged without a model: a guess is correct when, after normalisation (case,
punctuation, articles, lead-ins such as "is it", a plural ``s``), it equals the entity's name
or one of its aliases. UserRL asks an LLM judge instead; exact matching is stricter but
deterministic and free.

Reward: :func:`telepathy_reward` — ``1 − 0.5 · turns_used / max_turns`` for a correct guess
(``turns_used`` counts the guessing message), 0 otherwise; in (0.5, 1).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

from mimesis.envs.base import UserEnv, action_format
from mimesis.envs.registry import register
from mimesis.envs.userrl import userrl_files
from mimesis.schemas import Reject

_LEAD_INS = (
    "i think",
    "i guess",
    "my guess is",
    "my answer is",
    "the answer is",
    "it is",
    "it s",
    "its",
    "is it",
    "you are thinking of",
    "you re thinking of",
    "a",
    "an",
    "the",
)


@dataclass(frozen=True)
class TelepathyTask:
    """An entity to guess: ``name`` and ``aliases`` are accepted guesses; ``description`` is
    what the user knows about it."""

    id: str
    name: str
    category: str
    description: str
    aliases: tuple[str, ...] = ()


def normalize_guess(text: str) -> str:
    """Lower-case, drop punctuation, lead-ins and articles; ``"Is it a Lion?"`` → ``"lion"``."""
    words = re.sub(r"[^a-z0-9]+", " ", text.lower()).split()
    stripped = True
    while stripped:
        stripped = False
        for lead in _LEAD_INS:
            n = len(lead.split())
            if words[:n] == lead.split() and len(words) > n:
                words, stripped = words[n:], True
    return " ".join(words)


def guess_matches(guess: str, names: tuple[str, ...]) -> bool:
    """True when ``guess`` names one of ``names`` (see :func:`normalize_guess`; a trailing
    plural ``s`` is ignored on both sides).

    Examples:
        >>> guess_matches("Is it a lion?", ("Lion",)), guess_matches("sea lion", ("Lion",))
        (True, False)
        >>> guess_matches("grapes", ("Grapes", "grape")), guess_matches("", ("Lion",))
        (True, False)
    """

    def forms(text: str) -> set[str]:
        norm = normalize_guess(text)
        return {norm, norm.removesuffix("s")} - {""}

    wanted = set().union(*(forms(n) for n in names)) if names else set()
    return bool(forms(guess) & wanted)


def telepathy_reward(correct: bool, turns_used: int, max_turns: int) -> float:
    """``1 − 0.5 · turns_used / max_turns`` for a correct guess, else 0.0.

    Args:
        correct: Whether the final guess named the entity.
        turns_used: Agent messages used, the guess included (clipped to 1..max_turns).
        max_turns: The episode's turn limit.

    Examples:
        >>> telepathy_reward(True, 5, 20), telepathy_reward(True, 20, 20)
        (0.875, 0.5)
        >>> telepathy_reward(False, 3, 20)
        0.0
    """
    if not correct:
        return 0.0
    used = min(max(turns_used, 1), max_turns)
    return 1.0 - 0.5 * used / max_turns


def category_phrase(category: str) -> str:
    """``famous_place`` → ``a famous place``; ``animal`` → ``an animal``."""
    words = category.replace("_", " ").strip()
    return f"{'an' if words[:1].lower() in 'aeiou' else 'a'} {words}"


@cache
def _shipped_tasks() -> tuple[TelepathyTask, ...]:
    data_path = resources.files("mimesis.envs.telepathy") / "data" / "telepathy_entities.json"
    rows = json.loads(data_path.read_text(encoding="utf-8"))["entities"]
    return tuple(
        TelepathyTask(r["id"], r["name"], r["category"], r["description"], tuple(r["aliases"]))
        for r in rows
    )


@register
class TelepathyGym(UserEnv[TelepathyTask]):
    """Twenty-questions style guessing over the shipped entity set (or UserRL's).

    Args:
        tasks: Entities to play instead of the shipped ones.
        max_turns: Agent messages per episode.
        reveal_category: Tell the agent the entity's category (UserRL does).
    """

    name = "TelepathyGym"
    split = "held_out"
    # success: the guess is right (a right guess scores 1 - 0.5*turns/max_turns >= 0.5, a
    # wrong one 0)
    success_threshold = 0.5
    order = 7
    source = "mimesis/envs/telepathy/data/telepathy_entities.json; reads UserRL all_entities_refined.json"

    def __init__(
        self,
        tasks: list[TelepathyTask] | None = None,
        max_turns: int = 20,
        reveal_category: bool = True,
    ) -> None:
        self.reveal_category = reveal_category
        super().__init__(tasks, max_turns)
        self.guess: str | None = None

    @classmethod
    def default_tasks(cls) -> list[TelepathyTask]:
        return list(_shipped_tasks())

    def start_episode(self) -> None:
        self.guess = None

    def agent_prompt(self) -> str:
        what = category_phrase(self.task.category) if self.reveal_category else "something"
        return (
            f"The user is thinking of {what}. Find out what it is by asking yes/no questions "
            "with [action]; the user answers only Yes, No or Unknown. When you know, guess "
            "with `[answer] <name>` (the name only); you get one guess, and fewer messages "
            f"score higher. There is no search tool. You have {self.max_turns} messages.\n\n"
            f"{action_format('(no tool in this game)')}"
        )

    def user_goal(self) -> str:
        return (
            f"You are thinking of {self.task.name} ({self.task.description}). The agent is trying "
            "to guess it by asking yes/no questions. Answer each question only with Yes, No or "
            "Unknown (when it cannot be told or does not apply), truthfully for "
            f"{self.task.name}. Never say the name and give no other hints. If the agent's "
            "message is not a yes/no question, reply: Please ask a yes/no question."
        )

    def user_directives(self) -> list[str]:
        """Instructions of :meth:`user_goal` (drift: tests/pipeline/test_directive_copies.py checks each
        is in the goal), without the name or description, and without the scripted reply."""
        return [
            "The agent is trying to guess it by asking yes/no questions.",
            ("Answer each question only with Yes, No or Unknown (when it cannot be told or does "
             "not apply), truthfully for"),
            "Never say the name and give no other hints.",
            "If the agent's message is not a yes/no question, reply:",
        ]

    def on_search(self, query: str) -> str:
        return "There is no search tool in this game; ask the user yes/no questions with [action]."

    def on_answer(self, content: str) -> tuple[str, bool]:
        self.guess = content
        verdict = "Correct!" if self._correct() else "Wrong: that is not what the user had in mind."
        return verdict, True

    def _correct(self) -> bool:
        return self.guess is not None and guess_matches(
            self.guess, (self.task.name, *self.task.aliases)
        )

    def score(self) -> float:
        return telepathy_reward(self._correct(), self.turn, self.max_turns)


def load_userrl_tasks(path: Path) -> tuple[list[TelepathyTask], list[Reject]]:
    """Read UserRL's ``all_entities_refined.json`` (``[{id, title, target_entity, category}]``).

    ``title`` becomes the accepted name; ``target_entity`` (``"Lion - a large wild cat, …"``)
    minus its leading ``"<title> - "`` becomes the description.

    Args:
        path: The JSON file, or a folder holding it directly or under ``TelepathyGym/``.

    Returns:
        ``(tasks, rejects)``; every record is in exactly one of them.

    Raises:
        FileNotFoundError: no ``all_entities_refined.json`` at ``path``.
    """
    candidate = userrl_files(path, "TelepathyGym", ["all_entities_refined.json"])[0]
    tasks: list[TelepathyTask] = []
    rejects: list[Reject] = []
    for i, row in enumerate(json.loads(candidate.read_text(encoding="utf-8"))):
        if not isinstance(row, dict) or not all(
            isinstance(row.get(k), str) and row[k].strip() for k in ("title", "target_entity")
        ):
            rejects.append(
                Reject(
                    id=str(row.get("id", i)) if isinstance(row, dict) else str(i),
                    stage="envs.TelepathyGym",
                    reason="missing_title_or_entity",
                )
            )
            continue
        title, entity = row["title"].strip(), row["target_entity"].strip()
        head, sep, rest = entity.partition(" - ")
        description = rest.strip() if sep and head.strip() == title else entity
        tasks.append(
            TelepathyTask(
                str(row.get("id", i)), title, str(row.get("category", "thing")), description
            )
        )
    return tasks, rejects
