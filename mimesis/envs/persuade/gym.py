"""PersuadeGym (train): shift the user's stance on a statement through argument.

After UserRL's PersuadeGym (SalesforceAIResearch/UserRL, ``gyms/PersuadeGym``, Apache-2.0) and the
MIMESIS paper's environment table. The user holds a stance on a statement on a 1–7 agreement
scale (:data:`SCALE`: 1 strongly disagree … 7 strongly agree), with a persona and reasons; both
are in the user's private scenario. The agent is told the statement and the direction to move
the user, argues with ``[action]`` and asks the user where they now stand; it ends the episode
with ``[finish]`` (``[answer]`` ends it too; its content is not shown to the user). The
statements are ours (``mimesis/envs/persuade/data/persuade_statements.json``: 32 statements);
:func:`load_userrl_tasks` reads UserRL's ``persuasion_multiturn`` parquet tables.

The env reads the stance the user states in each reply (:func:`parse_stance`); the user's last
stated stance is their final stance, and the starting stance is the scenario's (what the user
says before being asked does not move the baseline).

Reward: :func:`persuade_reward` — the shift of the final stance in the asked direction divided
by the room the starting stance leaves in that direction, clipped to [−1, 1]: 1 moves the user
all the way, 0 not at all (or no stance ever stated), negative when the user moved the other way.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from mimesis.envs.base import StepResult, UserEnv, action_format
from mimesis.envs.registry import register
from mimesis.envs.userrl import userrl_files
from mimesis.schemas import Reject

if TYPE_CHECKING:
    import random
    from collections.abc import Iterator

    from mimesis.envs.facts import Exchange, Fact

Direction = Literal["agree", "disagree"]
SCALE: dict[int, str] = {
    1: "strongly disagree",
    2: "disagree",
    3: "somewhat disagree",
    4: "neutral",
    5: "somewhat agree",
    6: "agree",
    7: "strongly agree",
}
_HEDGE = r"(?:somewhat|partly|partially|slightly|mildly|kind of|sort of|tend to|lean(?:ing)? to)"
# Word forms of the scale, longest first: at one position the first alternative that matches wins.
_WORD_FORMS: tuple[tuple[str, int], ...] = (
    (r"neither agree nor disagree|neutral|undecided|on the fence", 4),
    (r"(?:strongly|completely|totally|fully|entirely|absolutely) disagree", 1),
    (r"(?:strongly|completely|totally|fully|entirely|absolutely|wholeheartedly) agree", 7),
    (rf"{_HEDGE} disagree", 3),
    (rf"{_HEDGE} agree", 5),
    (r"(?:do not|don't|dont|can't|cannot|can not) (?:really |quite )?agree", 2),
    (r"disagree", 2),
    (r"agree", 6),
)
_WORDS = re.compile(
    "|".join(rf"\b(?P<w{i}>{pattern})\b" for i, (pattern, _) in enumerate(_WORD_FORMS)),
    re.IGNORECASE,
)
# Numbers count only in a stance statement: "5/7", "5 out of 7", or after a stance cue.
_NUMBERS = re.compile(
    r"\b(?P<a>[1-7])\s*(?:/|out of)\s*7\b"
    r"|(?:stance|rating|score|agreement|i'?d say|i would say|i'?m (?:now |still )?(?:at|a)|"
    r"i am (?:now |still )?(?:at|a)|put (?:myself|me|it) at|rate (?:it|myself|this)(?: as| at)?)"
    r"(?:\s+(?:is|now|would be|of))*\s*[:=\-]?\s*(?:a |an )?(?P<b>[1-7])\b(?![.,]\d)",
    re.IGNORECASE,
)
_BARE_NUMBER = re.compile(r"\s*([1-7])\s*[.!]?\s*")


@dataclass(frozen=True)
class PersuadeTask:
    """A statement, the user's starting stance on it (1–7), the direction the agent must move
    the user (``agree``: towards 7, ``disagree``: towards 1), and the user's persona and reasons.

    Raises:
        ValueError: a stance outside 1–7, an unknown direction, or a starting stance already at
            the end the agent must reach.
    """

    id: str
    statement: str
    initial_stance: int
    direction: Direction
    persona: str
    reasons: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.initial_stance not in SCALE:
            raise ValueError(f"{self.id}: initial_stance {self.initial_stance} is not in 1..7")
        if self.direction not in ("agree", "disagree"):
            raise ValueError(f"{self.id}: direction {self.direction!r} is not agree|disagree")
        if stance_room(self.initial_stance, self.direction) == 0:
            raise ValueError(f"{self.id}: stance {self.initial_stance} leaves no room to move "
                             f"towards {self.direction}")


def stance_room(initial: int, direction: Direction) -> int:
    """Scale points between ``initial`` and the end of the scale the agent aims for."""
    return 7 - initial if direction == "agree" else initial - 1


def parse_stance(text: str) -> int | None:
    """The stance (1–7) a user reply states, or ``None``.

    Numbers count only in a stance statement: ``N/7``, ``N out of 7``, after a cue such as
    "my stance is", "rating:", "I'd say", "I'm at", "I'm a", "put myself at", "rate it", or as
    the whole reply ("5."). Without a
    number, the scale's words count: "strongly agree" 7, "agree" 6, "somewhat/partly/slightly
    agree" 5, "neutral"/"undecided"/"neither agree nor disagree" 4, the same for disagree (3, 2,
    1), and "don't agree" 2. When a reply states several, a number beats words and the last one
    wins (users restate the old stance before the new one).

    Examples:
        >>> parse_stance("Good point. I'd say 5 now."), parse_stance("Maybe 3/7, honestly.")
        (5, 3)
        >>> parse_stance("I used to strongly agree, but now I only somewhat agree.")
        5
        >>> parse_stance("We hired 5 people last year."), parse_stance("I don't agree at all.")
        (None, 2)
        >>> parse_stance("6."), parse_stance("8/7")
        (6, None)
    """
    bare = _BARE_NUMBER.fullmatch(text)
    if bare:
        return int(bare.group(1))
    numbers = list(_NUMBERS.finditer(text))
    if numbers:
        last = numbers[-1]
        return int(last.group("a") or last.group("b"))
    words = list(_WORDS.finditer(text))
    if not words:
        return None
    last = words[-1]
    index = next(i for i in range(len(_WORD_FORMS)) if last.group(f"w{i}") is not None)
    return _WORD_FORMS[index][1]


def persuade_reward(initial: int, final: int | None, direction: Direction) -> float:
    """Shift towards ``direction`` over the room ``initial`` leaves, clipped to [−1, 1].

    Args:
        initial: The scenario's starting stance (1–7).
        final: The user's last stated stance, or ``None`` when none was stated (reward 0).
        direction: ``agree`` (move towards 7) or ``disagree`` (towards 1).

    Raises:
        ValueError: ``initial`` leaves no room in ``direction``.

    Examples:
        >>> persuade_reward(2, 5, "agree"), persuade_reward(6, 1, "disagree")
        (0.6, 1.0)
        >>> persuade_reward(6, 7, "disagree"), persuade_reward(3, None, "agree")
        (-0.2, 0.0)
    """
    room = stance_room(initial, direction)
    if room <= 0:
        raise ValueError(f"stance {initial} leaves no room towards {direction}")
    if final is None:
        return 0.0
    shift = (final - initial) if direction == "agree" else (initial - final)
    return max(-1.0, min(1.0, shift / room))


@cache
def _shipped_tasks() -> tuple[PersuadeTask, ...]:
    data_path = resources.files("mimesis.envs.persuade") / "data" / "persuade_statements.json"
    rows = json.loads(data_path.read_text(encoding="utf-8"))["statements"]
    return tuple(
        PersuadeTask(r["id"], r["statement"], r["initial_stance"], r["direction"], r["persona"],
                     tuple(r["reasons"]))
        for r in rows
    )


@register
class PersuadeGym(UserEnv[PersuadeTask]):
    """Persuasion over the shipped statements (or UserRL's).

    Args:
        tasks: Statements to play instead of the shipped ones.
        max_turns: Agent messages per episode.
    """

    name = "PersuadeGym"
    split = "train"
    # success: the user moved at least half of the room the starting stance left in the asked
    # direction (reward = shift / room in [-1, 1]); on the shipped statements (start 2, 3, 5 or 6)
    # that is ending on the asked side of neutral, from 7 reaching neutral. 1.0 (the end of the
    # scale) would count only conversions to "strongly agree/disagree"
    success_threshold = 0.5
    order = 5
    source = "mimesis/envs/persuade/data/persuade_statements.json; reads UserRL persuasion_multiturn parquet"

    def __init__(self, tasks: list[PersuadeTask] | None = None, max_turns: int = 12) -> None:
        super().__init__(tasks, max_turns)
        self.stances: list[int] = []

    @classmethod
    def default_tasks(cls) -> list[PersuadeTask]:
        return list(_shipped_tasks())

    @property
    def final_stance(self) -> int | None:
        """The user's last stated stance this episode, or ``None``."""
        return self.stances[-1] if self.stances else None

    def start_episode(self) -> None:
        self.stances = []

    def probe_fact(self, position: int) -> Fact:
        """See :meth:`UserEnv.probe_fact` (:func:`~mimesis.envs.persuade.probes.persuade_fact`)."""
        from mimesis.envs.persuade.probes import persuade_fact

        return persuade_fact(self, position)

    def grounding_exchanges(self, rng: random.Random) -> Iterator[Exchange]:
        """See :meth:`UserEnv.grounding_exchanges`
        (:func:`~mimesis.envs.persuade.grounding.persuade_exchanges`)."""
        from mimesis.envs.persuade.grounding import persuade_exchanges

        return persuade_exchanges(self, rng)

    def agent_prompt(self) -> str:
        goal = "agree more" if self.task.direction == "agree" else "disagree more"
        return (
            f"Statement: \"{self.task.statement}\"\n\nThe user "
            f"{'does not agree' if self.task.direction == 'agree' else 'agrees'} with this "
            f"statement. Persuade the user to {goal} with it. Argue with [action]; listen to "
            "their reasons and answer them. Ask the user to rate their agreement on a scale from "
            "1 (strongly disagree) to 7 (strongly agree); the user's last stated rating is what "
            "counts, compared with where they started. End with [finish] when you are done. "
            f"There is no search tool. You have {self.max_turns} messages.\n\n"
            f"{action_format('(no tool in this game)')}"
        )

    def user_goal(self) -> str:
        n = self.task.initial_stance
        reasons = "\n".join(f"- {r}" for r in self.task.reasons)
        return (
            f"You are {self.task.persona}. Someone will try to change your mind about this "
            f"statement: \"{self.task.statement}\". On a scale from 1 (strongly disagree) to 7 "
            f"(strongly agree) you start at {n} ({SCALE[n]}), because:\n{reasons}\n"
            "Reply as yourself in a few sentences. Push back on weak or pushy arguments using "
            "your reasons; move your stance only when an argument really answers one of them, "
            "and only a little at a time. Never pretend to be convinced to be polite. Whenever "
            "you are asked where you stand, state your current stance as a number; right now: "
            f"'My stance: {n}/7'."
        )

    def user_directives(self) -> list[str]:
        """Instructions of :meth:`user_goal` (drift: tests/pipeline/test_directive_copies.py checks each
        is in the goal), without the persona, statement, scale, reasons or the scripted
        'My stance: n/7'."""
        return [
            "Someone will try to change your mind about this statement:",
            "Reply as yourself in a few sentences.",
            ("Push back on weak or pushy arguments using your reasons; move your stance only when "
             "an argument really answers one of them, and only a little at a time."),
            "Never pretend to be convinced to be polite.",
            ("Whenever you are asked where you stand, state your current stance as a number; "
             "right now:"),
        ]

    def on_search(self, query: str) -> str:
        return "There is no search tool in this game; argue with the user using [action]."

    def on_answer(self, content: str) -> tuple[str, bool]:
        return "The conversation is over; the user's last stated stance counts.", True

    def observe_user(self, reply: str, ended: bool = False) -> StepResult:
        """Record the stance ``reply`` states (if any), then continue as the base env does."""
        if self._awaiting_user:  # otherwise super() raises; record nothing for a stray reply
            stance = parse_stance(reply)
            if stance is not None:
                self.stances.append(stance)
        return super().observe_user(reply, ended=ended)

    def score(self) -> float:
        return persuade_reward(self.task.initial_stance, self.final_stance, self.task.direction)

    def _info(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        info = super()._info(*args, **kwargs)
        info["stance"] = self.final_stance
        return info


def load_userrl_tasks(path: Path) -> tuple[list[PersuadeTask], list[Reject]]:
    """Read UserRL's ``persuasion_multiturn`` parquet tables.

    A row's ``reward_model`` holds ``id``, ``claim`` (the statement the user holds) and
    ``argument`` (the user's case for it). In UserRL the user starts at "Strongly Agree" and the
    agent argues against the claim, so tasks start at stance 7 with direction ``disagree``; the
    argument is the user's one reason.

    Args:
        path: A ``.parquet`` file, a folder of them, or a folder holding
            ``persuasion_multiturn/`` or ``parquet/persuasion_multiturn/``.

    Returns:
        ``(tasks, rejects)``; every row is in exactly one of them (a repeated id is rejected).

    Raises:
        FileNotFoundError: no parquet file at ``path``.
    """
    import pyarrow.parquet as pq  # lazy: only this loader needs parquet support

    files = userrl_files(path, "PersuadeGym", pattern="*.parquet",
                         folders=("parquet/persuasion_multiturn", "persuasion_multiturn", ""))
    tasks: list[PersuadeTask] = []
    rejects: list[Reject] = []
    seen: set[str] = set()
    for file in files:
        for i, row in enumerate(pq.read_table(file).to_pylist()):
            model = row.get("reward_model") or {}
            rid = str(model.get("id") or f"{file.stem}-{i}")
            claim = (model.get("claim") or model.get("ground_truth") or "").strip()
            argument = (model.get("argument") or "").strip()
            reason = "missing_claim" if not claim else "duplicate_id" if rid in seen else ""
            if reason:
                rejects.append(Reject(id=rid, stage="envs.PersuadeGym", reason=reason,
                                      detail=file.name))
                continue
            seen.add(rid)
            tasks.append(PersuadeTask(
                rid, claim, 7, "disagree", "someone who firmly holds this view",
                (argument,) if argument else ("It seems obviously right to you.",),
            ))
    return tasks, rejects
