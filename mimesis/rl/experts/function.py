"""FunctionGym expert: look up the test case, ask for f at chosen inputs, fit candidate rules.

Candidates: every rule of the shapes FunctionGym draws at difficulty 1 and 2 (each of ``a b c d``
once, optionally one constant 2–9, joined by ``+ - *`` in any bracketing: ~1.1 M expressions;
the env's prompt says only that f maps four numbers to one). All of them are evaluated at once,
vectorised over the asked points and the test case (:func:`candidate_values`, ~0.1 s); the
answer is the most common test-case value among the candidates that reproduce every value the
user gave. Three well-spread points pin it down for >95% of generated rules.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

from mimesis.envs.function.rules import format_number, parse_number
from mimesis.rl.experts.base import Expert, replies_to_actions, tool_results
from mimesis.rollout.engine import AgentView

Point = tuple[float, float, float, float]
# Asked in this order; distinct values above 1 so that products and sums differ.
POINTS: tuple[Point, ...] = ((2, 3, 5, 7), (3, 7, 2, 5), (7, 2, 3, 5), (5, 7, 3, 2),
                             (4, 6, 9, 3), (9, 4, 6, 8))
TARGET_POINTS = 3
_CASE = re.compile(r"a\s*=\s*(-?[\d.]+),\s*b\s*=\s*(-?[\d.]+),\s*c\s*=\s*(-?[\d.]+),"
                   r"\s*d\s*=\s*(-?[\d.]+)")
_CALL = re.compile(r"f\s*\(\s*(-?[\d.]+)\s*,\s*(-?[\d.]+)\s*,\s*(-?[\d.]+)\s*,\s*(-?[\d.]+)\s*\)")
_VALUE = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?")
_OPS = (np.add, np.subtract, np.multiply)


def _leaf_sequences(points: np.ndarray, difficulty: int) -> np.ndarray:
    """``[S, n_leaves, P]``: every ordering of the inputs (with the constant, for 2)."""
    seqs = []
    for perm in itertools.permutations(range(4)):
        cols = [points[:, i] for i in perm]
        if difficulty == 1:
            seqs.append(cols)
            continue
        for pos in range(5):
            for k in range(2, 10):
                seqs.append([*cols[:pos], np.full(len(points), float(k)), *cols[pos:]])
    return np.stack([np.stack(s) for s in seqs])


def candidate_values(points: Sequence[Point]) -> np.ndarray:
    """Values of every candidate rule at ``points``: shape ``[n_candidates, len(points)]``.

    Dynamic programming over contiguous spans of each leaf sequence: a span's expressions are
    every ``left op right`` of its splits, so the last span holds every bracketing.
    """
    pts = np.asarray(points, dtype=float)
    out = []
    for difficulty in (1, 2):
        leaves = _leaf_sequences(pts, difficulty)
        s, n, p = leaves.shape
        span = {(i, i + 1): leaves[:, i:i + 1, :] for i in range(n)}
        for length in range(2, n + 1):
            for i in range(n - length + 1):
                j = i + length
                parts = [op(span[i, k][:, :, None, :], span[k, j][:, None, :, :]).reshape(s, -1, p)
                         for k in range(i + 1, j) for op in _OPS]
                span[i, j] = np.concatenate(parts, axis=1)
        out.append(span[0, n].reshape(-1, p))
    return np.concatenate(out)


def fit_answer(observed: dict[Point, float], case: Point) -> float | None:
    """Most common value at ``case`` among candidates matching every observed value, or
    ``None`` when no candidate matches (or nothing was observed)."""
    if not observed:
        return None
    asked = list(observed)
    values = candidate_values([*asked, case])
    target = np.array([observed[q] for q in asked])
    match = np.all(np.abs(values[:, :-1] - target) < 1e-6, axis=1)
    if not match.any():
        return None
    votes = Counter(np.round(values[match, -1], 6).tolist())
    return float(votes.most_common(1)[0][0])


def parse_case(text: str) -> Point | None:
    """The test case of a ``[search] test`` result (``a=3, b=5, c=1, d=9``)."""
    m = _CASE.search(text)
    return tuple(float(v) for v in m.groups()) if m else None  # type: ignore[return-value]


def parse_values(reply: str, points: Sequence[Point]) -> dict[Point, float]:
    """The values a reply gives for the asked ``points``.

    ``f(2, 3, 5, 7) = 41`` statements are matched to their point; otherwise, when the reply
    holds exactly one number per asked point (numbers inside ``f(…)`` excluded), they are taken
    in order; a single asked point falls back to the env's own reader
    (:func:`~mimesis.envs.function.rules.parse_number`).

    >>> parse_values("f(2, 3, 5, 7) = 41 and f(3, 7, 2, 5) = -3", [(2, 3, 5, 7), (3, 7, 2, 5)])
    {(2, 3, 5, 7): 41.0, (3, 7, 2, 5): -3.0}
    >>> parse_values("12, 40 and 7", [(1, 1, 1, 1), (2, 2, 2, 2), (3, 3, 3, 3)])[(2, 2, 2, 2)]
    40.0
    """
    wanted = {tuple(float(v) for v in q): q for q in points}
    found: dict[Point, float] = {}
    for m in re.finditer(_CALL.pattern + r"\s*(?:=|is|:)\s*(-?\d+(?:,\d{3})*(?:\.\d+)?)", reply):
        key = tuple(float(v) for v in m.groups()[:4])
        if key in wanted:
            found[wanted[key]] = float(m.group(5).replace(",", ""))
    if found:
        return found
    numbers = [float(v.replace(",", "")) for v in _VALUE.findall(_CALL.sub(" ", reply))]
    if len(numbers) == len(points):
        return dict(zip(points, numbers, strict=True))
    if len(points) == 1 and (value := parse_number(reply)) is not None:
        return {points[0]: value}
    return {}


def ask_text(points: Sequence[Point]) -> str:
    """``[action] What is f(2, 3, 5, 7)?`` (several points: ``What are … and …?``)."""
    calls = [f"f({', '.join(format_number(v) for v in q)})" for q in points]
    if len(calls) == 1:
        return f"[action] What is {calls[0]}?"
    return f"[action] What are {', '.join(calls[:-1])} and {calls[-1]}?"


class FunctionExpert(Expert):
    """Reads: the test case from its ``[search]`` result and the values the user states.
    Strategy: ``[search] test`` first, then ask for f at :data:`POINTS` (packed into the
    messages the budget leaves), then ``[answer]`` the fitted value."""

    env = "FunctionGym"

    def act(self, view: AgentView) -> str:
        case = next((c for _, r in tool_results(view) if (c := parse_case(r))), None)
        if case is None and view.turns_left >= 2 and not tool_results(view):
            return "[search] test"
        observed, asked = self._observed(view)
        questions_left = view.turns_left - 1
        answer = fit_answer(observed, case) if case is not None else None
        settled = answer is not None and len(observed) >= TARGET_POINTS
        if questions_left >= 1 and not settled:
            fresh = [q for q in POINTS if q not in asked and q != case]
            if fresh:
                need = max(TARGET_POINTS - len(observed), 1)
                chunk = min(len(fresh), max(1, math.ceil(need / questions_left)))
                return ask_text(fresh[:chunk])
        return f"[answer] {format_number(self._guess(answer, observed, case))}"

    @staticmethod
    def _observed(view: AgentView) -> tuple[dict[Point, float], set[Point]]:
        observed: dict[Point, float] = {}
        asked: set[Point] = set()
        for question, reply in replies_to_actions(view):
            points = [q for q in POINTS if f"f({', '.join(format_number(v) for v in q)})"
                      in question]
            asked.update(points)
            observed.update(parse_values(reply, points) if points and reply else {})
        return observed, asked

    @staticmethod
    def _guess(answer: float | None, observed: dict[Point, float], case: Point | None) -> float:
        """The fitted value, else the value seen at the nearest asked point, else a + b + c + d."""
        if answer is not None:
            return answer
        if case is None:
            return 0.0
        if observed:
            nearest = min(observed, key=lambda q: sum(abs(x - y) for x, y in zip(q, case,
                                                                                  strict=True)))
            return observed[nearest]
        return float(sum(case))
