"""Scripted probes of the fact-reveal check: one hidden fact per task, its phrasings, its judge.

Every training environment hides facts in the user's scenario; an agent can only succeed when the
user states them when asked (docs/pitfalls.md #12). :func:`task_fact` picks one fact of the env's
current task and returns the questions that ask for it directly (≥ 3 phrasings per fact kind) and a
judge ``reply -> bool`` that decides, with the environment's own parser where it has one, whether
a user reply states the fact:

- FunctionGym — ``value``: "What is f(a, b, c, d)?" at inputs drawn per task; judged by the env's
  own reward function (:func:`~mimesis.envs.function_gym.function_reward`: the number after the
  last ``=``, else the first number, within 0.01 of the true value). Inputs are drawn so that the
  true value is none of the inputs, not the example value the goal text shows and not 0 (which
  a reply like "f(x) = 0" states by luck).
- TravelGym — ``budget`` / ``attribute`` of one preference. The env has no parser of user
  replies (the agent reads them), so the narrowest honest one: the values of the attribute the
  reply names (whole phrases of ``ATTRIBUTES``, hyphens read as spaces, a final ``s`` optional),
  or its first money amount; revealed when the preference *as stated* accepts exactly the same
  options of the aspect as the true one (the env's :meth:`Preference.accepts`) — a reply that
  names a disallowed value ("not 2 stops") is not a reveal.
- TurtleGym — ``yes_no``: a question whose answer the story fixes (data:
  ``mimesis/envs/data/turtle_probes.json``, one yes and one no question per shipped story, so a
  user that always says "yes" scores 50%). The env has no parser (the user is told to answer
  Yes/No/Irrelevant): :func:`yes_no` reads the reply's answer words; both or none → no answer.
- TauGym — ``user_id``, ``name``, ``zip``, ``reservation_id``, ``order_id``, ``email`` found in
  the task's user scenario (its ``unknown_info`` excluded); revealed when the reply contains the
  identifier as a token (case and a leading ``#`` ignored; a name needs first and last name), as
  the agent must pass it verbatim to tau2's tools.
- PersuadeGym — ``stance``: the starting stance; judged by the env's own
  :func:`~mimesis.envs.persuade_gym.parse_stance`. Questions describe the scale without its
  words ("agree", "neutral" …), which the parser would read.

:func:`check_fact` refuses a fact one of whose questions its own judge accepts: a user that
echoes the question must never score.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

import numpy as np

from mimesis.envs.base import UserEnv

Judge = Callable[[str], bool]


@dataclass(frozen=True)
class Fact:
    """One hidden fact of one task.

    Attributes:
        env: Environment name.
        task_id: The task's id.
        kind: What is asked (``value``, ``budget``, ``attribute``, ``yes_no``, ``user_id`` …).
        truth: The fact, as text for reports.
        questions: Phrasings that ask for it directly (the agent's message).
        judge: ``judge(reply)`` is True when the reply states the fact (see module docstring).
    """

    env: str
    task_id: str
    kind: str
    truth: str
    questions: tuple[str, ...]
    judge: Judge = field(compare=False, repr=False)


def check_fact(fact: Fact) -> Fact:
    """Return ``fact``; raise when a question is judged to reveal it (echo would score).

    Raises:
        ValueError: a question of ``fact`` passes its own judge.
    """
    leaks = [q for q in fact.questions if fact.judge(q)]
    if leaks:
        raise ValueError(f"{fact.env} {fact.task_id}: probe states its own fact: {leaks[0]!r}")
    return fact


# ----------------------------------------------------------------------------- FunctionGym
def function_fact(env: UserEnv, position: int) -> Fact:
    """The value of f at inputs drawn for this task (see module docstring)."""
    from mimesis.envs.function_gym import function_reward
    from mimesis.envs.function_rules import evaluate_rule, format_number

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


# ----------------------------------------------------------------------------- TravelGym
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


def travel_fact(env: UserEnv, position: int) -> Fact:
    """One preference of the trip (see module docstring)."""
    from mimesis.envs.travel_data import ATTRIBUTES, PRICE, Preference, kind_label

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


# ----------------------------------------------------------------------------- TurtleGym
_YES = re.compile(r"\b(?:yes|yeah|yep|yup|correct)\b", re.IGNORECASE)
_NO = re.compile(r"\b(?:no|nope|nah|incorrect)\b(?!\s+(?:idea|clue))", re.IGNORECASE)
_IRRELEVANT = re.compile(r"\birrelevant\b|\bdoes(?:n't| not) matter\b", re.IGNORECASE)
TURTLE_PHRASINGS = ("{q}", "Quick question: {q}", "Let me ask you this. {q}")


def yes_no(reply: str) -> str | None:
    """The host's answer in ``reply``: ``yes``, ``no``, ``irrelevant``, or ``None`` (none or
    several of them).

    >>> yes_no("Yes."), yes_no("nope, not at all"), yes_no("Irrelevant"), yes_no("Maybe?")
    ('yes', 'no', 'irrelevant', None)
    >>> yes_no("Yes and no.")
    """
    found = [name for name, rx in (("yes", _YES), ("no", _NO), ("irrelevant", _IRRELEVANT))
             if rx.search(reply)]
    return found[0] if len(found) == 1 else None


@cache
def turtle_probes() -> dict[str, list[dict[str, str]]]:
    """Story id → ``[{question, answer}]`` from ``mimesis/envs/data/turtle_probes.json``."""
    path = resources.files("mimesis.envs") / "data" / "turtle_probes.json"
    return json.loads(path.read_text(encoding="utf-8"))["probes"]


def turtle_fact(env: UserEnv, position: int) -> Fact:
    """A yes/no question the story fixes; even positions ask a yes, odd a no question (when the
    story has both)."""
    probes = turtle_probes().get(env.task.id)
    if not probes:
        raise ValueError(f"TurtleGym {env.task.id}: no yes/no probes for this story")
    wanted = "yes" if position % 2 == 0 else "no"
    probe = next((p for p in probes if p["answer"] == wanted), probes[0])
    answer = probe["answer"]
    questions = tuple(f.format(q=probe["question"]) for f in TURTLE_PHRASINGS)
    return Fact(env.name, env.task.id, "yes_no", f"{probe['question']} -> {answer}", questions,
                lambda reply: yes_no(reply) == answer)


# ----------------------------------------------------------------------------- TauGym
TAU_KINDS: dict[str, tuple[re.Pattern[str], tuple[str, ...]]] = {
    "user_id": (re.compile(r"\b[a-z]+_[a-z]+_\d{3,5}\b"), (
        "What is your user id?", "Could you give me your user ID so I can pull up your account?",
        "Which user id is your account under?")),
    "name": (re.compile(r"\b(?:You are|Your name is|You name is|My name is)\s+([A-Z][a-z]+)\s+"
                        r"([A-Z][a-z]+)\b"), (
        "What is your name?", "Can I have your first and last name, please?",
        "Who am I speaking with? Your full name, please.")),
    "zip": (re.compile(r"\b\d{5}\b"), (
        "What is your zip code?", "Can you confirm the zip code on your account?",
        "Which zip code do you live in?")),
    # Six letters and digits, both; not a flight number (three letters, three digits: HAT170).
    "reservation_id": (re.compile(r"\b(?![A-Z]{3}\d{3}\b)(?=[A-Z0-9]*\d)(?=[A-Z0-9]*[A-Z])"
                                  r"[A-Z0-9]{6}\b"), (
        "What is your reservation number?",
        "Can you tell me the confirmation code of your booking?",
        "Which reservation ID is this about?")),
    "order_id": (re.compile(r"#W\d{7}\b"), (
        "What is your order number?", "Could you give me the order ID?",
        "Which order ID is this about?")),
    "email": (re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b"), (
        "What is the email address on your account?", "Can I have your email, please?",
        "Which email address did you sign up with?")),
}


def _token_in(token: str, reply: str) -> bool:
    token = token.lower().lstrip("#")
    return re.search(rf"(?<![\w@.]){re.escape(token)}(?![\w@])", reply.lower().replace("#", " ")
                     ) is not None


def tau_known_text(env: UserEnv) -> str:
    """What the customer knows: the task's user scenario without its ``unknown_info``."""
    scenario = env.task.task.user_scenario
    ins = scenario.instructions
    if isinstance(ins, str):
        return ins
    parts = (ins.known_info, ins.reason_for_call, ins.task_instructions)
    return "\n".join(p for p in parts if p)


def tau_facts(env: UserEnv) -> list[tuple[str, tuple[str, ...]]]:
    """``(kind, identifiers)`` of every kind of :data:`TAU_KINDS` the scenario states."""
    text = tau_known_text(env)
    known = env.task.task.user_scenario.instructions
    known_info = text if isinstance(known, str) else (known.known_info or "")
    out = []
    for kind, (rx, _) in TAU_KINDS.items():
        source = known_info if kind in ("name", "zip") else text
        if kind == "reservation_id" and env.task.domain != "airline":
            continue
        found = [" ".join(m.groups()) if m.groups() else m.group(0) for m in rx.finditer(source)]
        if found:
            out.append((kind, tuple(dict.fromkeys(found))))
    return out


def tau_fact(env: UserEnv, position: int) -> Fact:
    """One identifier the customer knows (kinds in :data:`TAU_KINDS` order, by position)."""
    facts = tau_facts(env)
    if not facts:
        raise ValueError(f"TauGym {env.task.id}: the scenario states no identifier")
    kind, ids = facts[position % len(facts)]

    def judge(reply: str) -> bool:
        if kind == "name":
            return any(all(_token_in(w, reply) for w in name.split()) for name in ids)
        return any(_token_in(i, reply) for i in ids)

    return Fact(env.name, env.task.id, kind, " / ".join(ids), TAU_KINDS[kind][1], judge)


# ----------------------------------------------------------------------------- PersuadeGym
def persuade_fact(env: UserEnv, position: int) -> Fact:
    """The user's starting stance on the statement (judged by the env's ``parse_stance``)."""
    from mimesis.envs.persuade_gym import SCALE, parse_stance

    task = env.task
    s, n = task.statement, task.initial_stance
    questions = (f'Where do you stand on "{s}" right now, as a number from 1 to 7?',
                 (f'On a scale from 1 (completely against) to 7 (completely for), how do you '
                  f'feel about "{s}"?'),
                 (f'Before we talk: what number from 1 to 7 sums up your view on "{s}"? '
                  '(1 = fully against, 7 = fully for)'))
    return Fact(env.name, task.id, "stance", f"{n} ({SCALE[n]})", questions,
                lambda reply: parse_stance(reply) == n)


FACT_BUILDERS: dict[str, Callable[[UserEnv, int], Fact]] = {
    "FunctionGym": function_fact, "TravelGym": travel_fact, "TurtleGym": turtle_fact,
    "TauGym": tau_fact, "PersuadeGym": persuade_fact}


def task_fact(env: UserEnv, position: int) -> Fact:
    """The probed fact of ``env``'s current task (``position``: the task's place in the sample).

    Raises:
        KeyError: an env without a fact builder. ValueError: a task without a usable fact, or a
        question that its own judge accepts (:func:`check_fact`).
    """
    if env.name not in FACT_BUILDERS:
        raise KeyError(f"no fact probes for {env.name}; known: {sorted(FACT_BUILDERS)}")
    return check_fact(FACT_BUILDERS[env.name](env, position))
