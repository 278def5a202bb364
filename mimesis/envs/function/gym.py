"""FunctionGym (train): discover a hidden arithmetic rule by asking the user to evaluate it.

After UserRL's FunctionGym (SalesforceAIResearch/UserRL, ``gyms/FunctionGym``, Apache-2.0) and
the MIMESIS paper's environment table. The user knows a rule ``f(a, b, c, d)``; the agent asks
for values of ``f`` at inputs it chooses (``[action]``), looks up the test case with
``[search]`` and answers ``f`` at the test case with ``[answer] <number>``; the answer ends the
episode. Rules are generated per seed (:func:`~mimesis.envs.function.rules.generate_rule`) or
read from UserRL's ``functions.json`` with :func:`load_userrl_tasks`.

Reward: :func:`function_reward` — 1.0 when the answer equals the test-case value (within 0.01,
for rules with true division whose values the agent may round to two decimals), else 0.0.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from mimesis.envs.base import UserEnv, action_format
from mimesis.envs.function.rules import (
    depends_on_all,
    evaluate_rule,
    format_number,
    generate_rule,
    parse_number,
)
from mimesis.envs.registry import register
from mimesis.envs.userrl import userrl_files
from mimesis.schemas import Reject

if TYPE_CHECKING:
    import random
    from collections.abc import Iterator

    from mimesis.envs.facts import Exchange, Fact

ANSWER_TOLERANCE = 0.01
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


@dataclass(frozen=True)
class FunctionTask:
    """A hidden rule and its test case.

    Attributes:
        id: Task id (``gen-<seed-derived>`` or the UserRL id ``func-N``).
        rule: Arithmetic expression over ``a b c d`` (see ``evaluate_rule``).
        test_case: The inputs ``(a, b, c, d)`` the agent must answer for.
        expected: ``f(test_case)``.
    """

    id: str
    rule: str
    test_case: tuple[float, float, float, float]
    expected: float


def function_reward(answer: str | None, expected: float, tol: float = ANSWER_TOLERANCE) -> float:
    """1.0 when the number in ``answer`` is within ``tol`` of ``expected``, else 0.0.

    Args:
        answer: The ``[answer]`` content (``None`` when the agent never answered).
        expected: The rule's value at the test case.
        tol: Absolute tolerance.

    Examples:
        >>> function_reward("225", 225.0), function_reward("f = 224", 225.0)
        (1.0, 0.0)
        >>> function_reward("2.33", 7 / 3), function_reward(None, 1.0)
        (1.0, 0.0)
    """
    value = parse_number(answer)
    return float(value is not None and abs(value - expected) <= tol)


def make_task(rng: np.random.Generator, difficulty: int) -> FunctionTask:
    """Draw a rule that depends on all four inputs and a test case with inputs in 1–10."""
    while True:
        rule = generate_rule(rng, difficulty)
        if depends_on_all(rule):
            break
    a, b, c, d = (int(v) for v in rng.integers(1, 11, size=4))
    test_case = (a, b, c, d)
    task_id = f"gen-d{difficulty}-{int(rng.integers(1 << 62)):x}"
    return FunctionTask(task_id, rule, test_case, evaluate_rule(rule, test_case))


@register
class FunctionGym(UserEnv[FunctionTask]):
    """Hidden-rule discovery; procedural by default (one rule per seed).

    Args:
        tasks: Fixed tasks (e.g. ``load_userrl_tasks(...)[0]``) instead of generated ones.
        max_turns: Agent messages per episode.
        difficulty: 1–3, see :func:`~mimesis.envs.function.rules.generate_rule`.
    """

    name = "FunctionGym"
    split = "train"
    # success: the answer is right (the reward is 0 or 1)
    success_threshold = 1.0
    order = 1
    source = "procedural (seeded rules over a,b,c,d); reads UserRL FunctionGym/functions.json"

    def __init__(
        self, tasks: list[FunctionTask] | None = None, max_turns: int = 20, difficulty: int = 2
    ) -> None:
        if difficulty not in (1, 2, 3):
            raise ValueError(f"difficulty must be 1, 2 or 3, got {difficulty}")
        self.difficulty = difficulty
        super().__init__(tasks, max_turns)
        self.answer: str | None = None

    def generate_task(self, rng: np.random.Generator) -> FunctionTask:
        return make_task(rng, self.difficulty)

    def start_episode(self) -> None:
        self.answer = None

    def _case_text(self) -> str:
        a, b, c, d = (format_number(v) for v in self.task.test_case)
        return f"a={a}, b={b}, c={c}, d={d}"

    def probe_fact(self, position: int) -> Fact:
        """See :meth:`UserEnv.probe_fact` (:func:`~mimesis.envs.function.probes.function_fact`)."""
        from mimesis.envs.function.probes import function_fact

        return function_fact(self, position)

    def grounding_exchanges(self, rng: random.Random) -> Iterator[Exchange]:
        """See :meth:`UserEnv.grounding_exchanges`
        (:func:`~mimesis.envs.function.grounding.function_exchanges`)."""
        from mimesis.envs.function.grounding import function_exchanges

        return function_exchanges(self, rng)

    def agent_prompt(self) -> str:
        return (
            "The user knows a hidden rule f(a, b, c, d) that turns four numbers into one "
            "number. Find out how it behaves by asking the user to evaluate it on inputs you "
            "choose, e.g. `[action] What is f(1, 2, 3, 4)?`. The user answers with values only "
            "and will not evaluate the test case for you. `[search] test` shows the test case. "
            "Your goal: give f at the test case with `[answer] <number>`; the first answer is "
            f"final. You have {self.max_turns} messages.\n\n{action_format('show the test case')}"
        )

    def user_goal(self) -> str:
        example = (1, 2, 3, 4) if self.task.test_case != (1, 2, 3, 4) else (2, 2, 2, 2)
        try:
            shown = f"f{example} = {format_number(evaluate_rule(self.task.rule, example))}"
        except (ZeroDivisionError, ValueError):
            shown = "f(1, 2, 3, 4) = <its value>"
        return (
            f"You know a secret rule f(a, b, c, d) = {self.task.rule} (Python arithmetic: "
            "// is floor division, % remainder, ** power). The agent is trying to discover it. "
            "When the agent gives four numbers a, b, c, d, reply only with the value of f at "
            f"those numbers, for example '{shown}'. Never say or hint at the formula itself. "
            f"Refuse to evaluate the test case {self._case_text()}: say you can't give that "
            "one. If the agent's message has no four numbers, ask for four numbers."
        )

    def user_directives(self) -> list[str]:
        """Instructions of :meth:`user_goal` (drift: tests/pipeline/test_directive_copies.py checks each
        is in the goal), without the rule, the example value or the test case, and without the
        scripted refusal."""
        return [
            "The agent is trying to discover it.",
            ("When the agent gives four numbers a, b, c, d, reply only with the value of f at "
             "those numbers, for example"),
            "Never say or hint at the formula itself.",
            "Refuse to evaluate the test case",
            "If the agent's message has no four numbers, ask for four numbers.",
        ]

    def user_view(self, message: str) -> str:
        """``message`` plus the user's private working: ``f`` at the first four numbers of the
        message, or a reminder that they are the test case (refused).

        A person who knows the rule works the value out before replying; a small simulator
        cannot do arithmetic reliably, so the env does it for them and the simulator only has to
        say it (the fact-reveal check measures that it does). The agent never sees this text.

        >>> env = FunctionGym(); _ = env.reset(seed=0)
        >>> value = format_number(evaluate_rule(env.task.rule, (1, 1, 1, 1)))
        >>> env.user_view("What is f(1, 1, 1, 1)?").endswith(f"f(1, 1, 1, 1) = {value}]")
        True
        >>> env.user_view("Any hint?")
        'Any hint?'
        """
        numbers = [float(m) for m in _NUMBER.findall(message)][:4]
        if len(numbers) < 4:
            return message
        x = tuple(numbers)
        shown = ", ".join(format_number(v) for v in x)
        if all(abs(v - t) < 1e-9 for v, t in zip(x, self.task.test_case, strict=True)):
            note = f"[Your private working: ({shown}) is the test case; refuse it]"
        else:
            try:
                note = (f"[Your private working: f({shown}) = "
                        f"{format_number(evaluate_rule(self.task.rule, x))}]")
            except (ZeroDivisionError, ValueError, OverflowError):
                note = f"[Your private working: f({shown}) is undefined]"
        return f"{message}\n\n{note}"

    def on_search(self, query: str) -> str:
        # The test case is the only thing to look up, so every query returns it.
        return f"Test case: {self._case_text()}. Give f at these inputs with [answer] <number>."

    def on_answer(self, content: str) -> tuple[str, bool]:
        self.answer = content
        verdict = "correct" if self.score() == 1.0 else "incorrect"
        return f"Your answer is {verdict}.", True

    def score(self) -> float:
        return function_reward(self.answer, self.task.expected)


def load_userrl_tasks(path: Path) -> tuple[list[FunctionTask], list[Reject]]:
    """Read UserRL's ``functions.json`` (``[{id, rule, test_case, expected_result}, …]``).

    Each record is kept only when its rule evaluates safely and reproduces
    ``expected_result`` at the test case (relative tolerance 1e-6).

    Args:
        path: The JSON file, or a folder holding ``functions.json`` or
            ``FunctionGym/functions.json``.

    Returns:
        ``(tasks, rejects)``; every record is in exactly one of them.

    Raises:
        FileNotFoundError: no ``functions.json`` at ``path``.
    """
    candidate = userrl_files(path, "FunctionGym", ["functions.json"])[0]
    tasks: list[FunctionTask] = []
    rejects: list[Reject] = []
    for i, row in enumerate(json.loads(candidate.read_text(encoding="utf-8"))):
        task_id = str(row.get("id", f"row-{i}")) if isinstance(row, dict) else f"row-{i}"
        try:
            a, b, c, d = (float(v) for v in row["test_case"])
            case = (a, b, c, d)
            value = evaluate_rule(str(row["rule"]), case)
            expected = float(row["expected_result"])
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as err:
            rejects.append(
                Reject(
                    id=task_id,
                    stage="envs.FunctionGym",
                    reason="unusable",
                    detail=f"{type(err).__name__}: {err}",
                )
            )
            continue
        if abs(value - expected) > 1e-6 * max(1.0, abs(expected)):
            rejects.append(
                Reject(
                    id=task_id,
                    stage="envs.FunctionGym",
                    reason="expected_mismatch",
                    detail=f"rule gives {value}, file says {expected}",
                )
            )
            continue
        tasks.append(FunctionTask(task_id, str(row["rule"]), case, expected))
    return tasks, rejects
