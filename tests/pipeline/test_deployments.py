"""Scale-out wiring: prefect.yaml deployments, accelerate configs, and a real dispatch.

The slow test runs the path a GPU worker takes, on loopback and CPU: ``prefect server start``,
work pools, ``prefect deploy`` from the project's prefect.yaml, ``prefect worker start --pool
gpu`` as a process, and the parent flow (``python -m flows.distributed``) dispatching the cheapest
stage (``curate``, smoke profile) with ``run_deployment`` — with DVC sync through a local remote.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import types
from pathlib import Path

import httpx
import pytest
import yaml

from mimesis.pipeline import STAGES

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PROJECT_FILES = ("dvc.yaml", "params.yaml", "prefect.yaml", "pyproject.toml", ".dvcignore",
                 ".dvc/config")
PROJECT_DIRS = ("mimesis", "flows", "tasks", "configs")


def deployments() -> dict[str, dict]:
    return {d["name"]: d for d in yaml.safe_load((ROOT / "prefect.yaml").read_text())[
        "deployments"]}


def test_every_stage_has_a_deployment_on_its_pool() -> None:
    from flows.stage_flows import FLOW_NAME, GPU_STAGES, stage_flow, work_pool

    deps = deployments()
    assert stage_flow.name == FLOW_NAME
    for stage in STAGES:
        d = deps[stage]
        assert d["entrypoint"] == "flows/stage_flows.py:stage_flow"
        assert d["parameters"]["stage"] == stage
        # the agent RL stages run on every GPU of the worker under accelerate launch (DDP)
        launcher = d["parameters"].get("launcher", "")
        assert launcher.startswith("accelerate launch --config_file configs/accelerate/") == (
            stage in ("train_agent", "distill_agent"))
        if launcher:
            assert (Path(__file__).resolve().parents[2] / launcher.split()[-1]).is_file()
        assert d["work_pool"]["name"] == work_pool(stage)
    assert {"train_user", "evaluate_user", "sft_agent", "train_agent", "distill_agent",
            "evaluate_agents"} == GPU_STAGES
    for stage in GPU_STAGES:  # agent stages are deployed ahead of joining STAGES
        assert deps[stage]["work_pool"]["name"] == "gpu"
    assert work_pool("curate") == work_pool("freeze_user") == "cpu"
    assert deps["pipeline"]["entrypoint"] == "flows/distributed.py:distributed_pipeline"
    config = yaml.safe_load((ROOT / "prefect.yaml").read_text())
    step = config["pull"][0]["prefect.deployments.steps.set_working_directory"]
    assert step["directory"] == "{{ $MIMESIS_ROOT }}"


def test_library_and_local_flow_stay_free_of_the_distributed_modules() -> None:
    code = "import sys, mimesis.serve.app, mimesis.serve.chat, mimesis.cli; " \
           "print('prefect' in sys.modules, 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout.split()
    assert out == ["False", "False"]


@pytest.mark.parametrize(("name", "kind"), [("ddp", "MULTI_GPU"), ("zero3", "DEEPSPEED")])
def test_accelerate_configs_load(name, kind) -> None:
    from accelerate.commands.config.config_args import ClusterConfig

    config = ClusterConfig.from_yaml_file(str(ROOT / "configs" / "accelerate" / f"{name}.yaml"))
    assert config.distributed_type.value == kind and config.mixed_precision == "bf16"
    assert config.num_processes >= 2 and not config.use_cpu
    if name == "zero3":
        assert config.deepspeed_config["zero_stage"] == 3
        assert config.deepspeed_config["zero3_save_16bit_model"] is True


def _fake_run(monkeypatch, state, calls: list) -> None:
    from flows import distributed

    def run_deployment(name, parameters, timeout, poll_interval):
        calls.append((name, parameters))
        return types.SimpleNamespace(name="fake-run", work_pool_name="gpu", state=state)

    monkeypatch.setattr(distributed, "run_deployment", run_deployment)


def test_dispatch_hands_dvc_lock_to_the_worker_and_back(monkeypatch, tmp_path) -> None:
    from flows.distributed import dispatch

    (tmp_path / "dvc.lock").write_text("schema: '2.0'\nstages: {}\n")
    out = {"name": "train_user", "ran": True, "seconds": 3.5, "reason": "deps changed",
           "host": "gpu-node-1", "dvc_lock": "schema: '2.0'\nstages: {train_user: {}}\n"}
    state = types.SimpleNamespace(is_completed=lambda: True, result=lambda: out)
    calls: list = []
    _fake_run(monkeypatch, state, calls)
    result = dispatch("train_user", tmp_path, "run-1", "gpu", False, True, 1.0, None)
    assert (result.name, result.ran, result.seconds) == ("train_user", True, 3.5)
    name, params = calls[0]
    assert name == "mimesis-stage/train_user"
    assert params["dvc_lock"] == "schema: '2.0'\nstages: {}\n" and params["dvc_sync"] is True
    assert params["parent_run_id"] == "run-1" and params["profile"] == "gpu"
    assert (tmp_path / "dvc.lock").read_text() == out["dvc_lock"]


def test_dispatch_raises_when_the_stage_run_failed(monkeypatch, tmp_path) -> None:
    from flows.distributed import StageDispatchError, dispatch

    state = types.SimpleNamespace(is_completed=lambda: False, message="CUDA out of memory",
                                  type=types.SimpleNamespace(value="FAILED"))
    _fake_run(monkeypatch, state, [])
    with pytest.raises(StageDispatchError, match="train_user.*FAILED.*CUDA out of memory"):
        dispatch("train_user", tmp_path, "run-1", None, False, False, 1.0, None)
    assert not (tmp_path / "dvc.lock").exists()  # no sync: the lock is left alone


def test_stage_flow_body_syncs_and_nests_under_the_parent_run(monkeypatch, tmp_path) -> None:
    import flows.stage_flows as sf
    from mimesis.pipeline import StageResult
    from mimesis.tracking import PARENT_ENV

    shutil.copy2(ROOT / "params.yaml", tmp_path / "params.yaml")
    seen: dict = {}

    def fake_task(root: str, force: bool) -> StageResult:
        seen["parent"], seen["root"], seen["force"] = os.environ.get(PARENT_ENV), root, force
        seen["lock_before"] = (Path(root) / "dvc.lock").read_text()
        (Path(root) / "dvc.lock").write_text("after\n")
        return StageResult("evaluate_agents", True, 1.0, "forced")

    dvc_calls: list = []
    monkeypatch.setattr(sf, "TASKS", {"evaluate_agents": fake_task})
    monkeypatch.setattr(sf, "dvc", lambda root, *args: dvc_calls.append(args))
    monkeypatch.delenv(PARENT_ENV, raising=False)
    out = sf.stage_flow.fn("evaluate_agents", root=str(tmp_path), profile="smoke", force=True,
                           parent_run_id="parent-9", dvc_lock="before\n", dvc_sync=True)
    assert seen == {"parent": "parent-9", "root": str(tmp_path.resolve()), "force": True,
                    "lock_before": "before\n"}
    assert PARENT_ENV not in os.environ  # restored
    assert dvc_calls == [("pull", "--with-deps", "--allow-missing", "evaluate_agents"),
                         ("push", "evaluate_agents")]
    assert out["dvc_lock"] == "after\n" and out["ran"] and out["host"]
    assert "profile: smoke" in (tmp_path / "params.yaml").read_text()
    with pytest.raises(ValueError, match="unknown stage"):
        sf.stage_flow.fn("nope", root=str(tmp_path))


# --- the real dispatch (slow) ------------------------------------------------------------------
def _copy_project(dest: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for d in PROJECT_DIRS:
        shutil.copytree(ROOT / d, dest / d, ignore=ignore)
    for f in PROJECT_FILES:
        (dest / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, dest / f)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(cmd: list[str], cwd: Path, env: dict, timeout: float = 180) -> str:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)
    assert proc.returncode == 0, f"{cmd}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout + proc.stderr


def _wait_healthy(url: str, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "prefect server exited"
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"{url} not healthy after {timeout} s")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@pytest.mark.slow
def test_parent_flow_dispatches_a_stage_to_a_gpu_pool_worker(tmp_path,
                                                              empty_mlflow_store) -> None:
    project, remote = tmp_path / "project", tmp_path / "dvc-remote"
    project.mkdir()
    _copy_project(project)
    port = _free_port()
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
           "PREFECT_HOME": str(tmp_path / "prefect-home"),
           "PREFECT_API_URL": f"http://127.0.0.1:{port}/api", "MIMESIS_ROOT": str(project),
           "MLFLOW_TRACKING_URI": empty_mlflow_store(project / "mlflow.db"),
           "PREFECT_LOGGING_LEVEL": "INFO"}
    env.pop("MIMESIS_PARENT_RUN_ID", None)
    dvc = [sys.executable, "-m", "dvc"]
    _run(dvc + ["config", "core.no_scm", "true"], project, env)
    _run(dvc + ["remote", "add", "-d", "store", str(remote)], project, env)
    # The cheapest stage stands in for a GPU stage: same deployment, on the gpu pool.
    config = yaml.safe_load((project / "prefect.yaml").read_text())
    for d in config["deployments"]:
        if d["name"] == "curate":
            d["work_pool"]["name"] = "gpu"
    (project / "prefect.dispatch-test.yaml").write_text(yaml.safe_dump(config, sort_keys=False))

    prefect = str(BIN / "prefect")
    with (open(tmp_path / "server.log", "w") as server_log,
          open(tmp_path / "worker.log", "w") as worker_log):
        out = _dispatch_curate(project, env, port, prefect, server_log, worker_log)
    worker_text = (tmp_path / "worker.log").read_text()
    assert "curate: deployment mimesis-stage/curate on pool gpu" in out, out[-3000:]
    assert "-> ran" in out
    assert "curate" in worker_text  # the gpu-pool worker ran the flow run
    assert (project / "data" / "curate" / "train.jsonl").stat().st_size > 0
    lock = yaml.safe_load((project / "dvc.lock").read_text())
    assert "curate" in lock["stages"]
    assert any(p.is_file() for p in remote.rglob("*"))  # outputs pushed to the DVC remote
    assert "profile: smoke" in (project / "params.yaml").read_text()
    _assert_nested_mlflow_runs(project)


def _dispatch_curate(project: Path, env: dict, port: int, prefect: str, server_log,
                     worker_log) -> str:
    """Server, pools, deployment, gpu worker; then the parent flow. Returns its output."""
    server = subprocess.Popen([prefect, "server", "start", "--host", "127.0.0.1", "--port",
                               str(port)], cwd=project.parent, env=env, stdout=server_log,
                              stderr=subprocess.STDOUT, start_new_session=True)
    worker = None
    try:
        _wait_healthy(f"http://127.0.0.1:{port}/api/health", server, timeout=180)
        for pool in ("cpu", "gpu"):
            _run([prefect, "work-pool", "create", pool, "--type", "process"], project, env)
        deployed = _run([prefect, "--no-prompt", "deploy", "--prefect-file",
                         "prefect.dispatch-test.yaml", "--all"], project, env)
        assert "mimesis-stage/train_user" in deployed and "mimesis-distributed/pipeline" in deployed
        worker = subprocess.Popen([prefect, "worker", "start", "--pool", "gpu", "--type",
                                   "process", "--limit", "1"], cwd=project.parent, env=env,
                                  stdout=worker_log, stderr=subprocess.STDOUT,
                                  start_new_session=True)
        return _run([sys.executable, "-m", "flows.distributed", "--stages", "curate",
                     "--profile", "smoke", "--dvc-sync", "--poll-interval", "1",
                     "--stage-timeout", "900"], project, env, timeout=1200)
    finally:
        for proc in (worker, server):
            if proc is not None:
                _stop(proc)


def _assert_nested_mlflow_runs(project: Path) -> None:
    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{project / 'mlflow.db'}")
    runs = mlflow.search_runs(experiment_names=["mimesis"])
    parent = runs[runs["tags.mimesis.kind"] == "pipeline"].iloc[0]
    stage = runs[runs["tags.mlflow.runName"] == "curate"].iloc[0]
    assert stage["tags.mlflow.parentRunId"] == parent["run_id"]
    assert parent["metrics.ran_curate"] == 1
