"""TravelGym (train): elicit the user's travel preferences and pick the best option.

After UserRL's TravelGym (SalesforceAIResearch/UserRL, ``gyms/TravelGym``, Apache-2.0) and the
MIMESIS paper's environment table. The agent sees only the user's opening request; the user
knows their preferences (some only come out when the agent asks about that attribute). The
agent asks with ``[action]``, lists candidates with ``[search] <flight|hotel|…>`` and recommends
one option per aspect with ``[answer] <option id>``; the first answer for an aspect is final, and
the episode ends when every aspect has one. Tasks are generated per seed
(:mod:`mimesis.envs.travel.tasks`) or read as answer keys from UserRL's parquet tables
(:func:`load_userrl_tasks`).

Reward: :func:`travel_reward` — per aspect 1.0 for the best option, ``ACCEPTABLE_CREDIT`` = 0.5
for another acceptable one (meets every preference but is not the cheapest), 0.0 otherwise or
unanswered; the mean over aspects.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from mimesis.envs.base import UserEnv, action_format
from mimesis.envs.registry import register
from mimesis.envs.travel.tasks import (
    INITIALS,
    PRICE,
    PRICE_RANGE,
    Preference,
    TravelAspect,
    TravelTask,
    kind_label,
    make_task,
)
from mimesis.envs.userrl import userrl_files
from mimesis.schemas import Reject

if TYPE_CHECKING:
    import random
    from collections.abc import Iterator

    from mimesis.envs.facts import Exchange, Fact

ACCEPTABLE_CREDIT = 0.5
SEARCH_WORDS = {
    "flight": ("flight", "fly", "plane", "airline", "ticket"),
    "hotel": ("hotel", "room", "lodging"),
    "apartment": ("apartment", "flat", "airbnb"),
    "rental_car": ("car", "rental", "vehicle", "drive"),
    "restaurant": ("restaurant", "dinner", "lunch", "food", "eat", "dine", "meal"),
}
# The goal's instructions to the simulator (user_goal / user_directives share them).
_PREFS_HEADER = ("Your preferences (reveal them one at a time, only when asked; never list them "
                 "all at once):")
_NO_PREFS = "You have no further preferences written down; if asked about a detail, "
_NO_PREFS_REPLY = "say you have no strong preference."
_CHEAPEST = "Among the options that meet your preferences you want the cheapest."
_HOW_TO_ANSWER = ("You do not see the option list: let the agent search and recommend; answer "
                  "its questions briefly, as a traveller, not as an assistant.")
_OPTION_ID = re.compile(r"\b([A-Za-z])-?(\d{1,3})\b")


def travel_reward(
    choices: Mapping[str, str],
    best: Mapping[str, str],
    acceptable: Mapping[str, Collection[str]],
    acceptable_credit: float = ACCEPTABLE_CREDIT,
) -> float:
    """Mean over aspects of 1 (best option), ``acceptable_credit`` (acceptable) or 0.

    Args:
        choices: Aspect kind → chosen option id (unanswered aspects are absent).
        best: Aspect kind → best option id; defines the aspects scored.
        acceptable: Aspect kind → the other acceptable ids.
        acceptable_credit: Partial credit for an acceptable, non-best option.

    Examples:
        >>> travel_reward({"flight": "F2"}, {"flight": "F2"}, {"flight": ["F5"]})
        1.0
        >>> travel_reward({"flight": "F5", "hotel": "H1"}, {"flight": "F2", "hotel": "H3"},
        ...               {"flight": ["F5"], "hotel": []})
        0.25
    """
    credit = [
        1.0
        if choices.get(k) == b
        else acceptable_credit
        if choices.get(k) in acceptable.get(k, ())
        else 0.0
        for k, b in best.items()
    ]
    return sum(credit) / len(credit) if credit else 0.0


def preference_text(kind: str, pref: Preference) -> str:
    """One preference as the user states it, e.g. ``the stops must be nonstop or 1 stop``."""
    if pref.attr == PRICE:
        return f"the price must be at most ${pref.max_price} {PRICE_RANGE[kind][2]}"
    return f"the {pref.attr} must be {' or '.join(pref.allowed)}"


@register
class TravelGym(UserEnv[TravelTask]):
    """Preference elicitation and recommendation; procedural by default (one trip per seed).

    Args:
        tasks: Fixed tasks instead of generated ones.
        max_turns: Agent messages per episode.
        n_aspects: Aspects per generated trip (1–5).
        n_preferences: Preferences per aspect (1–4).
        n_options: Candidates per aspect (≥ n_preferences + 3, so each preference is broken by
            some option).
        hidden_fraction: Share of preferences revealed only when asked about directly.
    """

    name = "TravelGym"
    split = "train"
    # success: the best option for every aspect (an acceptable but not best option scores
    # ACCEPTABLE_CREDIT for its aspect; the reward is the mean over aspects)
    success_threshold = 1.0
    order = 2
    source = "procedural (seeded trips and options); reads UserRL travel parquet as answer keys"

    def __init__(
        self,
        tasks: list[TravelTask] | None = None,
        max_turns: int = 20,
        n_aspects: int = 1,
        n_preferences: int = 3,
        n_options: int = 10,
        hidden_fraction: float = 0.5,
    ) -> None:
        if not 1 <= n_aspects <= len(INITIALS) or not 1 <= n_preferences <= 4:
            raise ValueError("n_aspects must be in 1-5 and n_preferences in 1-4")
        if n_options < n_preferences + 3 or not 0.0 <= hidden_fraction <= 1.0:
            raise ValueError("need n_options >= n_preferences + 3 and hidden_fraction in [0, 1]")
        self.gen = (n_aspects, n_preferences, n_options, hidden_fraction)
        super().__init__(tasks, max_turns)
        self.choices: dict[str, str] = {}

    def generate_task(self, rng: np.random.Generator) -> TravelTask:
        return make_task(rng, *self.gen)

    def start_episode(self) -> None:
        self.choices = {}

    def probe_fact(self, position: int) -> Fact:
        """See :meth:`UserEnv.probe_fact` (:func:`~mimesis.envs.travel.probes.travel_fact`)."""
        from mimesis.envs.travel.probes import travel_fact

        return travel_fact(self, position)

    def grounding_exchanges(self, rng: random.Random) -> Iterator[Exchange]:
        """See :meth:`UserEnv.grounding_exchanges`
        (:func:`~mimesis.envs.travel.grounding.travel_exchanges`)."""
        from mimesis.envs.travel.grounding import travel_exchanges

        return travel_exchanges(self, rng)

    def agent_prompt(self) -> str:
        parts = ", ".join(kind_label(a.kind) for a in self.task.aspects)
        return (
            "You are helping a user plan a trip. The user has preferences they have not told "
            "you yet; ask about them with [action], one clear question at a time. "
            "`[search] <part>` (e.g. `[search] hotel`) lists the candidate options for a part "
            f"of the trip. Recommend exactly one option for each part ({parts}) with "
            "`[answer] <option id>` (e.g. `[answer] H3`); your first answer for a part is "
            "final, and the task ends when every part has one. You have "
            f"{self.max_turns} messages.\n\nThe user's request: {self.task.request}\n\n"
            f"{action_format('list the options for a part of the trip')}"
        )

    def user_goal(self) -> str:
        lines = [f'You asked an assistant: "{self.task.request}"']
        prefs = self._preferences()
        if prefs:
            lines.append(_PREFS_HEADER)
        for kind, p, when in prefs:
            lines.append(f"- {kind_label(kind)}: {preference_text(kind, p)} ({when})")
        if not prefs:
            lines.append(_NO_PREFS + _NO_PREFS_REPLY)
        lines.append(f"{_CHEAPEST} {_HOW_TO_ANSWER}")
        return "\n".join(lines)

    def user_directives(self) -> list[str]:
        """How to answer: the preferences header, each "(say this when …)", the no-preferences
        line up to its scripted reply, and the closing rules; never a preference itself (nor
        "you want the cheapest", which the user may well say)."""
        prefs = self._preferences()
        head = [_PREFS_HEADER] if prefs else [_NO_PREFS]
        return [*head, *sorted({when for _, _, when in prefs}), _HOW_TO_ANSWER]

    def _preferences(self) -> list[tuple[str, object, str]]:
        """``(kind, preference, "say this when …")`` of every preference of the task."""
        out = []
        for a in self.task.aspects:
            for p in a.preferences:
                when = (
                    f"only if the agent asks about the {p.attr if p.attr != PRICE else 'budget'}"
                    if p.hidden
                    else f"when the agent asks what you want for the {kind_label(a.kind)}"
                )
                out.append((a.kind, p, f"say this {when}"))
        return out

    def on_search(self, query: str) -> str:
        words = query.lower()
        matched = [
            a for a in self.task.aspects if any(w in words for w in (*SEARCH_WORDS[a.kind], a.kind))
        ]
        return "\n\n".join(_option_table(a) for a in (matched or self.task.aspects))

    def on_answer(self, content: str) -> tuple[str, bool]:
        by_initial = {INITIALS[a.kind]: a for a in self.task.aspects}
        found = [m for m in _OPTION_ID.finditer(content) if m.group(1).upper() in by_initial]
        if not found:
            return f"No option id for this trip in {content!r}; answer like [answer] H3.", False
        option_id = found[0].group(1).upper() + found[0].group(2)
        aspect = by_initial[option_id[0]]
        label = kind_label(aspect.kind)
        if aspect.options and option_id not in {o.id for o in aspect.options}:
            return f"There is no option {option_id} for the {label}.", False
        if aspect.kind in self.choices:
            return f"You already chose {self.choices[aspect.kind]} for the {label}.", False
        self.choices[aspect.kind] = option_id
        done = len(self.choices) == len(self.task.aspects)
        return f"Recorded {option_id} for the {label}.", done

    def score(self) -> float:
        aspects = self.task.aspects
        return travel_reward(
            self.choices,
            {a.kind: a.best_id for a in aspects},
            {a.kind: a.acceptable_ids for a in aspects},
        )


def _option_table(aspect: TravelAspect) -> str:
    label = kind_label(aspect.kind)
    if not aspect.options:
        return f"No option database is available for the {label}."
    unit = PRICE_RANGE[aspect.kind][2]
    rows = [
        " | ".join([o.id, *(f"{k}: {v}" for k, v in o.attrs.items()), f"price: ${o.price} {unit}"])
        for o in aspect.options
    ]
    return f"Options for the {label}:\n" + "\n".join(rows)


def load_userrl_tasks(path: Path) -> tuple[list[TravelTask], list[Reject]]:
    """Read UserRL's ``travel_multiturn_onechoice`` parquet tables as answer-key tasks.

    The tables carry the opening request (``prompt``'s user message), the aspects
    (``reward_model.id`` like ``flight:2-15|hotel:4-38``) and the best option id per aspect
    (``reward_model.ground_truth``); they do not carry UserRL's option database or preference
    lists. Tasks read here therefore have no options (``[search]`` says so), no preferences and
    no acceptable ids: only the best-option reward is defined.

    Args:
        path: A ``.parquet`` file, a folder of them, or a folder holding
            ``parquet/travel_multiturn_onechoice/``.

    Returns:
        ``(tasks, rejects)``; every row is in exactly one of them.

    Raises:
        FileNotFoundError: no parquet file at ``path``.
        ImportError: pandas cannot read parquet (pyarrow missing).
    """
    import pandas as pd  # lazy: only this loader needs parquet support

    files = userrl_files(path, "TravelGym", pattern="*.parquet",
                         folders=("parquet/travel_multiturn_onechoice", ""))
    try:
        frames = [pd.read_parquet(f) for f in files]
    except ImportError as err:
        raise ImportError("reading UserRL parquet needs pyarrow: pip install pyarrow") from err
    tasks: list[TravelTask] = []
    rejects: list[Reject] = []
    for file, frame in zip(files, frames, strict=True):
        for i, row in enumerate(frame.to_dict("records")):
            try:
                tasks.append(_row_task(row))
            except (KeyError, TypeError, ValueError, SyntaxError, StopIteration) as err:
                rejects.append(
                    Reject(
                        id=f"{file.stem}:{i}",
                        stage="envs.TravelGym",
                        reason="unusable",
                        detail=f"{type(err).__name__}: {err}",
                    )
                )
    return tasks, rejects


def _row_task(row: dict) -> TravelTask:
    spec = row["reward_model"]
    truth = [str(t) for t in ast.literal_eval(spec["ground_truth"])]
    request = next(m["content"] for m in row["prompt"] if m["role"] == "user").strip()
    aspects = []
    for part in str(spec["id"]).split("|"):
        kind = part.split(":")[0]
        if kind not in INITIALS:
            raise ValueError(f"unknown aspect {kind!r}")
        best = [t for t in truth if t[:1].upper() == INITIALS[kind]]
        if len(best) != 1:
            raise ValueError(f"{len(best)} ground-truth ids for {kind} in {truth}")
        aspects.append(TravelAspect(kind, (), (), best[0].upper(), ()))
    if len(aspects) != len(truth):
        raise ValueError(f"{len(truth)} ground-truth ids for {len(aspects)} aspects")
    return TravelTask(str(spec["id"]), request, tuple(aspects))
