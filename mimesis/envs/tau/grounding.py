"""TauGym's grounding exchanges (:mod:`mimesis.train.grounding`): the identifiers the customer
knows, asked for in other wordings than the probes'."""

from __future__ import annotations

import random
from collections.abc import Iterator

from mimesis.envs.facts import Exchange
from mimesis.envs.tau.gym import TauGym
from mimesis.envs.tau.probes import tau_facts

_TAU_ASK = {
    "user_id": ("To start, your user id?", "I need the user ID on the account.",
                "Please share your user id."),
    "name": ("Your full name?", "Could I get your first and last name?", "Name on the account?"),
    "zip": ("Zip code?", "What zip is the account under?", "And the postal code?"),
    "reservation_id": ("The booking code, please?", "Do you have the reservation code?",
                       "Which booking is it?"),
    "order_id": ("Order ID please?", "What's the number of the order?", "Which order is it?"),
    "email": ("And your email?", "Email on file?", "What email do you use with us?"),
}


def tau_exchanges(env: TauGym, rng: random.Random) -> Iterator[Exchange]:
    """The identifiers the customer knows (user id, name, zip, reservation, order, email)."""
    facts = tau_facts(env)
    rng.shuffle(facts)
    for kind, ids in facts:
        value = ids[0]
        yield (rng.choice(_TAU_ASK[kind]), f"I'm asked for my {kind.replace('_', ' ')}: {value}.",
               rng.choice((value, f"It's {value}.", f"Sure: {value}")))
