"""Restart a user's randomness before every (agent, user) run of the agent evaluation.

Why (docs/metrics.md, agent side: "the same held-out scenarios and the same user seeds for every
agent"): a sampling user keeps its random state between runs. Reused across agents, the frozen
simulator or a ``prompted`` user would meet the second agent with the generator where the first left
it, and two identical agents would get different users and different scores.
:func:`reseed_user` restarts a user from a seed and a fresh KV cache:

- a ``generate_fn`` with a ``reseed(seed)`` method (``PromptedUser``, ``OpenAIUser``, and the offline
  ``ReplayUser`` / ``AgendaUser``, deterministic, for which it is a no-op) is asked to reseed;
- ``TokenSampler.chat`` (the frozen simulator of :func:`~mimesis.users.frozen.load_user`)
  is replaced by the ``chat`` of a fresh :class:`~mimesis.models.engine.sampling.TokenSampler` on the same
  model, tokenizer and sampling params (:func:`fresh_sampler`): new generator, empty cache;
- anything else is refused (its randomness cannot be restarted, so runs would not be paired).

Caveat (remaining): a sampler draws one batch of random numbers for all rows of a call, and the
rows of a user call are the episodes waiting on the user at that step. Identical agents give
identical batches, so identical episodes (``tests/eval/test_eval_pairing.py``); different agents
end episodes at different steps, so from the first difference on, an episode's user draws also
depend on which other episodes shared its batches. Pairing is by scenario and episode index
either way; the draws are common random numbers only while the agents behave alike. Removing
this needs one generator per row inside ``TokenSampler`` (``mimesis/models/engine/sampling.py``).
"""

from __future__ import annotations

from typing import Any

from mimesis.simulator.runtime import UserSimulator


def fresh_sampler(sampler: Any, seed: int) -> Any:
    """A new :class:`~mimesis.models.engine.sampling.TokenSampler` like ``sampler`` (same model, tokenizer,
    params) with generator seed ``seed`` and an empty prefix cache."""
    return type(sampler)(sampler.model, sampler.tokenizer, sampler.params, seed=seed)


def reseed_user(simulator: UserSimulator, seed: int) -> None:
    """Restart ``simulator``'s randomness from ``seed``, in place (module docstring).

    Raises:
        TypeError: a ``generate_fn`` that has no ``reseed`` method and is not
            ``TokenSampler.chat``.
    """
    from mimesis.models.engine.sampling import TokenSampler

    fn = simulator.generate_fn
    if callable(getattr(fn, "reseed", None)):
        fn.reseed(seed)
        return
    owner = getattr(fn, "__self__", None)
    if isinstance(owner, TokenSampler) and getattr(fn, "__func__", None) is TokenSampler.chat:
        simulator.generate_fn = fresh_sampler(owner, seed).chat
        return
    raise TypeError(f"cannot restart the randomness of user generate_fn {fn!r}: give it a "
                    "reseed(seed) method (a no-op when it is deterministic), or the agents would "
                    "meet different user samples")
