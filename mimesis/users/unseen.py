"""Unseen user simulators for agent evaluation: a registry configured from params.

Why: an agent trained against one simulator can overfit to it, so agents are also scored
against users they never trained with (docs/metrics.md, agent side; the MIMESIS paper, arXiv
2610.09484, uses 9: five frontier APIs and four released simulators). Every entry is a
:class:`~mimesis.users.spec.UserSpec` built by :func:`~mimesis.users.factory.make_user`, so it
runs behind the same :class:`~mimesis.simulator.runtime.UserSimulator` as the training
simulator — same view, parser, guards and termination contract — only ``generate_fn`` and the
system prompt differ.

Config: a list of dicts (params.yaml ``unseen_users``), keys = :class:`UserSpec` fields::

    - {name: replay, kind: replay}                       # corpus: defaults to build_unseen(corpus=)
    - {name: agenda, kind: agenda}
    - {name: prompted-smollm2, kind: prompted, model: smollm2-135m, prompt_style: prompted_user}
    - {name: gpt, kind: openai, model: gpt-4o-mini, base_url: "", api_key_env: OPENAI_API_KEY}

Kinds: ``openai``, ``prompted`` (``hf`` is read as ``prompted``), ``replay``, ``agenda``
(:mod:`mimesis.users.spec`; the offline ones, their goal prompt, corpus reader and text rules
are in :mod:`mimesis.users.offline`, and read the goal text only: see the limits there).

Refusal (:func:`check_not_training`): evaluating with the simulator the agent trained against is
not an *unseen* user. Refused: duplicate names; names of the training simulator (registered name
or alias, e.g. ``frozen``: that row label belongs to it); a ``prompted`` entry whose folder is
the frozen simulator folder, carries a ``meta.json`` listing the same files, or holds a weight
file with the sha256 of one of the frozen simulator's (``meta.json`` ``files``); an ``openai``
entry whose model is the registered name, its alias or ``name@alias``, and, at run time, an
endpoint whose responses report such a model (our serving app reports the registered name).
What identifies the training simulator (names, weight hashes) is in
:mod:`mimesis.users.identity`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mimesis.simulator.guards import GuardParams
from mimesis.simulator.runtime import UserSimulator
from mimesis.users.chat import PromptedUser
from mimesis.users.factory import make_user
from mimesis.users.identity import forbidden_model_names, hf_refusal, training_meta
from mimesis.users.spec import UserSpec, parse_unseen


def check_not_training(configs: Sequence[Mapping[str, Any] | UserSpec],
                       training_simulator_dir: Path) -> None:
    """Refuse any entry that is the training simulator (see the module docstring).

    Raises:
        ValueError: a bad or duplicate entry, a refused entry (the message names it and why),
            or no ``meta.json`` in ``training_simulator_dir``.
    """
    from mimesis.models.base import base_dir

    specs = parse_unseen(configs)
    meta = training_meta(training_simulator_dir)
    forbidden = forbidden_model_names(meta)
    for c in specs:
        if c.name.lower() in forbidden:  # a row labelled "frozen" would read as the training sim
            raise ValueError(f"unseen user name {c.name!r} names the training simulator")
        if c.kind == "openai" and c.model.strip().lower() in forbidden:
            raise ValueError(f"unseen user {c.name!r}: model {c.model!r} is the training "
                             "simulator (registered name or alias); it cannot be an unseen user")
        if c.kind == "prompted":
            why = hf_refusal(base_dir(c.model), training_simulator_dir, meta)
            if why:
                raise ValueError(f"unseen user {c.name!r} is the training simulator: {why}")


def build_unseen(config: Sequence[Mapping[str, Any] | UserSpec], training_simulator_dir: Path,
                 *, corpus: Path | None = None, max_turns: int = 16,
                 guards: GuardParams | None = None) -> dict[str, UserSimulator]:
    """The unseen users of ``config`` (params.yaml ``unseen_users``), by name, in order.

    Args:
        config: Entries (dicts or :class:`UserSpec`).
        training_simulator_dir: The frozen training simulator (``<freeze_user>/simulator``,
            with ``meta.json``): every entry is checked not to be it.
        corpus: Default held-out corpus of ``replay`` entries (e.g. ``data/label/test.jsonl``).
        max_turns: User turns per episode of every simulator.
        guards: Runtime guard settings (default :class:`GuardParams`).

    Raises:
        ValueError: a bad or duplicate entry, or one that is the training simulator.
        FileNotFoundError / UserEndpointError: see :func:`~mimesis.users.factory.make_user`.
    """
    specs = parse_unseen(config)
    check_not_training(specs, training_simulator_dir)
    forbidden = forbidden_model_names(training_meta(training_simulator_dir))
    return {c.name: make_user(c, corpus=corpus, max_turns=max_turns, guards=guards,
                              forbidden=forbidden) for c in specs}


def release(simulators: Mapping[str, UserSimulator]) -> None:
    """Drop the weights of every loaded ``prompted`` user (they reload on next use)."""
    for sim in simulators.values():
        if isinstance(sim.generate_fn, PromptedUser):
            sim.generate_fn.release()
