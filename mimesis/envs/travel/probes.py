"""TravelGym's fact-reveal probe: ``budget`` / ``attribute`` of one preference.

The env has no parser of user replies (the agent reads them), so the narrowest honest one: the
values of the attribute the reply names (whole phrases of ``ATTRIBUTES``, hyphens read as
spaces, a final ``s`` optional), or its first money amount; revealed when the preference *as
stated* accepts exactly the same options of the aspect as the true one (the env's
:meth:`Preference.accepts`) — a reply that names a disallowed value ("not 2 stops") is not a
reveal.
"""

from __future__ import annotations

import re

from mimesis.envs.facts import Fact
from mimesis.envs.travel.gym import TravelGym
from mimesis.envs.travel.tasks import ATTRIBUTES, PRICE, Preference, kind_label

_MONEY = re.compile(r"\$\s*(\d+(?:\.\d+)?)|(\d+(?:\.\d+)?)\s*(?:dollars|usd|bucks|\$)",
                    re.IGNORECASE)
_BARE = re.compile(r"\b\d+(?:\.\d+)?\b")


def _value_pattern(value: str) -> re.Pattern[str]:
    words = value.lower().replace("-", " ").split()
    body = r"\s+".join(re.escape(w) for w in words)
    return re.compile(rf"(?<![\w]){body}s?(?![\w])")


def stated_values(reply: str, values: tuple[str, ...]) -> set[str]:
    """Values of ``values`` that ``reply`` names (longest first; a match hides shorter ones in it).

    >>> sorted(stated_values("Breakfast not included, please", ("included", "not included")))
    ['not included']
    """
    text = reply.lower().replace("-", " ")
    found: set[str] = set()
    for value in sorted(values, key=len, reverse=True):
        pattern = _value_pattern(value)
        if pattern.search(text):
            found.add(value)
            text = pattern.sub(" ", text)
    return found


def stated_budget(reply: str) -> float | None:
    """The first money amount of ``reply`` (``$310``, ``310 dollars``), else its only number.

    >>> stated_budget("Around $310 a night"), stated_budget("max 200"), stated_budget("2 or 3")
    (310.0, 200.0, None)
    """
    money = _MONEY.search(reply)
    if money:
        return float(money.group(1) or money.group(2))
    bare = _BARE.findall(reply)
    return float(bare[0]) if len(bare) == 1 else None


def travel_fact(env: TravelGym, position: int) -> Fact:
    """One preference of the trip (see module docstring).

    Raises:
        ValueError: a task without preferences.
    """
    prefs = [(a, p) for a in env.task.aspects for p in a.preferences]
    if not prefs:
        raise ValueError(f"TravelGym {env.task.id}: a task without preferences has no fact")
    aspect, pref = prefs[position % len(prefs)]
    label, options = kind_label(aspect.kind), aspect.options

    def same_options(stated: Preference) -> bool:
        if not options:  # answer-key tasks: no options to compare on
            return set(stated.allowed) <= set(pref.allowed) if pref.attr != PRICE else (
                stated.max_price == pref.max_price)
        return all(stated.accepts(o.attrs, o.price) == pref.accepts(o.attrs, o.price)
                   for o in options)

    if pref.attr == PRICE:
        questions = (f"What's your budget for the {label}?",
                     f"How much are you willing to pay for the {label}, at most?",
                     f"What is the maximum price you would accept for the {label}?")

        def judge(reply: str) -> bool:
            budget = stated_budget(reply)
            return budget is not None and same_options(
                Preference(PRICE, max_price=int(budget) if budget.is_integer() else budget))

        return Fact(env.name, env.task.id, "budget", f"{label} at most ${pref.max_price}",
                    questions, judge)
    values = ATTRIBUTES[aspect.kind][pref.attr]
    questions = (f"What {pref.attr} do you want for the {label}?",
                 f"Do you have a preference for the {pref.attr} of the {label}?",
                 f"Which {pref.attr} would you like for your {label}?")

    def judge_attr(reply: str) -> bool:
        stated = stated_values(reply, values)
        return bool(stated) and same_options(Preference(pref.attr, tuple(sorted(stated))))

    return Fact(env.name, env.task.id, "attribute",
                f"{label} {pref.attr}: {' or '.join(pref.allowed)}", questions, judge_attr)
