"""TravelGym expert: list the options, ask about what they differ in, pick the cheapest match.

The option tables of ``[search]`` give each part's attributes and values; the user's replies are
read for those values (longest phrase first, so ``not included`` is not ``included``; a value
after ``no``/``not``/``avoid`` … is excluded) and for a budget (``$250``, ``250 dollars``, after
``budget``/``under``/``at most``). The answer per part is the cheapest option meeting every
stated preference; when none does, the one meeting the most, then the cheapest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mimesis.envs.travel.tasks import ATTRIBUTES, INITIALS, kind_label
from mimesis.rl.experts.base import Expert, replies_to_actions, tool_results
from mimesis.rollout.engine import AgentView

_PARTS = re.compile(r"for each part \(([^)]*)\)")
_TABLE = re.compile(r"Options for the ([a-z ]+):\n((?:[A-Z]\d+ \|.*(?:\n|$))+)")
_RECORDED = re.compile(r"Recorded ([A-Z]\d+) for the ([a-z ]+)\.")
_NEGATION = re.compile(r"\b(not|no|don'?t|never|avoid|without|hate|anything but|rather not)\b"
                       r"[^.,;!?]{0,20}$", re.IGNORECASE)
_MONEY = re.compile(r"\$\s*(\d{2,5})|(\d{2,5})\s*(?:dollars|usd|bucks)|(?:budget|under|at most|"
                    r"max(?:imum)?|below|up to|no more than|less than)\D{0,12}(\d{2,5})",
                    re.IGNORECASE)
_LABEL_KIND = {kind_label(k): k for k in ATTRIBUTES}
_ASKED_ALONE = re.compile(r"(?:preference for the (.+?)|what is your (budget)) (?:of|for) the "
                          r"([a-z ]+?)\?")


@dataclass
class Option:
    id: str
    attrs: dict[str, str]
    price: int


@dataclass
class Wishes:
    """Preferences stated for one part: allowed / excluded values per attribute, budget."""

    allowed: dict[str, set[str]] = field(default_factory=dict)
    excluded: dict[str, set[str]] = field(default_factory=dict)
    budget: int | None = None

    def score(self, o: Option) -> int:
        """Number of stated preferences ``o`` meets."""
        met = sum(o.attrs.get(a) in vs for a, vs in self.allowed.items())
        met += sum(o.attrs.get(a) not in vs for a, vs in self.excluded.items())
        return met + int(self.budget is not None and o.price <= self.budget)

    @property
    def size(self) -> int:
        return len(self.allowed) + len(self.excluded) + int(self.budget is not None)


def parse_parts(prompt: str) -> list[str]:
    """Part labels the prompt asks to answer (``hotel``, ``rental car`` …)."""
    m = _PARTS.search(prompt)
    return [p.strip() for p in m.group(1).split(",")] if m else []


def parse_tables(text: str) -> dict[str, list[Option]]:
    """Option tables of a ``[search]`` result, by part label."""
    tables: dict[str, list[Option]] = {}
    for m in _TABLE.finditer(text):
        rows = []
        for line in m.group(2).strip().splitlines():
            cells = [c.strip() for c in line.split("|")]
            attrs = dict(c.split(": ", 1) for c in cells[1:] if ": " in c)
            price = int(re.sub(r"\D", "", attrs.pop("price", "0").split()[0]) or 0)
            rows.append(Option(cells[0], attrs, price))
        tables[m.group(1).strip()] = rows
    return tables


def vocabulary(label: str, options: list[Option]) -> dict[str, set[str]]:
    """Values per attribute of a part: those in its table and the env's attribute lists."""
    vocab = {a: {o.attrs[a] for o in options if a in o.attrs} for a in options[0].attrs} \
        if options else {}
    for attr, values in ATTRIBUTES.get(_LABEL_KIND.get(label, label), {}).items():
        vocab.setdefault(attr, set()).update(values)
    return vocab


def read_wishes(reply: str, vocab: dict[str, set[str]], wishes: Wishes) -> None:
    """Add the preferences ``reply`` states (in ``vocab`` terms) to ``wishes``."""
    text = reply.lower()
    phrases = sorted(((v, a) for a, vs in vocab.items() for v in vs), key=lambda x: -len(x[0]))
    for value, attr in phrases:
        for m in re.finditer(rf"(?<![\w-]){re.escape(value.lower())}(?![\w-])", text):
            negated = _NEGATION.search(text[max(0, m.start() - 30):m.start()])
            target = wishes.excluded if negated else wishes.allowed
            target.setdefault(attr, set()).add(value)
            text = text[:m.start()] + " " * (m.end() - m.start()) + text[m.end():]
    amounts = [int(next(g for g in m.groups() if g)) for m in _MONEY.finditer(reply)]
    if amounts:
        wishes.budget = max(amounts)


def choose(options: list[Option], wishes: Wishes) -> Option:
    """Cheapest option meeting every wish; else most wishes met, then cheapest."""
    return min(options, key=lambda o: (wishes.size - wishes.score(o), o.price))


class TravelExpert(Expert):
    """Reads: the parts named in the prompt, the option tables its ``[search]`` returns, the
    user's replies and the env's "Recorded …" notes. Strategy: one ``[search]`` for every part;
    an open question per part, then about each attribute the user has not stated, one at a time,
    the ones on which the options differ most first (when turns are too few for that, first one
    question about all of them); ``[answer]`` per part."""

    env = "TravelGym"

    def act(self, view: AgentView) -> str:
        parts = parse_parts(view.prompt)
        answered = {m.group(2) for t in view.turns for m in _RECORDED.finditer(t.obs)}
        todo = [p for p in parts if p not in answered] or parts
        results = tool_results(view)
        if not results and view.turns_left > len(todo):
            return f"[search] {' and '.join(parts)}"
        tables = {k: v for _, r in results for k, v in parse_tables(r).items()}
        qa = replies_to_actions(view)
        if view.turns_left > len(todo):
            question = self._question(view, todo, tables, qa)
            if question:
                return question
        part = todo[0]
        wishes = self._wishes(part, tables.get(part, []), qa, parts)
        options = tables.get(part, [])
        if not options:  # no table to choose from: a guess that is at least an option id
            return f"[answer] {INITIALS.get(_LABEL_KIND.get(part, part), 'X')}1"
        return f"[answer] {choose(options, wishes).id}"

    def _question(self, view: AgentView, todo: list[str], tables, qa) -> str | None:
        asked = " ".join(q.lower() for q, _ in qa)
        said = " ".join(r.lower() for _, r in qa)
        alone = {(a or b, p) for a, b, p in _ASKED_ALONE.findall(asked)}  # asked on their own
        items = []  # (part, attribute) the user has not stated, not yet asked on its own
        for part in todo:
            options = tables.get(part, [])
            vocab = vocabulary(part, options)
            # most telling first: an attribute on which the options differ more
            attrs = sorted(list(options[0].attrs) if options else [],
                           key=lambda a: -len({o.attrs[a] for o in options}))
            for attr in attrs:
                if (attr, part) not in alone and not any(v.lower() in said for v in vocab[attr]):
                    items.append((part, attr))
            if ("budget", part) not in alone and not _MONEY.search(said):
                items.append((part, "budget"))
        if not items:
            return None
        questions = view.turns_left - len(todo)
        part = items[0][0]
        if part not in asked and questions >= len(items) + 1:
            return f"[action] What matters most to you for the {part}?"
        if part not in asked and questions < len(items):
            # Too few turns for one question each: one question about all of them (a user who
            # answers only part of it is asked about the rest one at a time, turns allowing).
            attrs = [a for p, a in items if p == part and a != "budget"]
            listed = ", ".join(attrs[:-1]) + " and " + attrs[-1] if len(attrs) > 1 else attrs[0]
            tail = ", and what is your budget?" if (part, "budget") in items else "?"
            return f"[action] For the {part}, what do you prefer for {listed}{tail}"
        attr = items[0][1]
        if attr == "budget":
            return f"[action] What is your budget for the {part}?"
        return f"[action] Do you have a preference for the {attr} of the {part}?"

    @staticmethod
    def _wishes(part: str, options: list[Option], qa, parts: list[str]) -> Wishes:
        wishes = Wishes()
        vocab = vocabulary(part, options)
        for question, reply in qa:
            named = [p for p in parts if p in question.lower()]
            if reply and (part in named or not named):
                read_wishes(reply, vocab, wishes)
        return wishes
