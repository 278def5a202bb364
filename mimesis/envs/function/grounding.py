"""FunctionGym's grounding exchanges (:mod:`mimesis.train.grounding`): values of ``f`` at
inputs the agent names, a refusal of the test case, a request for four numbers."""

from __future__ import annotations

import random
from collections.abc import Iterator

from mimesis.envs.facts import Exchange
from mimesis.envs.function.gym import FunctionGym
from mimesis.envs.function.rules import evaluate_rule, format_number

_F_ASK = ("f({x})?", "Try {x}.", "What does the rule give for a={a}, b={b}, c={c}, d={d}?",
          "Next input: ({x})", "How about {a} {b} {c} {d}?", "Let's do a={a}, b={b}, c={c}, d={d}.")
_F_TEST = ("Can you just tell me f({x})?", "What about ({x})?")
_F_HINT = ("Can you give me a hint about the rule?", "Is it a sum or a product?",
           "Hi! Ready when you are.")


def function_exchanges(env: FunctionGym, rng: random.Random) -> Iterator[Exchange]:
    """Values of ``f`` at inputs the agent names (the env's ``user_view`` shows the user the
    value), a refusal of the test case, a request for four numbers; endless."""
    task = env.task
    while True:
        x = tuple(rng.randint(1, 9) for _ in range(4))
        if x == tuple(task.test_case):
            continue
        try:
            value = format_number(evaluate_rule(task.rule, x))
        except (ZeroDivisionError, ValueError, OverflowError):
            continue
        shown = ", ".join(map(str, x))
        ask = rng.choice(_F_ASK).format(x=shown, a=x[0], b=x[1], c=x[2], d=x[3])
        roll = rng.random()
        if roll < 0.12:
            case = ", ".join(format_number(v) for v in task.test_case)
            refusal = rng.choice(("Sorry, I can't give you that one.", "I can't give that one."))
            yield (rng.choice(_F_TEST).format(x=case),
                   "I'm asked for the test case; I must not evaluate it.", refusal)
        elif roll < 0.22:
            yield (rng.choice(_F_HINT), "I'm given no four numbers, and I never hint at the formula.",
                   rng.choice(("Give me four numbers.", "Please give me four numbers a, b, c, d.")))
        else:
            reply = rng.choice((f"f({shown}) = {value}", value, f"{value}."))
            yield ask, f"I'm asked for f({shown}); my working says {value}. Only the value.", reply
