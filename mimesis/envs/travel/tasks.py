"""TravelGym tasks: procedural trip preferences and candidate options, and the UserRL reader.

The task shape follows UserRL's TravelGym (SalesforceAIResearch/UserRL, ``gyms/TravelGym``,
Apache-2.0): a trip has one or more *aspects* (flight, hotel, apartment, rental car,
restaurant); for each the user holds preferences and wants "the cheapest option that meets my
preferences"; options that meet every preference are *acceptable*, the cheapest of them is the
*best*. Option ids start with the aspect's initial (``F3``, ``H7``), as in UserRL.

Generation guarantees per aspect: 2–3 acceptable options with distinct prices (so exactly one
best); every other option breaks at least one preference; every preference is broken by some
option (given ``n_options >= 3 + n_prefs``); at least one unacceptable option is cheaper than
the best (so "pick the cheapest" without asking fails).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

ATTRIBUTES: dict[str, dict[str, tuple[str, ...]]] = {
    "flight": {
        "airline": ("SkyWays", "Pacific Air", "Northern Star", "BlueJet", "Atlas Airlines"),
        "cabin class": ("economy", "premium economy", "business"),
        "departure time": ("early morning", "morning", "afternoon", "evening", "red-eye"),
        "stops": ("nonstop", "1 stop", "2 stops"),
        "seat": ("window", "aisle", "middle"),
        "baggage": ("carry-on only", "1 checked bag", "2 checked bags"),
    },
    "hotel": {
        "star rating": ("2 stars", "3 stars", "4 stars", "5 stars"),
        "area": ("city center", "old town", "near the airport", "waterfront", "business district"),
        "breakfast": ("included", "not included"),
        "room type": ("single", "double", "twin", "suite"),
        "cancellation": ("free cancellation", "non-refundable"),
    },
    "apartment": {
        "size": ("studio", "1 bedroom", "2 bedrooms", "3 bedrooms"),
        "kitchen": ("full kitchen", "kitchenette", "no kitchen"),
        "parking": ("free parking", "paid parking", "no parking"),
        "area": ("downtown", "residential", "near the beach", "suburbs"),
        "laundry": ("washer in unit", "shared laundry", "no laundry"),
    },
    "rental_car": {
        "car type": ("compact", "sedan", "SUV", "minivan", "convertible"),
        "transmission": ("automatic", "manual"),
        "fuel": ("petrol", "diesel", "hybrid", "electric"),
        "company": ("Rent-A-Ride", "Velocity", "EasyCar", "Summit Rentals"),
        "pickup": ("airport", "downtown office", "hotel delivery"),
    },
    "restaurant": {
        "cuisine": ("Italian", "Japanese", "Mexican", "Indian", "French", "Thai", "vegetarian"),
        "ambience": ("casual", "fine dining", "family-friendly", "romantic"),
        "seating": ("indoor", "outdoor terrace", "rooftop"),
        "dietary options": ("vegan dishes", "gluten-free dishes", "no special options"),
        "meal time": ("lunch", "early dinner", "late dinner"),
    },
}
INITIALS = {"flight": "F", "hotel": "H", "apartment": "A", "rental_car": "C", "restaurant": "R"}
KIND_LABELS = {"rental_car": "rental car"}
PRICE_RANGE = {  # (low, high, unit) in USD
    "flight": (120, 900, "per ticket"),
    "hotel": (60, 420, "per night"),
    "apartment": (70, 380, "per night"),
    "rental_car": (25, 160, "per day"),
    "restaurant": (15, 140, "per person"),
}
CITIES = (
    "Boston",
    "Chicago",
    "Denver",
    "Seattle",
    "Miami",
    "Austin",
    "Toronto",
    "London",
    "Paris",
    "Rome",
    "Madrid",
    "Berlin",
    "Lisbon",
    "Tokyo",
    "Seoul",
    "Singapore",
    "Sydney",
    "Dubai",
    "Mexico City",
    "Cape Town",
)
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
PRICE = "price"


@dataclass(frozen=True)
class Preference:
    """One preference: ``attr`` must be one of ``allowed`` (or, for ``price``, ≤ ``max_price``).

    ``hidden`` preferences are revealed only when the agent asks about that attribute.
    """

    attr: str
    allowed: tuple[str, ...] = ()
    max_price: int | None = None
    hidden: bool = False

    def accepts(self, attrs: Mapping[str, str], price: int) -> bool:
        if self.attr == PRICE:
            return self.max_price is not None and price <= self.max_price
        return attrs.get(self.attr) in self.allowed


@dataclass(frozen=True)
class TravelOption:
    """A candidate: ``id`` (initial + number), categorical ``attrs`` and ``price`` in USD."""

    id: str
    attrs: Mapping[str, str]
    price: int


@dataclass(frozen=True)
class TravelAspect:
    """One part of the trip. ``options`` and ``preferences`` are empty for answer-key-only tasks
    read from UserRL's parquet tables."""

    kind: str
    preferences: tuple[Preference, ...]
    options: tuple[TravelOption, ...]
    best_id: str
    acceptable_ids: tuple[str, ...]


@dataclass(frozen=True)
class TravelTask:
    """A trip: the user's opening ``request`` and its aspects (one per kind)."""

    id: str
    request: str
    aspects: tuple[TravelAspect, ...]


def kind_label(kind: str) -> str:
    return KIND_LABELS.get(kind, kind)


def _preferences(
    rng: np.random.Generator, kind: str, n_prefs: int, n_hidden: int
) -> list[Preference]:
    # A lone budget preference would make the cheapest option overall the best one.
    names = [*ATTRIBUTES[kind], PRICE] if n_prefs >= 2 else list(ATTRIBUTES[kind])
    chosen = [names[i] for i in rng.choice(len(names), size=n_prefs, replace=False)]
    hidden = set(rng.choice(n_prefs, size=n_hidden, replace=False).tolist())
    prefs = []
    for i, attr in enumerate(chosen):
        if attr == PRICE:
            prefs.append(Preference(PRICE, max_price=0, hidden=i in hidden))  # set with prices
            continue
        values = ATTRIBUTES[kind][attr]
        size = int(rng.integers(1, max(2, len(values) // 2) + 1))
        picked = rng.choice(len(values), size=min(size, len(values) - 1), replace=False)
        prefs.append(Preference(attr, tuple(values[j] for j in sorted(picked)), hidden=i in hidden))
    return prefs


def _prices(rng: np.random.Generator, kind: str, n_good: int, n_bad: int) -> tuple[list, list]:
    """Distinct prices: acceptable ones in the upper-middle band, the first bad one below all."""
    low, high, _ = PRICE_RANGE[kind]
    grid = np.arange(low, high + 1, 5)
    band = grid[(grid >= low + 0.3 * (high - low)) & (grid <= low + 0.7 * (high - low))]
    good = sorted(int(p) for p in rng.choice(band, size=n_good, replace=False))
    cheaper = grid[grid < good[0]]
    rest = [p for p in grid if p not in good]
    bad = [int(rng.choice(cheaper))]
    bad += [int(p) for p in rng.choice([p for p in rest if p != bad[0]], n_bad - 1, replace=False)]
    return good, bad


def make_aspect(
    rng: np.random.Generator, kind: str, n_prefs: int, n_options: int, n_hidden: int
) -> TravelAspect:
    """Draw preferences and ``n_options`` candidates for one aspect (see module docstring)."""
    prefs = _preferences(rng, kind, n_prefs, n_hidden)
    n_good = int(rng.integers(2, 4))
    good_prices, bad_prices = _prices(rng, kind, n_good, n_options - n_good)
    budget = next((p for p in prefs if p.attr == PRICE), None)
    if budget is not None:  # just above the dearest acceptable option, rounded to $10
        max_price = (good_prices[-1] // 10 + 1) * 10
        prefs[prefs.index(budget)] = Preference(PRICE, max_price=max_price, hidden=budget.hidden)
    rows: list[tuple[dict[str, str], int, bool]] = []
    for price in good_prices:
        rows.append((_attrs(rng, kind, prefs, broken=None), price, True))
    # Budget last: the first (cheapest-than-best) bad option must break a categorical one.
    to_break = sorted(prefs, key=lambda p: p.attr == PRICE)
    for i, price in enumerate(bad_prices):
        broken = to_break[i % len(to_break)]
        if broken.attr == PRICE:  # break the budget: move above it
            price = max(price, broken.max_price + 5 * int(rng.integers(1, 20)))
        rows.append((_attrs(rng, kind, prefs, broken=broken), price, False))
    order = rng.permutation(len(rows))
    options = [
        TravelOption(f"{INITIALS[kind]}{n + 1}", rows[i][0], rows[i][1])
        for n, i in enumerate(order)
    ]
    acceptable = [o for o, i in zip(options, order, strict=True) if rows[i][2]]
    best = min(acceptable, key=lambda o: o.price)
    others = tuple(o.id for o in acceptable if o.id != best.id)
    return TravelAspect(kind, tuple(prefs), tuple(options), best.id, others)


def _attrs(
    rng: np.random.Generator, kind: str, prefs: list[Preference], broken: Preference | None
) -> dict[str, str]:
    attrs = {}
    for attr, values in ATTRIBUTES[kind].items():
        pref = next((p for p in prefs if p.attr == attr), None)
        pool = values if pref is None else pref.allowed
        if pref is not None and pref is broken:
            pool = tuple(v for v in values if v not in pref.allowed)
        attrs[attr] = str(rng.choice(pool))
    return attrs


def make_task(
    rng: np.random.Generator, n_aspects: int, n_prefs: int, n_options: int, hidden_fraction: float
) -> TravelTask:
    """Draw a trip with ``n_aspects`` distinct aspects and its opening request."""
    kinds = [list(INITIALS)[i] for i in sorted(rng.choice(len(INITIALS), n_aspects, False))]
    n_hidden = round(hidden_fraction * n_prefs)
    aspects = tuple(make_aspect(rng, k, n_prefs, n_options, n_hidden) for k in kinds)
    origin, dest = (CITIES[i] for i in rng.choice(len(CITIES), 2, replace=False))
    date = f"{MONTHS[int(rng.integers(12))]} {int(rng.integers(1, 29))}"
    needs = " and ".join(f"{'an' if k[0] in 'aeiou' else 'a'} {kind_label(k)}" for k in kinds)
    request = (
        f"I'm planning a trip from {origin} to {dest} on {date} and I need {needs}. My budget "
        "is limited, so as long as my preferences are met I'd like the cheapest option for each."
    )
    return TravelTask(f"gen-{int(rng.integers(1 << 62)):x}", request, aspects)
