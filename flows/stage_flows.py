"""One stage as its own Prefect flow: the unit a work pool runs.

``prefect.yaml`` deploys :func:`stage_flow` once per stage (deployment ``mimesis-stage/<stage>``):
the GPU stages (:data:`GPU_STAGES`) on the ``gpu`` work pool, the others on ``cpu``. A worker runs
it in its own checkout (the deployment's pull step changes into ``$MIMESIS_ROOT``) through the
same Prefect task as the local flow (``tasks/stages.py`` → ``mimesis.pipeline.run_stage``), so DVC
decides whether the stage is stale and ``dvc.lock`` records it, as under ``dvc repro``.

Workers on other machines (``dvc_sync=True``): the parent sends its ``dvc.lock``; the worker pulls
the stage's upstream outputs from the DVC remote, runs the stage, pushes its outputs and returns
the new ``dvc.lock`` for the parent to keep.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from prefect import flow

from mimesis.params import set_profile
from mimesis.runtime_env import configure_environment
from mimesis.tracking import PARENT_ENV
from tasks.stages import TASKS

FLOW_NAME = "mimesis-stage"
GPU_STAGES = frozenset({"train_user", "evaluate_user", "sft_agent", "train_agent", "distill_agent",
                        "evaluate_agents"})
"""Stages deployed on the ``gpu`` pool: training and generation-heavy evaluation."""


def work_pool(stage: str) -> str:
    """Work pool of ``stage``'s deployment: ``gpu`` or ``cpu``."""
    return "gpu" if stage in GPU_STAGES else "cpu"


def deployment_name(stage: str) -> str:
    """``<flow>/<deployment>`` name that ``run_deployment`` takes for ``stage``."""
    return f"{FLOW_NAME}/{stage}"


@contextmanager
def parent_run(run_id: str | None) -> Iterator[None]:
    """Nest the stage's MLflow run under the dispatching pipeline's run (another process)."""
    previous = os.environ.get(PARENT_ENV)
    if run_id:
        os.environ[PARENT_ENV] = run_id
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(PARENT_ENV, None)
        else:
            os.environ[PARENT_ENV] = previous


def dvc(root: Path, *args: str) -> None:
    """Run ``dvc <args>`` in ``root`` (raises ``CalledProcessError`` with its output)."""
    subprocess.run([sys.executable, "-m", "dvc", *args], cwd=root, check=True, text=True,
                   capture_output=True)


@flow(name=FLOW_NAME, flow_run_name="{stage}", persist_result=True,
      result_serializer="json")
def stage_flow(stage: str, root: str = ".", profile: str | None = None, force: bool = False,
               parent_run_id: str | None = None, dvc_lock: str | None = None,
               dvc_sync: bool = False, launcher: str = "") -> dict:
    """Run ``stage`` in the checkout at ``root`` if DVC says it is stale (or ``force``).

    Args:
        stage: A stage name of ``mimesis.pipeline.STAGES``.
        root: Project checkout (the deployment's working directory by default).
        profile: params.yaml profile to set first (``None``: keep the checkout's).
        force: Run even when up to date.
        parent_run_id: MLflow run of the dispatching pipeline.
        dvc_lock: Text of the parent's ``dvc.lock``, written here before pulling.
        dvc_sync: Pull upstream outputs from, and push this stage's outputs to, the DVC remote.
        launcher: Command the stage runs under (``prefect.yaml`` gives ``train_agent`` and
            ``distill_agent`` ``accelerate launch --config_file configs/accelerate/ddp.yaml``);
            ``""``: in this process.

    Returns:
        ``StageResult`` fields plus ``dvc_lock`` (the checkout's lock text) and ``host``.

    Raises:
        ValueError: unknown stage.
    """
    configure_environment()
    if stage not in TASKS:
        raise ValueError(f"unknown stage {stage!r}; choose from {list(TASKS)}")
    root_path = Path(root).resolve()
    if profile:
        set_profile(root_path / "params.yaml", profile)
    if dvc_lock is not None:
        (root_path / "dvc.lock").write_text(dvc_lock)
    if dvc_sync:
        dvc(root_path, "pull", "--with-deps", "--allow-missing", stage)
    with parent_run(parent_run_id):
        extra = {"launcher": launcher} if launcher else {}
        result = TASKS[stage](root=str(root_path), force=force, **extra)
    if dvc_sync and result.ran:
        dvc(root_path, "push", stage)
    lock = root_path / "dvc.lock"
    return {**dataclasses.asdict(result), "host": socket.gethostname(),
            "dvc_lock": lock.read_text() if lock.exists() else None}
