"""TurtleGym expert: test the classic lateral-thinking explanations, then tell the story back.

A story's surface is shown; its explanation is not. The expert carries a bank of generic
"turtle soup" twists (:data:`HYPOTHESES`, written from the genre, not from any story of the
task set: death, disguise, a twin, a mirror, a dream …), ranks them by how many of their cue
words the surface shares (light stems, :func:`~mimesis.envs.turtle_judge.word_stems`), and asks
the top ones as yes/no questions. The explanation is the confirmed twists plus whatever the user
said beyond yes/no (users often add a detail), in their words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mimesis.envs.turtle_judge import word_stems
from mimesis.rl.experts.base import Expert, clip_words, replies_to_actions
from mimesis.rollout.engine import AgentView

_SURFACE = re.compile(r'\("[^"]*"\):\n\n(.*?)\n\nThe user knows', re.DOTALL)
_YES = re.compile(r"^\W*(yes|yeah|yep|correct|right|exactly|indeed)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Hypothesis:
    """A generic twist: cue words, a yes/no question, and the clause it adds when confirmed."""

    cues: str
    question: str
    clause: str


HYPOTHESES: tuple[Hypothesis, ...] = (
    Hypothesis("die dead death body kill murder found corpse funeral",
               "Did someone die?", "Someone died."),
    Hypothesis("accident crash fall fell broke hurt",
               "Was it an accident?", "It was an accident."),
    Hypothesis("same identical brother sister look alike two",
               "Is there a twin or a look-alike?", "There were twins or look-alikes."),
    Hypothesis("see saw look light dark blind eye",
               "Could someone not see?", "Someone could not see."),
    Hypothesis("mirror picture photo reflection window glass",
               "Is a reflection or a picture involved?", "It was a reflection or a picture."),
    Hypothesis("dream sleep woke night bed",
               "Was someone dreaming or asleep?", "Someone was asleep or dreaming."),
    Hypothesis("year day date birthday calendar month week time",
               "Does a date on the calendar explain it?", "The calendar date explains it."),
    Hypothesis("child son daughter baby young mother father parent school",
               "Is a child involved?", "A child was involved."),
    Hypothesis("dog cat pet animal bird horse fish",
               "Is an animal involved?", "An animal was involved."),
    Hypothesis("water sea boat ship swim ocean beach river rain",
               "Does water play a part?", "Water played a part."),
    Hypothesis("ice snow cold melt winter warm hot",
               "Did something melt or freeze?", "Something melted or froze."),
    Hypothesis("play game sport win lose team match card",
               "Is it part of a game or a sport?", "It was part of a game."),
    Hypothesis("show stage act actor film movie perform audience",
               "Was it a performance or a show?", "It was a performance."),
    Hypothesis("doctor hospital sick ill medicine nurse",
               "Was someone ill or in hospital?", "Someone was ill."),
    Hypothesis("money pay paid job work boss shop price bought",
               "Is it about money or a job?", "It was about money or work."),
    Hypothesis("phone call letter message note wrote read",
               "Did a message or a call matter?", "A message explains it."),
    Hypothesis("lie trick joke prank fake pretend",
               "Was someone pretending or playing a trick?", "Someone was pretending."),
    Hypothesis("plane fly pilot travel car drive train road",
               "Does travel explain it?", "Travel explains it."),
)
GENERIC = "The surface hides a simple explanation."


def surface(prompt: str) -> str:
    """The story's surface as the prompt shows it."""
    m = _SURFACE.search(prompt)
    return m.group(1).strip() if m else prompt


def ranked(story: str) -> list[Hypothesis]:
    """Hypotheses by how many cue stems the surface shares (ties: bank order)."""
    stems = word_stems(story)
    scores = [len(word_stems(h.cues) & stems) for h in HYPOTHESES]
    order = sorted(range(len(HYPOTHESES)), key=lambda i: (-scores[i], i))
    return [HYPOTHESES[i] for i in order]


def extra_detail(reply: str) -> str:
    """What a host's reply says beyond its yes/no word (``""`` when nothing, or when the reply
    is no yes/no answer at all: then it is chatter, not a clue).

    >>> extra_detail("Yes. He was born on a leap day."), extra_detail("The answer is unclear.")
    ('He was born on a leap day.', '')
    """
    head = re.match(r"^\W*(yes|yeah|yep|no|nope|irrelevant|correct|right)\b\W*", reply.strip(),
                    flags=re.IGNORECASE)
    rest = reply.strip()[head.end():] if head else ""
    return rest if len(rest.split()) >= 3 and not rest.lower().startswith("please ask") else ""


class TurtleExpert(Expert):
    """Reads: the surface in the prompt and the user's answers. Strategy: ask the highest-ranked
    untested twists while the budget lasts (one message kept for the answer), then
    ``[answer]`` the confirmed twists and the user's own details."""

    env = "TurtleGym"

    def act(self, view: AgentView) -> str:
        qa = replies_to_actions(view)
        asked = {q for q, _ in qa}
        if view.turns_left > 1:
            for h in ranked(surface(view.prompt)):
                if h.question not in asked:
                    return f"[action] {h.question}"
        by_question = {h.question: h for h in HYPOTHESES}
        confirmed = [by_question[q].clause for q, r in qa if q in by_question and _YES.match(r)]
        details = [d.rstrip(".") + "." for _, r in qa if (d := extra_detail(r))]
        parts = details + confirmed or [ranked(surface(view.prompt))[0].clause, GENERIC]
        return f"[answer] {clip_words(' '.join(parts), 150)}"
