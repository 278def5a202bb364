"""The whole pipeline under the Prefect flow on the smoke profile, in a throw-away copy of the repo.

Checks the contract users rely on: every stage runs and is tracked in MLflow under one parent
run; the evaluation episodes are MLflow sessions without reasoning; dvc.yaml's plots have data;
afterwards dvc.lock is true (``dvc status`` and ``dvc repro`` have nothing to do); a flow run
after one stage's params changed re-runs exactly that stage.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mimesis.pipeline import STAGES

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _copy_project(dest: Path) -> None:
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                           cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    for rel in files:
        src = ROOT / rel
        if src.is_file() and not rel.startswith("data/"):
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    for f in ("dvc.lock",):
        (dest / f).unlink(missing_ok=True)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git + ["init", "-q"], cwd=dest, check=True)
    subprocess.run(git + ["add", "-A"], cwd=dest, check=True)
    subprocess.run(git + ["commit", "-qm", "copy"], cwd=dest, check=True)


def _env(project: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env['PATH']}"
    env["MLFLOW_TRACKING_URI"] = f"sqlite:///{project / 'mlflow.db'}"
    env.pop("MIMESIS_PARENT_RUN_ID", None)
    return env


def _mimesis(project: Path, *args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(BIN / "mimesis"), *args], cwd=project, env=_env(project),
                          capture_output=True, text=True, timeout=1500, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return proc


def _last_pipeline_ran(project: Path) -> dict[str, int]:
    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{project / 'mlflow.db'}")
    runs = mlflow.search_runs(experiment_names=["mimesis"],
                              filter_string="tags.`mimesis.kind` = 'pipeline'",
                              order_by=["start_time DESC"], max_results=1)
    row = runs.iloc[0]
    return {s: int(row[f"metrics.ran_{s}"]) for s in STAGES}


def _check_traces(project: Path, episodes: list[dict]) -> None:
    """Every evaluation episode is an MLflow session (a trace per turn of its conversation, its
    user as the session's user); training rollouts are sampled; no trace holds reasoning or a
    scenario."""
    import mlflow

    from mimesis.traces import conversation_turns

    mlflow.set_tracking_uri(f"sqlite:///{project / 'mlflow.db'}")
    experiment = mlflow.get_experiment_by_name("mimesis").experiment_id
    traces = mlflow.search_traces(locations=[experiment], return_type="list")
    evaluation = [t for t in traces if t.info.tags.get("mimesis.stage") == "evaluate_agents"]
    turns = sum(len(conversation_turns(e["messages"], e["turns"])) for e in episodes)
    assert len(evaluation) == turns
    assert len({t.info.trace_metadata["mlflow.trace.session"] for t in evaluation}) == len(episodes)
    assert {t.info.trace_metadata["mlflow.trace.user"] for t in evaluation} == {
        e["user"] for e in episodes}
    for stage in ("sft_agent", "train_agent", "distill_agent"):
        assert any(t.info.tags.get("mimesis.stage") == stage for t in traces), stage
    text = " ".join(t.to_json() for t in evaluation)
    for e in episodes:
        public = " ".join(m["content"] for m in e["messages"])
        assert e["scenario"]["goal"] not in text
        for turn in e["turns"]:
            reasoning = (turn.get("user_reasoning") or "").strip()
            assert len(reasoning) < 8 or reasoning in public or reasoning not in text


def _check_plots(project: Path) -> None:
    """dvc.yaml's plots read files the run wrote, each with data, and `dvc plots show` renders
    them without an error."""
    spec = yaml.safe_load((project / "dvc.yaml").read_text())["plots"]
    for entry in spec:
        files = [entry] if isinstance(entry, str) else list(next(iter(entry.values()))["y"])
        for rel in files:
            path = project / rel
            assert path.stat().st_size > 0, rel
            if path.suffix == ".csv":
                assert len(path.read_text().splitlines()) >= 2, rel  # header + data
    shown = subprocess.run([str(BIN / "dvc"), "plots", "show", "--json"], cwd=project,
                           env=_env(project), capture_output=True, text=True, check=True)
    assert not json.loads(shown.stdout).get("errors"), shown.stdout[:2000]


def params_yaml(project):
    return yaml.safe_load((project / "params.yaml").read_text())


@pytest.mark.slow
def test_flow_runs_tracks_and_reruns_only_what_changed(tmp_path, empty_mlflow_store):
    project = tmp_path / "project"
    project.mkdir()
    _copy_project(project)
    empty_mlflow_store(project / "mlflow.db")  # the path _env gives every run

    _mimesis(project, "run", "--profile", "smoke")
    assert _last_pipeline_ran(project) == dict.fromkeys(STAGES, 1)
    realism = yaml.safe_load((project / "data/evaluate_user/metrics.json").read_text())
    assert {"trained", "baseline", "real"} <= set(realism)
    metrics = yaml.safe_load((project / "data/evaluate_agents/metrics.json").read_text())
    assert {"agents", "fact_reveal"} <= set(metrics) and "trained" not in metrics
    assert (project / "data/freeze_user/simulator/meta.json").exists()
    # Agent half: five agents under the training simulator and three unseen users, per env.
    by_agent = metrics["agents"]["by_agent"]
    assert set(by_agent) == {"base", "sft", "grpo-prompted", "grpo", "csd"}
    assert (project / "data/train_agent/grpo-prompted/model").is_dir()
    assert (project / "data/sft_agent/traces.jsonl").stat().st_size > 0
    smoke_envs = params_yaml(project)["profiles"]["smoke"]["evaluate_agents"]["agents"]["envs"]
    for users in by_agent.values():
        assert set(users) == {"frozen", "replay", "agenda", "prompted-tiny"}
        for envs in users.values():
            assert set(envs) == {*smoke_envs, "ALL"}
            assert all(0 <= e["success_rate"] <= 1 and e["n"] >= 1 for e in envs.values())
    episodes = (project / "data/evaluate_agents/agent_episodes.jsonl").read_text().splitlines()
    n_scenarios = params_yaml(project)["profiles"]["smoke"]["evaluate_agents"]["agents"]["n_scenarios"]
    assert len(episodes) == 5 * 4 * len(smoke_envs) * n_scenarios
    assert (project / "data/evaluate_agents/plots/agents.png").stat().st_size > 1000
    assert (project / "data/evaluate_agents/plots/agent_diffs.png").stat().st_size > 1000
    assert metrics["agents"]["diff"]  # paired differences with their CIs
    _check_traces(project, [json.loads(line) for line in episodes])
    _check_plots(project)
    # The run summary the pipeline writes itself: the run, every stage's time, every part.
    summary = (project / "data/report/summary.md").read_text()
    assert "- profile: smoke" in summary and "not run (no " not in summary
    assert all(f"| {s} | ran |" in summary for s in STAGES)

    import mlflow

    parent = mlflow.search_runs(experiment_names=["mimesis"],
                                filter_string="tags.`mimesis.kind` = 'pipeline'").iloc[0]
    children = mlflow.search_runs(
        experiment_names=["mimesis"],
        filter_string=f"tags.`mlflow.parentRunId` = '{parent['run_id']}'")
    assert sorted(children["tags.mlflow.runName"]) == sorted(STAGES)

    env = _env(project)
    status = subprocess.run([str(BIN / "dvc"), "status"], cwd=project, env=env,
                            capture_output=True, text=True, check=True).stdout
    assert "up to date" in status, status
    repro = subprocess.run([str(BIN / "dvc"), "repro"], cwd=project, env=env,
                           capture_output=True, text=True, check=True).stdout
    assert "Running stage" not in repro, repro

    # A flow run after one stage's params changed re-runs that stage and nothing else (so a run
    # with no change re-runs nothing: dvc status said so above).
    params_path = project / "params.yaml"
    params = yaml.safe_load(params_path.read_text())
    params["profiles"]["smoke"]["evaluate_user"]["max_conversations"] += 1
    params_path.write_text(yaml.safe_dump(params, sort_keys=False))
    _mimesis(project, "run")
    assert _last_pipeline_ran(project) == {s: int(s == "evaluate_user") for s in STAGES}
    status = subprocess.run([str(BIN / "dvc"), "status"], cwd=project, env=env,
                            capture_output=True, text=True, check=True).stdout
    assert "up to date" in status, status
