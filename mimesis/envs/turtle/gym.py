"""TurtleGym (train): explain a lateral-thinking "turtle soup" story by asking yes/no questions.

After UserRL's TurtleGym (SalesforceAIResearch/UserRL, ``gyms/TurtleGym``, Apache-2.0) and the
MIMESIS paper's environment table. The agent sees a story's *surface* (a strange situation); the
user knows its *bottom* (the hidden explanation) and answers each question with Yes, No or
Irrelevant. The agent explains the story once with ``[answer] <explanation>``, which ends the
episode. The stories are ours (``mimesis/envs/turtle/data/turtle_stories.json``: 32 stories, each with
2–4 key facts); :func:`load_userrl_tasks` reads UserRL's ``all_stories_refined.json`` instead.

Explanations are scored by a judge (:class:`~mimesis.envs.turtle_judge.TurtleJudge`:
``judge(story, explanation)`` → score in [0, 1], plus a ``name``):

- :data:`~mimesis.envs.turtle_judge.key_fact_judge` (the default; offline and deterministic): the
  weighted fraction of the story's key facts that the explanation covers
  (:func:`~mimesis.envs.turtle_judge.key_fact_score`). A key fact lists keyword alternatives (a
  word or a phrase); an alternative appears when every one of its words appears in the
  explanation after light stemming (:func:`~mimesis.envs.turtle_judge.stem`), and a fact is
  covered when ``min_matches`` of its alternatives appear (1 for our stories).
- :class:`~mimesis.envs.turtle_judge.OpenAIJudge`: asks an OpenAI-compatible endpoint for a number
  in [0, 1] (UserRL asks an LLM judge too; keyword overlap is cruder but free).

Reward: :func:`turtle_reward` — the judge's score of the final explanation, 0.0 without one. The
judge that scored an episode is recorded: ``env.scorer``, ``info["scorer"]`` and
:attr:`JudgedReward.scorer`.

Where things live: this module holds the env (:class:`TurtleGym`), its reward and the task
loaders (shipped stories, :func:`load_userrl_tasks`); the story data types, the judges, the score
parsing and the text matching (``stem``, ``content_words``) are in
:mod:`mimesis.envs.turtle_judge`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mimesis.envs.base import UserEnv, action_format
from mimesis.envs.registry import register
from mimesis.envs.turtle_judge import (
    KeyFact,
    TurtleJudge,
    TurtleStory,
    content_words,
    fact_covered,
    key_fact_judge,
    stem,
    word_stems,
)
from mimesis.envs.userrl import userrl_files
from mimesis.schemas import Reject

if TYPE_CHECKING:
    import random
    from collections.abc import Iterator

    from mimesis.envs.facts import Exchange, Fact

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
# A yes/no question: an auxiliary verb opening the message or a clause, then a "?".
_QUESTION = re.compile(r"(?:^|[.!:;,]\s+)\W*(?:is|are|was|were|do|does|did|has|have|had|can|"
                       r"could|would|will|should)\b[^?]*\?", re.IGNORECASE)
# Words that carry no clue in derived keywords: UserRL's evaluation statements describe the
# story ("the story reveals that …"), and contraction stems and connectives say nothing.
_BOILERPLATE_TEXT = """
story reveals reveal revealed include includes included detail details actually player answer
mention mentions explain explains explanation fact facts truth true twist key realize realizes
realization narrator protagonist character since however although though later eventually finally
instead cannot couldn didn wasn isn doesn wouldn hadn aren weren won shouldn
"""
_BOILERPLATE = frozenset(_BOILERPLATE_TEXT.split())
MAX_DERIVED_KEYWORDS = 6
# The host's instructions (user_goal / user_directives share them).
_ROLE = "You are the host of a lateral-thinking puzzle."
_RULES = ("The player asks yes/no questions to find out. Answer each question truthfully "
          "according to what really happened, with exactly one word: Yes, No, or Irrelevant "
          "(when it does not matter to the story or cannot be told). Never explain, never hint "
          "and never reveal the story.")
_OFF_TOPIC = "If the message is not a yes/no question, reply:"


@dataclass(frozen=True)
class JudgedReward:
    """The reward of one episode and the judge that produced it (``none``: no explanation)."""

    value: float
    scorer: str


# ----------------------------------------------------------------------- reward
def turtle_reward(story: TurtleStory, explanation: str | None, judge: TurtleJudge) -> JudgedReward:
    """The judge's score of the final explanation, clipped to [0, 1]; 0.0 without one.

    Args:
        story: The story played.
        explanation: The agent's ``[answer]`` content, or ``None`` when it never answered.
        judge: Any :class:`TurtleJudge`; it is not called for a missing or blank explanation.

    Returns:
        The reward and the scorer's name (``none`` when the judge was not called).

    Examples:
        >>> story = TurtleStory("s", "t", "surface", "bottom", (KeyFact("a", ("snowman",)),))
        >>> turtle_reward(story, "A snowman melted", key_fact_judge)
        JudgedReward(value=1.0, scorer='key_facts')
        >>> turtle_reward(story, None, key_fact_judge)
        JudgedReward(value=0.0, scorer='none')
    """
    if explanation is None or not explanation.strip():
        return JudgedReward(0.0, "none")
    return JudgedReward(min(max(float(judge(story, explanation)), 0.0), 1.0), judge.name)


# ----------------------------------------------------------------------- tasks
def _story_from_json(row: dict[str, Any]) -> TurtleStory:
    facts = tuple(
        KeyFact(f["fact"], tuple(f["keywords"]), float(f.get("weight", 1.0)))
        for f in row["key_facts"]
    )
    return TurtleStory(row["id"], row["title"], row["surface"], row["bottom"], facts)


@cache
def _shipped_tasks() -> tuple[TurtleStory, ...]:
    data_path = resources.files("mimesis.envs.turtle") / "data" / "turtle_stories.json"
    rows = json.loads(data_path.read_text(encoding="utf-8"))["stories"]
    return tuple(_story_from_json(r) for r in rows)


@register
class TurtleGym(UserEnv[TurtleStory]):
    """Turtle soup over the shipped stories (or UserRL's), scored by a :class:`TurtleJudge`.

    Args:
        tasks: Stories to play instead of the shipped ones.
        max_turns: Agent messages per episode.
        judge: Scores the final explanation; default :data:`key_fact_judge`.
    """

    name = "TurtleGym"
    split = "train"
    # success: the explanation covers every key fact of the story (the judge's score is the
    # weighted fraction covered; an LLM judge's score below 1 is partial credit)
    success_threshold = 1.0
    order = 3
    source = "mimesis/envs/turtle/data/turtle_stories.json; reads UserRL all_stories_refined.json"

    def __init__(
        self,
        tasks: list[TurtleStory] | None = None,
        max_turns: int = 20,
        judge: TurtleJudge | None = None,
    ) -> None:
        self.judge: TurtleJudge = judge if judge is not None else key_fact_judge
        super().__init__(tasks, max_turns)
        self.explanation: str | None = None
        self.result: JudgedReward | None = None

    @property
    def scorer(self) -> str:
        """Name of the judge that scores this env's explanations."""
        return self.judge.name

    @classmethod
    def default_tasks(cls) -> list[TurtleStory]:
        return list(_shipped_tasks())

    def start_episode(self) -> None:
        self.explanation, self.result = None, None

    def probe_fact(self, position: int) -> Fact:
        """See :meth:`UserEnv.probe_fact` (:func:`~mimesis.envs.turtle.probes.turtle_fact`)."""
        from mimesis.envs.turtle.probes import turtle_fact

        return turtle_fact(self, position)

    def grounding_exchanges(self, rng: random.Random) -> Iterator[Exchange]:
        """See :meth:`UserEnv.grounding_exchanges`
        (:func:`~mimesis.envs.turtle.grounding.turtle_exchanges`)."""
        from mimesis.envs.turtle.grounding import turtle_exchanges

        return turtle_exchanges(self, rng)

    def agent_prompt(self) -> str:
        return (
            f"Solve this lateral-thinking puzzle (\"{self.task.title}\"):\n\n{self.task.surface}"
            "\n\nThe user knows the hidden explanation. Ask yes/no questions with [action]; the "
            "user answers only Yes, No or Irrelevant. When you think you know what happened, "
            "explain the whole story with `[answer] <explanation>`; you get one answer, scored "
            "by how many of the story's key points it gets right. There is no search tool. You "
            f"have {self.max_turns} messages.\n\n{action_format('(no tool in this game)')}"
        )

    def user_goal(self) -> str:
        return (
            f"{_ROLE} The player was told: "
            f"\"{self.task.surface}\" You know what really happened: {self.task.bottom} "
            f"{_RULES} {_OFF_TOPIC} Please ask a yes/no question."
        )

    def user_directives(self) -> list[str]:
        """The host's rules, without the story and without the reply it scripts ("Please ask a
        yes/no question.", which the host is meant to say)."""
        return [_ROLE, _RULES, _OFF_TOPIC]

    def user_view(self, message: str) -> str:
        """``message`` plus the host's private check when it is a yes/no question: whether it touches
        one of the story's key facts (:func:`question_verdict`), so Yes, else No.

        A host who knows the story answers at once; a 135M simulator cannot reason from the
        story to the answer (measured: 42% of probe questions answered right, below always-yes),
        so the env does the check and the simulator only has to say it, as FunctionGym's private
        working. The check is the key-fact matcher the explanation judge uses; on the shipped
        probe questions it agrees with the written answer on 57 of 64. The agent never sees it.

        >>> env = TurtleGym(); _ = env.reset(seed=0, options={"index": 0})
        >>> env.user_view("Was Tom born on February 29?")
        'Was Tom born on February 29? [Your private check: this touches what really happened: Yes]'
        >>> env.user_view("Tell me the story."), env.user_view("I give up, what happened?")
        ('Tell me the story.', 'I give up, what happened?')
        """
        if not _QUESTION.search(message):
            return message
        if question_verdict(self.task, message):
            return f"{message} [Your private check: this touches what really happened: Yes]"
        return f"{message} [Your private check: this is not in what really happened: No]"

    def on_search(self, query: str) -> str:
        return "There is no search tool in this game; ask the user yes/no questions with [action]."

    def on_answer(self, content: str) -> tuple[str, bool]:
        self.explanation = content
        self.result = turtle_reward(self.task, content, self.judge)
        return f"Your explanation scores {self.result.value:.2f}.", True

    def score(self) -> float:
        if self.result is None:  # ended without an answer: no judge call, reward 0
            self.result = turtle_reward(self.task, self.explanation, self.judge)
        return self.result.value

    def _info(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        info = super()._info(*args, **kwargs)
        info["scorer"] = self.scorer
        return info


def question_verdict(story: TurtleStory, question: str) -> bool:
    """True (Yes) when ``question`` covers one of ``story``'s key facts (the judge's matcher,
    :func:`~mimesis.envs.turtle_judge.fact_covered`), False (No) otherwise. A crude host: a
    question that names a key fact but negates it ("Did anyone survive?" of a crash) reads Yes.

    >>> story = TurtleGym.default_tasks()[0]
    >>> question_verdict(story, "Was he born on a leap day?"), question_verdict(story, "Is it a dog?")
    (True, False)
    """
    return any(fact_covered(f, question) for f in story.key_facts)


# ----------------------------------------------------------------------- UserRL format
def fact_from_text(text: str, surface: str, weight: float = 1.0) -> KeyFact | None:
    """A key fact with keywords derived from ``text`` (a UserRL evaluation statement or a
    sentence of the solution).

    Keywords are the content words of ``text`` (:func:`content_words`, minus words such as
    "story" or "reveals" that describe the story rather than tell it); words the surface already
    uses are dropped when others remain (repeating the puzzle explains nothing); at most
    :data:`MAX_DERIVED_KEYWORDS`, in order. The fact is covered when half of them (rounded up)
    appear.

    Returns:
        The fact, or ``None`` when ``text`` has no content words.
    """
    words = [w for w in content_words(text) if w not in _BOILERPLATE]
    seen = word_stems(surface)
    novel = [w for w in words if stem(w) not in seen]
    keywords = tuple((novel or words)[:MAX_DERIVED_KEYWORDS])
    if not keywords:
        return None
    return KeyFact(text.strip(), keywords, weight, math.ceil(len(keywords) / 2))


def derive_key_facts(bottom: str, surface: str, n: int = 3) -> tuple[KeyFact, ...]:
    """Key facts for a story without any: the ``n`` sentences of ``bottom`` with the most content
    words the surface lacks (ties: earlier first), in story order, equal weights."""
    sentences = [s for s in _SENTENCE_END.split(bottom.strip()) if s.strip()]

    def novelty(sentence: str) -> int:
        return len({stem(w) for w in content_words(sentence)} - word_stems(surface))

    ranked = sorted(range(len(sentences)), key=lambda i: (-novelty(sentences[i]), i))[:n]
    facts = (fact_from_text(sentences[i], surface) for i in sorted(ranked))
    return tuple(f for f in facts if f is not None)


def _userrl_facts(evaluation: Any, surface: str) -> tuple[KeyFact, ...]:
    items: Iterable[Any] = evaluation if isinstance(evaluation, list) else []
    facts = []
    for item in items:
        if isinstance(item, dict) and isinstance(item.get("statement"), str):
            weight = item.get("score", 1.0)
            weight = float(weight) if isinstance(weight, int | float) and weight > 0 else 1.0
            fact = fact_from_text(item["statement"], surface, weight)
            if fact is not None:
                facts.append(fact)
    return tuple(facts)


def load_userrl_tasks(path: Path) -> tuple[list[TurtleStory], list[Reject]]:
    """Read UserRL's ``all_stories_refined.json`` (``{id: {new_title, new_surface, new_bottom,
    evaluation: [{statement, score}], …}}``; a list of such records, or ``title``/``surface``/
    ``bottom`` keys, also work).

    Key facts come from the ``evaluation`` statements, weighted by their ``score``, with keywords
    derived by :func:`fact_from_text`. A record without usable statements gets facts derived from
    its solution text (:func:`derive_key_facts`). Derived keywords are crude; prefer an
    :class:`OpenAIJudge` for these stories.

    Args:
        path: The JSON file, or a folder holding it directly or under ``TurtleGym/``.

    Returns:
        ``(tasks, rejects)``; every record is in exactly one of them.

    Raises:
        FileNotFoundError: no ``all_stories_refined.json`` at ``path``.
    """
    candidate = userrl_files(path, "TurtleGym", ["all_stories_refined.json"])[0]
    data = json.loads(candidate.read_text(encoding="utf-8"))
    records = list(data.items()) if isinstance(data, dict) else list(enumerate(data))
    tasks: list[TurtleStory] = []
    rejects: list[Reject] = []
    for key, row in records:
        rid = str(key)

        def field(*names: str, row: Any = row) -> str:
            values = (row.get(n) for n in names) if isinstance(row, dict) else ()
            return next((v.strip() for v in values if isinstance(v, str) and v.strip()), "")

        surface, bottom = field("new_surface", "surface"), field("new_bottom", "bottom")
        if not surface or not bottom:
            rejects.append(Reject(id=rid, stage="envs.TurtleGym", reason="missing_surface_or_bottom"))
            continue
        facts = _userrl_facts(row.get("evaluation"), surface) or derive_key_facts(bottom, surface)
        if not facts:
            rejects.append(Reject(id=rid, stage="envs.TurtleGym", reason="no_key_facts"))
            continue
        title = field("new_title", "title") or f"Story {rid}"
        tasks.append(TurtleStory(rid, title, surface, bottom, facts))
    return tasks, rejects
