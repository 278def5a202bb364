"""Rank-0-only outputs for the agent RL stages under ``accelerate launch`` (DDP or ZeRO-3).

Every process trains (and, for ZeRO-3, takes part in ``save_model``'s gather); only the main
process (``RANK`` 0, or a plain single-process run) clears and writes the stage's files —
``meta.json``, ``model/``, ``episodes.jsonl``, ``train_log.json`` — and holds the MLflow runs.
The other processes get a stand-in run (``info.run_id`` ``None``), so ``mlflow.active_run()`` is
``None`` there and every metric logger of the stage is a no-op.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any


def is_main_process() -> bool:
    """True in a single-process run and in the process of global rank 0 (``RANK``, set by
    ``accelerate launch`` / ``torchrun``)."""
    return int(os.environ.get("RANK", "0")) == 0


def world_size() -> int:
    """Processes of this run (``WORLD_SIZE``, 1 without a launcher)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


@contextmanager
def main_run(start: Callable[[], Any]) -> Iterator[Any]:
    """``start()`` (an MLflow run context) on the main process; a stand-in elsewhere."""
    if is_main_process():
        with start() as run:
            yield run
    else:
        yield SimpleNamespace(info=SimpleNamespace(run_id=None))


@contextmanager
def main_first() -> Iterator[None]:
    """The main process runs the block first (e.g. deleting stale checkpoints), the others after
    it (accelerate's ``main_process_first``; a plain context in a single-process run)."""
    if world_size() == 1:
        yield
        return
    with _state().main_process_first():
        yield


def wait_for_everyone() -> None:
    """Barrier across the launched processes (no-op in a single-process run)."""
    if world_size() > 1:
        _state().wait_for_everyone()


def _state():
    """accelerate's process state, as the trainer will build it (``cpu`` without CUDA: gloo; the
    state is shared, so the first construction decides the backend)."""
    import torch
    from accelerate import PartialState

    return PartialState(cpu=not torch.cuda.is_available())
