"""TravelGym's grounding exchanges (:mod:`mimesis.train.grounding`): the user's preferences,
one question each."""

from __future__ import annotations

import random
from collections.abc import Iterator

from mimesis.envs.facts import Exchange
from mimesis.envs.travel.gym import TravelGym, preference_text
from mimesis.envs.travel.tasks import PRICE, PRICE_RANGE, Preference, kind_label

_T_OPEN = ("Hi! What are you looking for in a {label}?",
           "Tell me what matters to you for the {label}.",
           "Okay, let's find your {label}. Any requirements?")
_T_ATTR = ("Any {attr} you'd prefer?", "And the {attr}?", "What about the {attr} for the {label}?",
           "Is there a {attr} you need?", "Thoughts on {attr}?")
_T_BUDGET = ("What can you spend on the {label}?", "Price limit for the {label}?",
             "How much max for the {label}?", "Is there a budget cap for the {label}?")


def travel_exchanges(env: TravelGym, rng: random.Random) -> Iterator[Exchange]:
    """What the user wants for an aspect (a preference the goal says to give then), then the
    other preferences one question each (attribute values or budget, as the goal states them)."""
    prefs = [(a, p) for a in env.task.aspects for p in a.preferences]
    shown = [(a, p) for a, p in prefs if not p.hidden]
    rest = [(a, p) for a, p in prefs if p.hidden]
    rng.shuffle(rest)
    if shown:
        aspect, pref = rng.choice(shown)
        label = kind_label(aspect.kind)
        yield (rng.choice(_T_OPEN).format(label=label),
               f"I'm asked what I want for the {label}: {preference_text(aspect.kind, pref)}.",
               _travel_reply(pref, aspect.kind, rng))
        rest += [(a, p) for a, p in shown if p is not pref]
    for aspect, pref in rest:
        label = kind_label(aspect.kind)
        if pref.attr == PRICE:
            ask = rng.choice(_T_BUDGET).format(label=label)
            why = (f"I'm asked my budget for the {label}: at most ${pref.max_price} "
                   f"{PRICE_RANGE[aspect.kind][2]}.")
        else:
            ask = rng.choice(_T_ATTR).format(attr=pref.attr, label=label)
            why = f"I'm asked about the {pref.attr}: {preference_text(aspect.kind, pref)}."
        yield ask, why, _travel_reply(pref, aspect.kind, rng)


def _travel_reply(pref: Preference, kind: str, rng: random.Random) -> str:
    if pref.attr == PRICE:
        unit = PRICE_RANGE[kind][2]
        return rng.choice((f"At most ${pref.max_price} {unit}.", f"No more than ${pref.max_price}.",
                           f"${pref.max_price} max."))
    values = " or ".join(pref.allowed)
    return rng.choice((f"{values}.", f"{values}, please.", f"I'd like {values}."))
