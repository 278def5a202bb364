"""The frozen user simulator as the RL stages load it, and the guard that keeps it frozen.

Loaded through :func:`~mimesis.simulator.frozen.load_frozen` (sha256 of every file checked
first: a tampered folder raises ``FrozenSimulatorError`` before any model is built), its weights
are fingerprinted, taken out of autograd, and checked by :class:`FrozenGuard`: not one of its
parameters may be in the optimizer, and its fingerprint must be the same after training. Moved
out of :mod:`mimesis.rl.agent_training` unchanged.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from transformers import TrainerCallback

from mimesis.simulator.frozen import FrozenSimulatorError, load_frozen

if TYPE_CHECKING:
    from mimesis.rl.agent_training import AgentRLParams


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


def load_user(freeze_dir: Path, p: AgentRLParams) -> FrozenUser:
    """Verify and load ``<freeze_dir>/simulator`` and wrap it as the user of the rollouts.

    Raises:
        FrozenSimulatorError: a file of the folder differs from ``meta.json`` (or is missing).
    """
    from mimesis.models.engine.sampling import SamplingParams, TokenSampler
    from mimesis.simulator.runtime import UserSimulator

    sim_dir = Path(freeze_dir) / "simulator"
    model, tokenizer, meta = load_frozen(sim_dir, dtype=p.dtype)
    if torch.cuda.is_available():  # the trainer moves the agent; the simulator is ours to place
        model.to("cuda")
    model.requires_grad_(False)
    model.eval()
    u = p.user
    sampler = TokenSampler(model, tokenizer, SamplingParams(
        temperature=u.temperature, top_p=u.top_p, max_new_tokens=u.max_new_tokens,
        batch_size=u.batch_size), seed=p.seed)
    simulator = UserSimulator(sampler.chat, max_turns=p.max_turns)
    return FrozenUser(simulator, model, tokenizer, meta, weights_fingerprint(model), sim_dir)


class FrozenGuard(TrainerCallback):
    """Refuses training that could touch the frozen simulator.

    ``on_train_begin``: no simulator parameter requires grad or sits in the optimizer.
    ``on_train_end``: the simulator's weights fingerprint is unchanged.

    Raises:
        FrozenSimulatorError: either check fails.
    """

    def __init__(self, user: FrozenUser) -> None:
        self.user = user

    def check_optimizer(self, optimizer) -> None:
        """Raise if a simulator parameter is trainable or in ``optimizer``."""
        sim = {id(q) for q in self.user.model.parameters()}
        if any(q.requires_grad for q in self.user.model.parameters()):
            raise FrozenSimulatorError("a frozen simulator parameter requires grad")
        held = [q for g in (optimizer.param_groups if optimizer else []) for q in g["params"]]
        if any(id(q) in sim for q in held):
            raise FrozenSimulatorError("the optimizer holds frozen simulator parameters")

    def check_weights(self) -> None:
        """Raise if the simulator's weights changed since loading."""
        if weights_fingerprint(self.user.model) != self.user.fingerprint:
            raise FrozenSimulatorError("the frozen simulator's weights changed during training")

    def on_train_begin(self, args, state, control, optimizer=None, **kwargs):
        self.check_optimizer(optimizer)

    def on_train_end(self, args, state, control, **kwargs):
        self.check_weights()
