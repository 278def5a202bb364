"""MLflow tracking: one child run per stage, nested under the pipeline's parent run if any.

The tracking URI defaults to ``sqlite:///mlflow.db`` (set in ``mimesis.runtime_env``). A Prefect
flow run exports ``MIMESIS_PARENT_RUN_ID``; a stage started by ``dvc repro`` alone gets its own
top-level run.

A stage run records the host and process that run it (tags ``mimesis.host``, ``mimesis.pid``).
A process killed mid-stage (SIGKILL, OOM, a cancelled flow) leaves its run RUNNING for ever; the
next start of the same stage marks such runs FAILED (:func:`fail_orphaned_runs`): same host,
process gone.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

EXPERIMENT = "mimesis"
PARENT_ENV = "MIMESIS_PARENT_RUN_ID"
log = logging.getLogger("mimesis.tracking")


def flatten(d: dict, prefix: str = "") -> dict[str, Any]:
    """Flatten nested dicts to dotted keys (for ``mlflow.log_params``)."""
    out: dict[str, Any] = {}
    for key, value in d.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def git_commit(cwd: Path | None = None) -> str:
    """Current git commit (``+dirty`` when the tree has changes), or ``unknown`` outside git."""
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd,
                               capture_output=True, text=True, check=False).stdout.strip()
        return sha + ("+dirty" if dirty else "")
    except (subprocess.CalledProcessError, FileNotFoundError):
        return "unknown"


def _mlflow():
    import mlflow

    # The environment is authoritative: a process that called mlflow.set_tracking_uri earlier
    # (a notebook, another library, a test) must not silently redirect the stage's runs.
    if uri := os.environ.get("MLFLOW_TRACKING_URI"):
        mlflow.set_tracking_uri(uri)
    mlflow.set_experiment(os.environ.get("MIMESIS_EXPERIMENT", EXPERIMENT))
    return mlflow


@contextmanager
def pipeline_run(profile: str, stages: list[str]) -> Iterator[Any]:
    """Parent run of one pipeline run; stage runs started inside it become its children."""
    mlflow = _mlflow()
    with mlflow.start_run(run_name="pipeline", tags={"mimesis.kind": "pipeline",
                                                      "mimesis.profile": profile,
                                                      "mimesis.git_commit": git_commit()}) as run:
        mlflow.log_params({"profile": profile, "stages": ",".join(stages)})
        previous = os.environ.get(PARENT_ENV)
        os.environ[PARENT_ENV] = run.info.run_id
        try:
            yield run
        finally:
            if previous is None:
                os.environ.pop(PARENT_ENV, None)
            else:
                os.environ[PARENT_ENV] = previous


@contextmanager
def stage_run(stage: str, params: dict) -> Iterator[Any]:
    """MLflow run named after ``stage`` with its flattened params logged.

    Yields the active ``mlflow.ActiveRun``; log metrics/artifacts with the ``mlflow`` module.
    """
    mlflow = _mlflow()
    fail_orphaned_runs(stage)
    parent = os.environ.get(PARENT_ENV)
    tags = {"mimesis.stage": stage, "mimesis.profile": str(params.get("profile", "default")),
            "mimesis.git_commit": git_commit(), "mimesis.host": socket.gethostname(),
            "mimesis.pid": str(os.getpid())}
    with mlflow.start_run(run_name=stage, parent_run_id=parent,
                          nested=mlflow.active_run() is not None, tags=tags) as run:
        flat = {k: str(v)[:5000] for k, v in flatten(params).items()}
        mlflow.log_params(flat)
        yield run


def fail_orphaned_runs(stage: str) -> list[str]:
    """Mark FAILED the RUNNING runs of ``stage`` whose process is gone (killed mid-stage).

    Only runs started on this host by a process that no longer exists are touched: a run of
    another machine, or of a process still alive, may still be working.

    Returns:
        The ids of the runs marked FAILED (each also logged as a warning).
    """
    mlflow = _mlflow()
    client = mlflow.MlflowClient()
    experiment = mlflow.get_experiment_by_name(os.environ.get("MIMESIS_EXPERIMENT", EXPERIMENT))
    if experiment is None:
        return []
    runs = client.search_runs([experiment.experiment_id],
                              filter_string=f"tags.`mimesis.stage` = '{stage}' and "
                                            "attributes.status = 'RUNNING'")
    failed = []
    for run in runs:
        tags = run.data.tags
        pid = tags.get("mimesis.pid", "")
        if tags.get("mimesis.host") != socket.gethostname() or not pid.isdigit():
            continue
        if int(pid) == os.getpid() or _alive(int(pid)):
            continue
        client.set_terminated(run.info.run_id, status="FAILED")
        log.warning("MLflow run %s of stage %s was left RUNNING by process %s, which is gone: "
                    "marked FAILED", run.info.run_id, stage, pid)
        failed.append(run.info.run_id)
    # A killed stage's child runs (train_agent's arms, ...) died with it and carry no pid tag.
    queue = list(failed)
    while queue:
        parent = queue.pop()
        for child in client.search_runs([experiment.experiment_id],
                                        filter_string=f"tags.`mlflow.parentRunId` = '{parent}' "
                                                      "and attributes.status = 'RUNNING'"):
            client.set_terminated(child.info.run_id, status="FAILED")
            log.warning("MLflow run %s (%s), child of the killed run %s: marked FAILED",
                        child.info.run_id, child.data.tags.get("mlflow.runName", ""), parent)
            failed.append(child.info.run_id)
            queue.append(child.info.run_id)
    return failed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def log_stage_times(results: list[Any]) -> None:
    """Log each stage's wall time (s) and whether it ran to the active (parent) run."""
    import mlflow

    for r in results:
        mlflow.log_metric(f"seconds_{r.name}", round(r.seconds, 2))
        mlflow.log_metric(f"ran_{r.name}", int(r.ran))
