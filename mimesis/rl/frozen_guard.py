"""The guard that keeps the frozen user simulator frozen while an agent trains.

The simulator (:class:`~mimesis.users.frozen.FrozenUser`, loaded by
:func:`mimesis.users.frozen.load_user`) is out of autograd; this TRL/transformers callback
checks that not one of its parameters is in the optimizer, and that its weights fingerprint is
the same after training.
"""

from __future__ import annotations

from transformers import TrainerCallback

from mimesis.simulator.frozen import FrozenSimulatorError
from mimesis.users.frozen import FrozenUser, weights_fingerprint


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
