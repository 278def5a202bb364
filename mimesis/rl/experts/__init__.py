"""Scripted expert agents, one module per training environment: the traces of ``sft_agent``.

Each expert plays the agent through the rollout engine as a
:class:`~mimesis.rollout.engine.TextPolicy` (:class:`ExpertPolicy`). The rule they all follow: an
expert acts only on what an agent could know — the :class:`~mimesis.rollout.engine.AgentView` of its
episode: the env's first observation (the agent prompt), its own earlier messages, tool results
and the user's replies, read with the env's own parsers where it has them. It never sees the
task, the user's scenario or the simulator's state, so it cannot read the hidden facts. Its
texts are SFT targets for a small agent: one tag per message, short, plain.

One module per environment (``function.py``, ``travel.py``, ``turtle.py``, ``tau.py``,
``persuade.py``): each defines an :class:`Expert` subclass whose ``env`` is the env's registry
name, and :func:`experts` finds them all — adding an expert is adding its module. What each may
look at and how it plays is in its module's docstring.
"""

import importlib
import pkgutil

from mimesis.rl.experts.base import Expert, ExpertPolicy

__all__ = ["Expert", "ExpertPolicy", "experts"]


def experts() -> dict[str, type[Expert]]:
    """Env name -> expert class, for every :class:`Expert` subclass defined in a module of this
    package (imported here, so a new module needs no other edit).

    Raises:
        ValueError: two experts claim the same env.
    """
    package = importlib.import_module("mimesis.rl.experts")
    found: dict[str, type[Expert]] = {}
    for info in pkgutil.iter_modules(package.__path__, prefix="mimesis.rl.experts."):
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if not (isinstance(obj, type) and issubclass(obj, Expert)
                    and obj.__module__ == module.__name__ and hasattr(obj, "env")):
                continue
            if found.get(obj.env, obj) is not obj:
                raise ValueError(f"two experts for {obj.env}: {found[obj.env]} and {obj}")
            found[obj.env] = obj
    return found
