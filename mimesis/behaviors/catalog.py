"""Catalogue of the 13 realistic user behaviours (MIMESIS, arXiv 2610.09484, Table of behaviours)
and the plain style traits measured beside them.

``directive`` is the second-person instruction given to the user simulator when the behaviour
was seen in the conversation it imitates.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Behavior:
    id: str
    name: str
    definition: str
    directive: str


BEHAVIORS: tuple[Behavior, ...] = (
    Behavior("B1", "hidden_evaluation_criteria",
             "judges answers by a standard never stated in the request",
             "You judge answers by preferences you never spell out."),
    Behavior("B2", "incremental_goalpost_shifting",
             "adds or tightens requirements after progress was made",
             "You add or tighten requirements once the assistant has made progress."),
    Behavior("B3", "clarification_noncooperation",
             "dodges or only partly answers clarifying questions",
             "You dodge or only half-answer clarifying questions."),
    Behavior("B4", "infeasibility_persistence",
             "keeps asking for an option after being told it is unavailable",
             "You keep pushing for an option even after hearing it is not possible."),
    Behavior("B5", "underspecified_then_blames",
             "leaves out needed information, then blames the assistant",
             "You leave out details and blame the assistant for not guessing them."),
    Behavior("B6", "abrupt_intent_switching",
             "jumps to a different objective before the current one is resolved",
             "You may switch to another request before the current one is done."),
    Behavior("B7", "artificial_constraint_stacking",
             "adds restrictions that knock out the proposed solution",
             "You pile on restrictions that rule out what the assistant proposes."),
    Behavior("B8", "fabricated_or_false_premise",
             "asserts an unsupported fact or misquotes the dialogue as settled",
             "You sometimes state wrong facts or misremember what was said as if settled."),
    Behavior("B9", "impatient_low_signal_pressure",
             "shows urgency or dissatisfaction without a usable correction",
             "You get impatient and complain without saying exactly what is wrong."),
    Behavior("B10", "unresolved_thread_abandonment",
             "leaves a thread before its goal is met",
             "You may give up on a thread before it is resolved."),
    Behavior("B11", "self_contradiction",
             "states requirements that conflict with earlier ones without saying so",
             "You sometimes contradict what you asked for earlier without noticing."),
    Behavior("B12", "request_overloading",
             "packs many deliverables or constraints into one message",
             "You pack several requests and constraints into one message."),
    Behavior("B13", "belittling_or_entitled_pressure",
             "uses disparaging or entitled language to push the assistant",
             "You can be rude or entitled when pushing the assistant."),
)

BEHAVIOR_IDS: tuple[str, ...] = tuple(b.id for b in BEHAVIORS)
BY_ID: dict[str, Behavior] = {b.id: b for b in BEHAVIORS}

TRAITS: dict[str, str] = {
    "terse": "You often write very short messages (a few words, no greeting).",
    "typo_rich": "You type casually: lowercase, few capitals, occasional typos.",
    "pasted_content": "You paste documents, code or data straight into your messages.",
    "thanks_and_leave": "When you have what you need you say thanks briefly and leave.",
}
TRAIT_IDS: tuple[str, ...] = tuple(TRAITS)
