"""Resumable stages after a kill: partial checkpoints are skipped, orphaned MLflow runs failed."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from mimesis.tracking import stage_run
from mimesis.train.sft import checkpoint_problem, prepare_checkpoints


def _checkpoint(root: Path, step: int) -> Path:
    """A complete checkpoint in Trainer's layout (real safetensors and torch.save files)."""
    path = root / f"checkpoint-{step}"
    path.mkdir(parents=True)
    save_file({"w": torch.zeros(64)}, str(path / "adapter_model.safetensors"))
    torch.save({"state": {}}, path / "optimizer.pt")
    torch.save({"last_epoch": step}, path / "scheduler.pt")
    (path / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    return path


def _truncate(file: Path) -> None:
    data = file.read_bytes()
    file.write_bytes(data[:len(data) // 2])


@pytest.mark.parametrize("damage", ["no_state", "cut_weights", "no_weights", "cut_optimizer"])
def test_a_partial_checkpoint_is_skipped_for_the_previous_complete_one(tmp_path, caplog,
                                                                       damage) -> None:
    ckpt_dir = tmp_path / "checkpoints"
    prepare_checkpoints(ckpt_dir, "run-a")
    _checkpoint(ckpt_dir, 1)
    last = _checkpoint(ckpt_dir, 2)
    {"no_state": lambda: (last / "trainer_state.json").unlink(),
     "cut_weights": lambda: _truncate(last / "adapter_model.safetensors"),
     "no_weights": lambda: (last / "adapter_model.safetensors").unlink(),
     "cut_optimizer": lambda: _truncate(last / "optimizer.pt")}[damage]()
    assert checkpoint_problem(last) is not None
    with caplog.at_level(logging.WARNING, logger="mimesis.train"):
        resume = prepare_checkpoints(ckpt_dir, "run-a")
    assert resume == str(ckpt_dir / "checkpoint-1")
    assert not last.exists()
    assert "skipping partial checkpoint" in caplog.text and "checkpoint-2" in caplog.text


def test_complete_checkpoints_resume_from_the_latest(tmp_path) -> None:
    ckpt_dir = tmp_path / "checkpoints"
    prepare_checkpoints(ckpt_dir, "run-a")
    for step in (2, 10, 9):
        _checkpoint(ckpt_dir, step)
    assert prepare_checkpoints(ckpt_dir, "run-a") == str(ckpt_dir / "checkpoint-10")
    assert checkpoint_problem(ckpt_dir / "checkpoint-9") is None


def test_only_partial_checkpoints_start_over(tmp_path) -> None:
    ckpt_dir = tmp_path / "checkpoints"
    prepare_checkpoints(ckpt_dir, "run-a")
    (_checkpoint(ckpt_dir, 1) / "trainer_state.json").write_text("{ cut")
    assert prepare_checkpoints(ckpt_dir, "run-a") is None


@pytest.fixture
def experiment(tmp_path, monkeypatch, empty_mlflow_store):
    monkeypatch.setenv("MIMESIS_EXPERIMENT", f"test-{tmp_path.name}")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", empty_mlflow_store(tmp_path / "mlflow.db"))
    import mlflow

    mlflow.set_tracking_uri(os.environ["MLFLOW_TRACKING_URI"])
    return mlflow.set_experiment(f"test-{tmp_path.name}").experiment_id


def _running_run(experiment_id: str, stage: str, pid: int) -> str:
    from mlflow import MlflowClient

    run = MlflowClient().create_run(experiment_id, run_name=stage, tags={
        "mimesis.stage": stage, "mimesis.host": socket.gethostname(), "mimesis.pid": str(pid)})
    return run.info.run_id


def test_a_killed_stage_run_is_marked_failed_on_the_next_start(experiment) -> None:
    from mlflow import MlflowClient

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # a pid that no longer exists: the "killed" stage process
    killed = _running_run(experiment, "train_user", dead.pid)
    alive = _running_run(experiment, "train_user", os.getppid())  # another live process
    other_stage = _running_run(experiment, "label", dead.pid)
    with stage_run("train_user", {"profile": "default"}) as run:
        new = run.info.run_id
    client = MlflowClient()
    status = {r: client.get_run(r).info.status for r in (killed, alive, other_stage, new)}
    assert status == {killed: "FAILED", alive: "RUNNING", other_stage: "RUNNING",
                      new: "FINISHED"}
    assert client.get_run(new).data.tags["mimesis.pid"] == str(os.getpid())


def test_the_child_runs_of_a_killed_stage_are_marked_failed_too(experiment) -> None:
    """train_agent's arms run as child runs without a pid tag; killed with their stage, they
    were left RUNNING for ever (seen after an OOM kill of a default run)."""
    from mlflow import MlflowClient

    client = MlflowClient()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    killed = _running_run(experiment, "train_agent", dead.pid)
    arm = client.create_run(experiment, run_name="train_agent/grpo",
                            tags={"mlflow.parentRunId": killed}).info.run_id
    grandchild = client.create_run(experiment, run_name="x",
                                   tags={"mlflow.parentRunId": arm}).info.run_id
    alive_parent = _running_run(experiment, "train_agent", os.getppid())
    alive_arm = client.create_run(experiment, run_name="train_agent/grpo",
                                  tags={"mlflow.parentRunId": alive_parent}).info.run_id
    with stage_run("train_agent", {"profile": "default"}):
        pass
    status = {r: client.get_run(r).info.status
              for r in (killed, arm, grandchild, alive_parent, alive_arm)}
    assert status == {killed: "FAILED", arm: "FAILED", grandchild: "FAILED",
                      alive_parent: "RUNNING", alive_arm: "RUNNING"}
