"""TurtleGym's grounding exchanges (:mod:`mimesis.train.grounding`): yes/no questions on the
story, answered as the env's private check says."""

from __future__ import annotations

import random
from collections.abc import Iterator

from mimesis.envs.facts import Exchange
from mimesis.envs.turtle.gym import TurtleGym, question_verdict
from mimesis.envs.turtle.probes import turtle_probes

_Y_ASK = ("{q}", "Okay. {q}", "Another one: {q}", "Hmm, {q}")
_Y_OTHER = ("Tell me the story.", "I give up, what happened?", "Hello!")
_Y_ABOUT = ("Does it have to do with {k}?", "Is {k} part of it?", "Was there {k} involved?")


def turtle_exchanges(env: TurtleGym, rng: random.Random) -> Iterator[Exchange]:
    """The story's yes/no questions (:func:`~mimesis.envs.turtle.probes.turtle_probes`) and
    questions on a key point of this story or another, answered with one word as the env's
    private check (``TurtleGym.user_view``) says, and the fixed reply to a message that is not a
    question."""
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
