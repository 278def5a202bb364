"""TauGym's fact-reveal probe: an identifier the customer knows.

``user_id``, ``name``, ``zip``, ``reservation_id``, ``order_id``, ``email`` found in the task's
user scenario (its ``unknown_info`` excluded); revealed when the reply contains the identifier as
a token (case and a leading ``#`` ignored; a name needs first and last name), as the agent must
pass it verbatim to tau2's tools.
"""

from __future__ import annotations

import re

from mimesis.envs.facts import Fact
from mimesis.envs.tau.gym import TauGym

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


def tau_known_text(env: TauGym) -> str:
    """What the customer knows: the task's user scenario without its ``unknown_info``."""
    scenario = env.task.task.user_scenario
    ins = scenario.instructions
    if isinstance(ins, str):
        return ins
    parts = (ins.known_info, ins.reason_for_call, ins.task_instructions)
    return "\n".join(p for p in parts if p)


def tau_facts(env: TauGym) -> list[tuple[str, tuple[str, ...]]]:
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


def tau_fact(env: TauGym, position: int) -> Fact:
    """One identifier the customer knows (kinds in :data:`TAU_KINDS` order, by position).

    Raises:
        ValueError: the scenario states no identifier.
    """
    facts = tau_facts(env)
    if not facts:
        raise ValueError(f"TauGym {env.task.id}: the scenario states no identifier")
    kind, ids = facts[position % len(facts)]

    def judge(reply: str) -> bool:
        if kind == "name":
            return any(all(_token_in(w, reply) for w in name.split()) for name in ids)
        return any(_token_in(i, reply) for i in ids)

    return Fact(env.name, env.task.id, kind, " / ".join(ids), TAU_KINDS[kind][1], judge)
