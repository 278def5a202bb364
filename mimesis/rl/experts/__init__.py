"""Scripted expert agents for the five training environments: the traces of ``sft_agent``.

Each expert plays the agent through the rollout engine as a
:class:`~mimesis.rollout.engine.TextPolicy` (:class:`ExpertPolicy`). The rule they all follow: an
expert acts only on what an agent could know — the :class:`~mimesis.rollout.engine.AgentView` of its
episode: the env's first observation (the agent prompt), its own earlier messages, tool results
and the user's replies, read with the env's own parsers where it has them. It never sees the
task, the user's scenario or the simulator's state, so it cannot read the hidden facts. Its
texts are SFT targets for a small agent: one tag per message, short, plain.

What each may look at, and how it plays (details in each module):

- **FunctionGym** (:mod:`.function`) — reads the test case from its ``[search] test`` result and
  the values the user states (``f(2, 3, 5, 7) = 41``, or one number per asked point; the env's
  ``parse_number`` for one point). Strategy: search first; ask f at three fixed, well-spread
  points (one per message when the budget allows, else packed into one question); answer the
  value most candidate rules give at the test case among the ~1.1 M rules of FunctionGym's
  shapes (each input once, an optional constant 2–9, ``+ - *``, any bracketing) that reproduce
  every stated value.
- **TravelGym** (:mod:`.travel`) — reads the parts named in the prompt, the option tables of its
  ``[search]`` and the env's "Recorded …" notes, and the user's replies for option values and a
  budget. Strategy: one search for every part; an open question per part, then each attribute
  not yet mentioned (one per message when the budget allows, else all in one question);
  answer the cheapest option meeting every stated preference.
- **TurtleGym** (:mod:`.turtle`) — reads the surface in the prompt and the user's answers.
  Strategy: rank a bank of generic lateral-thinking twists (death, twins, a mirror, a dream, a
  date …) by cue words shared with the surface, ask the top ones as yes/no questions, answer
  with the confirmed twists plus any detail the user volunteered beyond yes/no.
- **PersuadeGym** (:mod:`.persuade`) — reads the statement and direction in the prompt, the
  user's replies and the ratings they state (the env's ``parse_stance``). Strategy: ask for their
  main reason when the budget allows; then one argument per message, naming their last point and
  asking for a 1–7 rating; ``[finish]`` on the last message or once they reach the end of the
  scale.
- **TauGym** (:mod:`.tau`) — reads the domain and policy in the prompt, tool results (JSON) and
  the user's replies. Strategy: authenticate as the policy says (retail: email, or name + zip;
  airline: user id); look the account up; fetch its orders / the named reservations; retail:
  cancel pending orders and return delivered items the user names (refund to the original
  method or a gift card), airline: cancel reservations the policy allows; confirm each change
  and make it only after a yes; close with what was done and the total refund.
"""

from mimesis.rl.experts.base import Expert, ExpertPolicy
from mimesis.rl.experts.function import FunctionExpert
from mimesis.rl.experts.persuade import PersuadeExpert
from mimesis.rl.experts.tau import TauExpert
from mimesis.rl.experts.travel import TravelExpert
from mimesis.rl.experts.turtle import TurtleExpert

EXPERTS: dict[str, type[Expert]] = {cls.env: cls for cls in (
    FunctionExpert, TravelExpert, TurtleExpert, TauExpert, PersuadeExpert)}

__all__ = ["EXPERTS", "Expert", "ExpertPolicy", "FunctionExpert", "PersuadeExpert",
           "TauExpert", "TravelExpert", "TurtleExpert"]
