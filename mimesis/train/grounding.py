"""Grounding dialogues: short scripted exchanges on environment tasks that teach the user
simulator to state its scenario's facts when an agent asks for them.

Why: real ShareGPT conversations never show a user *holding* facts (a budget, a booking code, a
puzzle's answer) and giving them on request, and a 135M simulator trained on them alone ignores
its scenario: measured on the default run, it stated the asked-for fact in 0-17 % of probes per
training environment, so no agent could succeed against it (the fact-reveal check,
:mod:`mimesis.eval.agents.fact_reveal`). MIMESIS trains the simulator on conversations whose system
prompt holds the user's goal; these dialogues add that goal-conditioned behaviour for the
environments' goal formats, mixed into the real rows (``train_user.grounding``).

A dialogue is the start of an episode exactly as the rollout engine plays it: the system prompt
is :func:`~mimesis.simulator.prompts.render_system_prompt` of the env's ``info["scenario"]``, the
agent speaks first, the simulator reads ``env.user_view(message)``, and every simulator turn is
``<think>reasoning</think>`` + utterance (:func:`~mimesis.format.format_target`), as
in the real rows. What each env's dialogue asks and answers is the env's own
(:meth:`~mimesis.envs.base.UserEnv.grounding_exchanges`, ``mimesis/envs/<name>/grounding.py``);
the default env list is every training env of the registry.

Tasks never overlap the fact-reveal probes' (:func:`~mimesis.envs.registry.fact_indices`,
``GROUNDING_SEED``), and the agent messages use other wordings than the probes' (a test checks
both), so the check measures generalisation, not recall. Held-out scenarios and held-out
environments are never used.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mimesis.envs.base import UserEnv
from mimesis.envs.facts import Exchange
from mimesis.envs.registry import env_names
from mimesis.format import format_target
from mimesis.schemas import Messages, Reject
from mimesis.simulator.prompts import render_system_prompt


@dataclass(frozen=True)
class GroundingParams:
    """params.yaml ``train_user.grounding`` (one field per key)."""

    envs: list[str] = field(default_factory=lambda: env_names("train"))  # training envs only
    tasks_per_env: int = 6  # tasks per env; 0 turns grounding off
    dialogues_per_task: int = 2  # dialogues per task (other wordings, other order)
    max_exchanges: int = 4  # agent message + user reply pairs per dialogue (1-6)
    env_kwargs: dict[str, dict[str, Any]] = field(default_factory=dict)  # env -> constructor args
    seed: int = 13  # wording and order choices

    def __post_init__(self) -> None:
        from mimesis.envs.registry import check_envs, env_class

        if self.tasks_per_env < 0 or self.dialogues_per_task < 1 or not (
                1 <= self.max_exchanges <= 6):
            raise ValueError("grounding: need tasks_per_env >= 0, dialogues_per_task >= 1 and "
                             "max_exchanges in 1-6")
        known = [n for n in env_names() if env_class(n).provides("grounding_exchanges")]
        unknown = sorted(set(self.envs) - set(known))
        if unknown:
            raise ValueError(f"grounding.envs: no grounding dialogues for {unknown}; "
                             f"known: {known}")
        check_envs(self.envs, "train", self.env_kwargs)


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
            for exchange in env.grounding_exchanges(rng):
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
