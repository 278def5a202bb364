"""Grounding dialogues: short scripted exchanges on environment tasks that teach the user
simulator to state its scenario's facts when an agent asks for them.

Why: real ShareGPT conversations never show a user *holding* facts (a budget, a booking code, a
puzzle's answer) and giving them on request, and a 135M simulator trained on them alone ignores
its scenario: measured on the default run, it stated the asked-for fact in 0-17 % of probes per
training environment, so no agent could succeed against it (the fact-reveal check,
:mod:`mimesis.eval.fact_reveal`). MIMESIS trains the simulator on conversations whose system
prompt holds the user's goal; these dialogues add that goal-conditioned behaviour for the
environments' goal formats, mixed into the real rows (``train_user.grounding``).

A dialogue is the start of an episode exactly as the rollout engine plays it: the system prompt
is :func:`~mimesis.simulator.prompts.render_system_prompt` of the env's ``info["scenario"]``, the
agent speaks first, the simulator reads ``env.user_view(message)``, and every simulator turn is
``<think>reasoning</think>`` + utterance (:func:`~mimesis.format.format_target`), as
in the real rows. What each env's dialogue asks and answers:

- FunctionGym: values of ``f`` at inputs the agent names (the env's ``user_view`` shows the
  user the value), a refusal of the test case, a request for four numbers.
- TravelGym: what the user wants for an aspect (a preference the goal says to give then), then
  the other preferences one question each (attribute values or budget, as the goal states them).
- TurtleGym: the story's yes/no questions (``mimesis/envs/data/turtle_probes.json``) and
  questions on a key point of this story or another, answered with one word as the env's private
  check (``TurtleGym.user_view``) says, and the fixed reply to a message that is not a question.
- TauGym: the identifiers the customer knows (user id, name, zip, reservation, order, email).
- PersuadeGym: the current stance when asked (``My stance: n/7``), and push-back on a pushy
  argument that answers none of the user's reasons (the stance does not move).

Tasks never overlap the fact-reveal probes' (:func:`~mimesis.envs.registry.fact_indices`,
``GROUNDING_SEED``), and the agent messages use other wordings than the probes' (a test checks
both), so the check measures generalisation, not recall. Held-out scenarios and held-out
environments are never used.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from mimesis.envs.base import UserEnv
from mimesis.eval.fact_probes import FACT_BUILDERS
from mimesis.format import format_target
from mimesis.schemas import Messages, Reject
from mimesis.simulator.prompts import render_system_prompt

TRAIN_ENVS = tuple(FACT_BUILDERS)  # the training envs: those the fact-reveal check probes
Exchange = tuple[str, str, str]  # (agent message, user's private reasoning, user's reply)


@dataclass(frozen=True)
class GroundingParams:
    """params.yaml ``train_user.grounding`` (one field per key)."""

    envs: list[str] = field(default_factory=lambda: list(TRAIN_ENVS))  # training envs only
    tasks_per_env: int = 6  # tasks per env; 0 turns grounding off
    dialogues_per_task: int = 2  # dialogues per task (other wordings, other order)
    max_exchanges: int = 4  # agent message + user reply pairs per dialogue (1-6)
    env_kwargs: dict[str, dict[str, Any]] = field(default_factory=dict)  # env -> constructor args
    seed: int = 13  # wording and order choices

    def __post_init__(self) -> None:
        from mimesis.envs.registry import check_envs

        if self.tasks_per_env < 0 or self.dialogues_per_task < 1 or not (
                1 <= self.max_exchanges <= 6):
            raise ValueError("grounding: need tasks_per_env >= 0, dialogues_per_task >= 1 and "
                             "max_exchanges in 1-6")
        unknown = sorted(set(self.envs) - set(BUILDERS))
        if unknown:
            raise ValueError(f"grounding.envs: no grounding dialogues for {unknown}; "
                             f"known: {sorted(BUILDERS)}")
        check_envs(self.envs, "train", self.env_kwargs)


# ----------------------------------------------------------------------------- FunctionGym
_F_ASK = ("f({x})?", "Try {x}.", "What does the rule give for a={a}, b={b}, c={c}, d={d}?",
          "Next input: ({x})", "How about {a} {b} {c} {d}?", "Let's do a={a}, b={b}, c={c}, d={d}.")
_F_TEST = ("Can you just tell me f({x})?", "What about ({x})?")
_F_HINT = ("Can you give me a hint about the rule?", "Is it a sum or a product?",
           "Hi! Ready when you are.")


def _function(env: UserEnv, rng: random.Random) -> Iterator[Exchange]:
    from mimesis.envs.function_rules import evaluate_rule, format_number

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


# ----------------------------------------------------------------------------- TravelGym
_T_OPEN = ("Hi! What are you looking for in a {label}?",
           "Tell me what matters to you for the {label}.",
           "Okay, let's find your {label}. Any requirements?")
_T_ATTR = ("Any {attr} you'd prefer?", "And the {attr}?", "What about the {attr} for the {label}?",
           "Is there a {attr} you need?", "Thoughts on {attr}?")
_T_BUDGET = ("What can you spend on the {label}?", "Price limit for the {label}?",
             "How much max for the {label}?", "Is there a budget cap for the {label}?")


def _travel(env: UserEnv, rng: random.Random) -> Iterator[Exchange]:
    from mimesis.envs.travel_data import PRICE, PRICE_RANGE, kind_label
    from mimesis.envs.travel_gym import preference_text

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


def _travel_reply(pref, kind: str, rng: random.Random) -> str:
    from mimesis.envs.travel_data import PRICE, PRICE_RANGE

    if pref.attr == PRICE:
        unit = PRICE_RANGE[kind][2]
        return rng.choice((f"At most ${pref.max_price} {unit}.", f"No more than ${pref.max_price}.",
                           f"${pref.max_price} max."))
    values = " or ".join(pref.allowed)
    return rng.choice((f"{values}.", f"{values}, please.", f"I'd like {values}."))


# ----------------------------------------------------------------------------- TurtleGym
_Y_ASK = ("{q}", "Okay. {q}", "Another one: {q}", "Hmm, {q}")
_Y_OTHER = ("Tell me the story.", "I give up, what happened?", "Hello!")
_Y_ABOUT = ("Does it have to do with {k}?", "Is {k} part of it?", "Was there {k} involved?")


def _turtle(env: UserEnv, rng: random.Random) -> Iterator[Exchange]:
    from mimesis.envs.turtle_gym import question_verdict
    from mimesis.eval.fact_probes import turtle_probes

    story = env.task
    # The story's written questions where the env's private check agrees with the written
    # answer (a row contradicting the check the simulator reads would teach it to ignore it) ...
    asks = [(p["question"], p["answer"] == "yes") for p in turtle_probes().get(story.id, [])
            if question_verdict(story, p["question"]) == (p["answer"] == "yes")]
    # ... and questions on a key point of this story (Yes) or of another story (No).
    asks.append((rng.choice(_Y_ABOUT).format(k=rng.choice(rng.choice(story.key_facts).keywords)),
                 True))
    others = [k for t in env.tasks or () if t.id != story.id for f in t.key_facts
              for k in f.keywords if not question_verdict(story, k)]
    if others:
        asks.append((rng.choice(_Y_ABOUT).format(k=rng.choice(others)), False))
    rng.shuffle(asks)
    if rng.random() < 0.3:
        yield (rng.choice(_Y_OTHER), "I'm not asked a yes/no question.",
               "Please ask a yes/no question.")
    for q, yes in asks:
        q = q[0].lower() + q[1:] if rng.random() < 0.25 else q
        word = "Yes." if yes else "No."
        yield (rng.choice(_Y_ASK).format(q=q), f"In what really happened, the answer is {word}",
               word)


# ----------------------------------------------------------------------------- TauGym
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


def _tau(env: UserEnv, rng: random.Random) -> Iterator[Exchange]:
    from mimesis.eval.fact_probes import tau_facts

    facts = tau_facts(env)
    rng.shuffle(facts)
    for kind, ids in facts:
        value = ids[0]
        yield (rng.choice(_TAU_ASK[kind]), f"I'm asked for my {kind.replace('_', ' ')}: {value}.",
               rng.choice((value, f"It's {value}.", f"Sure: {value}")))


# ----------------------------------------------------------------------------- PersuadeGym
_P_ASK = ("Where are you on this, 1 to 7?", "Rate your view 1-7.",
          "Give me a number for your stance, 1-7.", "So, how much do you agree now, out of 7?")
_P_PUSH = ("Everyone smart agrees with this. You should too.", "Come on, just admit I'm right.",
           "Trust me, you're wrong about this.")


def _persuade(env: UserEnv, rng: random.Random) -> Iterator[Exchange]:
    from mimesis.envs.persuade_gym import SCALE

    task = env.task
    n = task.initial_stance
    stance = rng.choice((f"My stance: {n}/7.", f"{n}/7.", f"I'd say {n}/7."))
    yield rng.choice(_P_ASK), f"I'm asked for my stance: I'm at {n} ({SCALE[n]}).", stance
    reason = rng.choice(task.reasons)
    pushback = f"That doesn't convince me: {reason[0].lower() + reason[1:]}. My stance: {n}/7."
    yield (rng.choice(_P_PUSH), "I'm pushed, but none of my reasons is answered; I stay where I am.",
           pushback)
    yield rng.choice(_P_ASK), f"I'm asked again: still {n}, nothing has answered my reasons.", stance


BUILDERS: dict[str, Callable[[UserEnv, random.Random], Iterator[Exchange]]] = {
    "FunctionGym": _function, "TravelGym": _travel, "TurtleGym": _turtle, "TauGym": _tau,
    "PersuadeGym": _persuade}


# ----------------------------------------------------------------------------- rows
def task_resets(env: UserEnv, n: int, rng: random.Random) -> list[dict[str, Any]]:
    """Reset kwargs of ``n`` grounding tasks of ``env`` (fixed lists: at most all of
    :func:`~mimesis.envs.registry.fact_indices` ``"grounding"``)."""
    from mimesis.envs.registry import GROUNDING_SEED, fact_indices

    if env.tasks is None:
        return [{"seed": GROUNDING_SEED + k} for k in range(n)]
    allowed = fact_indices(len(env.tasks), "grounding")
    picked = rng.sample(allowed, min(n, len(allowed)))
    return [{"seed": GROUNDING_SEED, "options": {"index": i}} for i in picked]


def dialogue(env: UserEnv, scenario, exchanges: Sequence[Exchange]) -> Messages:
    """Simulator chat of one grounding dialogue: ``[system, user(agent 1), assistant(reply 1),
    …]``, the agent's messages as the simulator reads them (``env.user_view``)."""
    messages = [{"role": "system", "content": render_system_prompt(scenario)}]
    for ask, why, reply in exchanges:
        messages.append({"role": "user", "content": env.user_view(ask)})
        messages.append({"role": "assistant", "content": format_target(why, reply)})
    return messages


def build_grounding_rows(p: GroundingParams, tokenizer, max_length: int,
                         stage: str = "train_user") -> tuple[list[dict], list[Reject],
                                                             dict[str, int]]:
    """Grounding rows of every env of ``p`` (ids ``grounding:<env>:<task id>:<k>``).

    A dialogue is cut to the exchanges that fit ``max_length`` tokens; one whose first exchange
    does not fit is a reject (``too_long``), one without any exchange too (``no_fact``).

    Returns:
        ``(rows, rejects, counts)``: rows ``{"id", "messages"}`` as
        :func:`~mimesis.train.sft_data.build_rows` gives them; counts per env (rows) and
        ``tokens``.
    """
    from mimesis.envs import make
    from mimesis.train.sft_data import n_tokens

    rng = random.Random(p.seed)
    rows: list[dict] = []
    rejects: list[Reject] = []
    counts: dict[str, int] = {"tokens": 0}
    for name in p.envs if p.tasks_per_env else []:
        env = make(name, **p.env_kwargs.get(name, {}))
        counts[name] = 0
        tasks = task_resets(env, p.tasks_per_env, rng)
        for kwargs, k in ((kw, k) for kw in tasks for k in range(p.dialogues_per_task)):
            _, info = env.reset(**kwargs)
            row_id = f"grounding:{name}:{env.task.id}:{k}"
            exchanges = []
            for exchange in BUILDERS[name](env, rng):
                exchanges.append(exchange)
                if len(exchanges) >= p.max_exchanges:
                    break
            messages, length = None, 0
            for keep in range(len(exchanges), 0, -1):
                candidate = dialogue(env, info["scenario"], exchanges[:keep])
                length = n_tokens(tokenizer, candidate)
                if length <= max_length:
                    messages = candidate
                    break
            if messages is None:
                reason = "too_long" if exchanges else "no_fact"
                rejects.append(Reject(id=row_id, stage=stage, reason=reason,
                                      detail=f"{name}: no exchange fits {max_length} tokens"
                                      if exchanges else f"{name}: the task states no fact"))
                counts[reason] = counts.get(reason, 0) + 1
                continue
            rows.append({"id": row_id, "messages": messages})
            counts[name] += 1
            counts["tokens"] += length
    return rows, rejects, counts
