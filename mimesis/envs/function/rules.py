"""Hidden arithmetic rules over four inputs ``a, b, c, d``: safe evaluation and generation.

Rules are Python arithmetic expressions, as in UserRL's FunctionGym ``functions.json``
(SalesforceAIResearch/UserRL, Apache-2.0), e.g. ``(b * c) - a + d`` or ``c * b ** 2 / d * a``.
They are evaluated by walking the AST — never with ``eval`` — so a rule file cannot run code.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable, Sequence
from functools import lru_cache

import numpy as np

VARIABLES = ("a", "b", "c", "d")
MAX_EXPONENT = 64  # larger powers of user-chosen inputs could hang the process
_BINOPS: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_NUMBER = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?(?:\s*/\s*-?\d+(?:\.\d+)?)?")


def evaluate_rule(rule: str, inputs: Sequence[float]) -> float:
    """Value of ``rule`` at ``(a, b, c, d) = inputs``.

    Args:
        rule: Arithmetic over ``a b c d`` with ``+ - * / // % **``, unary minus, parentheses
            and numeric constants.
        inputs: Four numbers.

    Returns:
        The value as a float.

    Raises:
        ValueError: bad syntax, a name other than ``a..d``, a disallowed construct, an exponent
            above ``MAX_EXPONENT`` or not four inputs.
        ZeroDivisionError: the rule divides by zero at these inputs.

    Examples:
        >>> evaluate_rule("c * b ** 2 / d * a", [6, 10, 6, 6])
        600.0
        >>> evaluate_rule("((a // 3) * b) - (c % 4) + d", [10, 2, 7, 1])
        4.0
    """
    if len(inputs) != 4:
        raise ValueError(f"expected 4 inputs, got {len(inputs)}")
    return float(_eval(_parse(rule), dict(zip(VARIABLES, inputs, strict=True))))


@lru_cache(maxsize=4096)
def _parse(rule: str) -> ast.expr:
    try:
        return ast.parse(rule, mode="eval").body
    except SyntaxError as err:
        raise ValueError(f"bad rule syntax: {rule!r}") from err


def _eval(node: ast.AST, env: dict[str, float]) -> float:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.Name) and node.id in env:
        return env[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _eval(node.operand, env)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _eval(node.left, env), _eval(node.right, env)
        # Bases -1, 0, 1 are cheap at any exponent (UserRL has towers such as c ** d ** b ** a).
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT and abs(left) > 1:
            raise ValueError(f"exponent {right} above {MAX_EXPONENT}")
        return _BINOPS[type(node.op)](left, right)
    raise ValueError(f"disallowed construct in rule: {ast.dump(node)[:80]}")


def parse_number(text: str | None) -> float | None:
    """The number an answer states, or ``None``.

    Reads after the last ``=`` when there is one (``f(3, 5, 5, 3) = 225``), then takes the first
    number; accepts a minus sign, decimals, thousands commas and a simple fraction ``7/2``.

    Examples:
        >>> parse_number("f(3, 5, 5, 3) = 225")
        225.0
        >>> parse_number("-7/2"), parse_number("about 4,896.5"), parse_number("no idea")
        (-3.5, 4896.5, None)
    """
    if not text:
        return None
    tail = text.rsplit("=", 1)[-1]
    match = _NUMBER.search(tail)
    if match is None:
        return None
    num, _, den = match.group(0).replace(",", "").partition("/")
    try:
        return float(num) / float(den) if den else float(num)
    except ZeroDivisionError:
        return None


def format_number(value: float) -> str:
    """``12.0`` → ``"12"``, ``7.5`` → ``"7.5"`` (at most 4 decimals)."""
    return str(int(value)) if float(value).is_integer() else f"{value:.4f}".rstrip("0")


def generate_rule(rng: np.random.Generator, difficulty: int) -> str:
    """Draw a random rule that uses each of ``a, b, c, d`` once.

    Difficulty 1 combines the four inputs with ``+ - *``; 2 adds a constant 2–9; 3 also wraps
    one sub-expression in an integer operation (``// k`` or ``% k``, k in 2–9, so no division
    by zero is possible). The expression is built by repeatedly joining two adjacent operands,
    which gives every bracketing shape.

    Raises:
        ValueError: difficulty outside 1–3.
    """
    if difficulty not in (1, 2, 3):
        raise ValueError(f"difficulty must be 1, 2 or 3, got {difficulty}")
    operands = [str(v) for v in rng.permutation(VARIABLES)]
    if difficulty >= 2:
        operands.insert(int(rng.integers(len(operands) + 1)), str(int(rng.integers(2, 10))))
    int_op_at = int(rng.integers(len(operands) - 1)) if difficulty == 3 else -1
    step = 0
    while len(operands) > 1:
        i = int(rng.integers(len(operands) - 1))
        joined = f"{operands[i]} {rng.choice(['+', '-', '*'])} {operands[i + 1]}"
        if step == int_op_at:
            joined = f"({joined}) {rng.choice(['//', '%'])} {int(rng.integers(2, 10))}"
        operands[i : i + 2] = [f"({joined})" if len(operands) > 2 else joined]
        step += 1
    return operands[0]


def depends_on_all(rule: str, min_share: float = 0.25, probes: int = 32) -> bool:
    """True when, for each input, adding 1 to it alone changes the value at ≥ ``min_share`` of
    a fixed set of probe points (inputs 1–10); rejects rules where an input barely matters,
    e.g. ``d * ((2 * a * b * c) % 2)``. Deterministic: the probe points are fixed.
    """
    points = np.random.default_rng(0).integers(1, 11, size=(probes, 4)).tolist()
    for k in range(4):
        changed = 0
        for x in points:
            y = list(x)
            y[k] += 1
            changed += evaluate_rule(rule, x) != evaluate_rule(rule, y)
        if changed < min_share * probes:
            return False
    return True
