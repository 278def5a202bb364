"""A hidden fact said with first-person meta-talk is a leak of the private channel.

The parser catches reasoning by its shape; some leaks have none: "can you find me a flight?\\nMy
goal is a 450 euro budget", "Alright, I'm a traveler with a 450 euro budget…". What gives them
away is the pair: a *hidden fact* (a word or number of the scenario — goal, traits, directives —
that neither the agent nor an earlier user turn has said) together with *meta-talk* (the user
talking about its brief, its persona or what it will hold back). Either alone is ordinary: a
user states facts when asked, and says "my goal is…" about their own life. Together they are
the simulator reading out its scenario, and the turn is never sent (the runtime redraws it;
docs/pitfalls.md #3).
"""

from __future__ import annotations

import re

from mimesis.schemas import Scenario
from mimesis.simulator.guards import content_words

# First-person talk about the role-play rather than the request.
META_TALK = re.compile(
    r"\bmy (?:hidden |secret |real |actual |true |main |overall |current )?(?:goal|objective"
    r"|task|mission|instructions?|persona|character|role|scenario|brief|backstory)"
    r"(?:\s+(?:is|are|was|says?|here)\b|\s*:)"
    r"|\bi(?:'m| am) (?:supposed|instructed|told|meant) to\b|\bi was (?:told|instructed) to\b"
    r"|\bi(?:'m| am) not supposed to\b"
    r"|\bi (?:shouldn't|should not|mustn't|must not|won't|will not|can't|cannot|don't want to)"
    r" (?:say|mention|reveal|tell|disclose|share|give away|bring up|let slip)\b"
    r"|\b(?:don't|do not|not to) (?:reveal|mention|disclose|say|give away)\b[^.!?\n]*\byet\b"
    r"|\bthe (?:agent|assistant) (?:doesn't|does not|hasn't|has not|didn't|did not|won't)"
    r" (?:know|ask|need)\b"
    r"|\b(?:in|out of|stay in) character\b|\bas instructed\b|\bper my (?:instructions|brief)\b"
    r"|^\W*(?:(?:ok(?:ay)?|alright|hmm+|so|right|well)[\s,.!…]+)+i(?:'m| am) an? [\w-]+"
    r"(?: [\w-]+)? (?:with|who)\b",
    re.IGNORECASE)


def scenario_words(scenario: Scenario) -> set[str]:
    """Content words and numbers of the scenario's goal, traits and directives (lower case;
    words of 3+ characters or containing a digit)."""
    text = "\n".join([scenario.goal, *scenario.traits, *scenario.directives])
    return {w for w in content_words(text) if len(w) >= 3 or any(c.isdigit() for c in w)}


def hidden_facts_said(utterance: str, scenario: Scenario, told: str) -> list[str]:
    """The hidden facts ``utterance`` reveals together with meta-talk (empty list: safe).

    Args:
        utterance: The parsed message the agent would receive.
        scenario: The episode's scenario; its words are the candidate hidden facts.
        told: Everything already public (the agent's messages and earlier user turns); a word
            in it is no longer hidden.

    Returns:
        Sorted hidden words found; ``[]`` when the utterance has no :data:`META_TALK` or no
        hidden word.

    >>> s = Scenario(goal="a flight to Denver, budget 450 euros", annotator="doc")
    >>> hidden_facts_said("any flights?\\nMy goal is to stay under 450 euros", s, "")
    ['450', 'euros']
    >>> hidden_facts_said("my budget is 450 euros", s, "")
    []
    """
    if not META_TALK.search(utterance):
        return []
    return sorted((content_words(utterance) & scenario_words(scenario)) - content_words(told))
