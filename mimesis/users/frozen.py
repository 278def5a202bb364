"""The frozen user simulator as the agent stages load it.

Loaded through :func:`~mimesis.simulator.frozen.load_frozen` (sha256 of every file checked
first: a tampered folder raises ``FrozenSimulatorError`` before any model is built), its weights
are fingerprinted and taken out of autograd; during training
:class:`mimesis.rl.frozen_guard.FrozenGuard` checks that not one of its parameters is in the
optimizer and that its fingerprint is the same after training.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from mimesis.simulator.frozen import load_frozen
from mimesis.users.spec import UserSamplingParams


def weights_fingerprint(model) -> str:
    """sha256 over every parameter and buffer (name, dtype, shape, bytes), in name order."""
    digest = hashlib.sha256()
    tensors = dict(model.named_parameters())
    tensors.update(dict(model.named_buffers()))
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        digest.update(f"{name}|{t.dtype}|{tuple(t.shape)}".encode())
        digest.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return digest.hexdigest()


@dataclass
class FrozenUser:
    """The loaded frozen simulator: runtime, model, tokenizer, ``meta.json`` and fingerprint."""

    simulator: Any
    model: Any
    tokenizer: Any
    meta: dict
    fingerprint: str
    sim_dir: Path


def load_user(freeze_dir: Path, p: Any) -> FrozenUser:
    """Verify and load ``<freeze_dir>/simulator`` and wrap it as the user of the rollouts.

    Args:
        freeze_dir: The ``freeze_user`` stage folder.
        p: An agent stage's params: ``dtype``, ``user`` (:class:`UserSamplingParams`),
            ``seed`` and ``max_turns`` are read.

    Raises:
        FrozenSimulatorError: a file of the folder differs from ``meta.json`` (or is missing).
    """
    return load_frozen_user(Path(freeze_dir) / "simulator", dtype=p.dtype, sampling=p.user,
                            seed=p.seed, max_turns=p.max_turns)


def load_frozen_user(sim_dir: Path, *, dtype: str, sampling: UserSamplingParams,
                     seed: int | None, max_turns: int, trust_folder: bool = False) -> FrozenUser:
    """Verify and load the simulator folder ``sim_dir``, sampled by a ``TokenSampler`` seeded
    with ``seed`` (``None``: nondeterministic), behind a
    :class:`~mimesis.simulator.runtime.UserSimulator`. ``trust_folder`` accepts a
    ``freeze_user`` folder without its ``registry.json`` (warns).

    Raises:
        FrozenSimulatorError: a file of the folder differs from ``meta.json`` (or is missing).
    """
    from mimesis.models.engine.sampling import SamplingParams, TokenSampler
    from mimesis.simulator.frozen import turn_prefill
    from mimesis.simulator.runtime import UserSimulator

    sim_dir = Path(sim_dir)
    model, tokenizer, meta = load_frozen(sim_dir, dtype=dtype, trust_folder=trust_folder)
    if torch.cuda.is_available():  # the trainer moves the agent; the simulator is ours to place
        model.to("cuda")
    model.requires_grad_(False)
    model.eval()
    u = sampling
    sampler = TokenSampler(model, tokenizer, SamplingParams(
        temperature=u.temperature, top_p=u.top_p, max_new_tokens=u.max_new_tokens,
        batch_size=u.batch_size, prefill=turn_prefill(meta)), seed=seed)
    simulator = UserSimulator(sampler.chat, max_turns=max_turns)
    return FrozenUser(simulator, model, tokenizer, meta, weights_fingerprint(model), sim_dir)
