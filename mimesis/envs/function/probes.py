"""FunctionGym's fact-reveal probe: the value of ``f`` at inputs drawn per task.

``value``: "What is f(a, b, c, d)?" at inputs drawn per task; judged by the env's own reward
function (:func:`~mimesis.envs.function.gym.function_reward`: the number after the last ``=``,
else the first number, within 0.01 of the true value). Inputs are drawn so that the true value is
none of the inputs, not the example value the goal text shows and not 0 (which a reply like
"f(x) = 0" states by luck).
"""

from __future__ import annotations

import zlib

import numpy as np

from mimesis.envs.facts import Fact
from mimesis.envs.function.gym import FunctionGym, function_reward
from mimesis.envs.function.rules import evaluate_rule, format_number


def function_fact(env: FunctionGym, position: int) -> Fact:
    """The value of f at inputs drawn for this task (see module docstring).

    Raises:
        ValueError: no inputs meet the conditions in 1000 draws.
    """
    task = env.task
    shown = (1, 2, 3, 4) if task.test_case != (1, 2, 3, 4) else (2, 2, 2, 2)  # user_goal's example
    try:
        example = evaluate_rule(task.rule, shown)
    except (ZeroDivisionError, ValueError):
        example = None
    rng = np.random.default_rng([position, zlib.crc32(task.id.encode())])
    for _ in range(1000):
        x = tuple(int(v) for v in rng.integers(1, 10, size=4))
        try:
            value = evaluate_rule(task.rule, x)
        except (ZeroDivisionError, ValueError):
            continue
        if (x not in (task.test_case, shown) and value not in x and value not in (example, 0)
                and abs(value) < 1e6):
            break
    else:
        raise ValueError(f"FunctionGym {task.id}: no probe inputs found")
    a, b, c, d = x
    questions = (f"What is f({a}, {b}, {c}, {d})?",
                 f"Can you evaluate f at a={a}, b={b}, c={c}, d={d}?",
                 f"What do you get for the numbers {a}, {b}, {c} and {d}?")
    return Fact(env.name, task.id, "value", f"f{x} = {format_number(value)}", questions,
                lambda reply: function_reward(reply, value) == 1.0)
