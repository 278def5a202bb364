"""dvc.yaml, params.yaml, the stage modules, the Prefect tasks and the CLI agree on names."""

import importlib
from pathlib import Path

import yaml

from mimesis.params import PROFILES
from mimesis.pipeline import STAGES, stage_command

ROOT = Path(__file__).resolve().parents[2]


def test_every_stage_is_one_name_everywhere():
    dvc = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    assert list(dvc) == list(STAGES)
    for name in STAGES:
        module, argv = stage_command(ROOT, name)
        assert module == f"mimesis.stages.{name}"
        assert hasattr(importlib.import_module(module), "main")
        assert f"data/{name}" in " ".join(argv) or any(
            str(o).startswith(f"data/{name}") for o in dvc[name]["outs"])
        assert name in params
        declared = dvc[name]["params"]
        others = [p for p in PROFILES if p != "default"]
        assert {"profile", "seed", name, *(f"profiles.{p}.{name}" for p in others)} <= set(declared)
        for profile in others:
            assert name in params["profiles"][profile], f"profiles.{profile}.{name} missing"


def test_declared_code_dependencies_exist():
    dvc = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    for name, stage in dvc.items():
        for dep in stage["deps"]:
            if dep.startswith("data/"):
                continue  # produced by an upstream stage
            assert (ROOT / dep).exists(), f"{name}: dependency {dep} does not exist"


def test_code_deps_cover_every_imported_module():
    """A stage re-runs when any module it can import changes: the import graph of its entry
    module is covered by its deps, and the deps are exactly the derived ones."""
    from mimesis.deps import check

    reports = check(ROOT)
    uncovered = {r.stage: r.uncovered for r in reports if r.uncovered}
    assert uncovered == {}, f"uncovered modules (run `mimesis deps --write`): {uncovered}"
    stale = [r.stage for r in reports if r.listed != r.derived]
    assert stale == [], f"code deps differ from the import graph (`mimesis deps --write`): {stale}"


AGENT_STAGES = ("sft_agent", "train_agent", "distill_agent")


def _rerun_by(dvc: dict, changed_paths: set[str]) -> set[str]:
    """Stages ``dvc repro`` re-runs when ``changed_paths`` change: those with a dep covering one
    of them, then, transitively, those depending on the outputs of a re-run stage."""
    def covers(dep: str, path: str) -> bool:
        return path == dep or path.startswith(dep.rstrip("/") + "/")

    def outs(stage: dict) -> list[str]:
        return [next(iter(o)) if isinstance(o, dict) else o
                for o in stage.get("outs", []) + stage.get("metrics", [])]

    rerun: set[str] = set()
    frontier = set(changed_paths)
    while frontier:
        hit = {n for n, st in dvc.items() if n not in rerun
               and any(covers(d, p) or covers(p, d) for d in st["deps"] for p in frontier)}
        rerun |= hit
        frontier = {o for n in hit for o in outs(dvc[n])}
    return rerun


def test_a_change_to_an_agent_stage_reruns_only_evaluate_agents_downstream():
    """Realism waits for no agent: evaluate_user needs only freeze_user and label."""
    dvc = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    assert {"data/freeze_user", "data/label"} == {
        d for d in dvc["evaluate_user"]["deps"] if d.startswith("data/")}
    for name in AGENT_STAGES:
        for changed in (f"mimesis/stages/{name}.py", f"data/{name}"):
            rerun = _rerun_by(dvc, {changed})
            assert "evaluate_agents" in rerun, changed
            assert rerun <= {*AGENT_STAGES, "evaluate_agents"}, (changed, rerun)
    # a change to the frozen simulator re-runs both evaluations
    assert {"evaluate_user", "evaluate_agents"} <= _rerun_by(dvc, {"data/freeze_user"})
    assert STAGES.index("evaluate_user") < STAGES.index("sft_agent")  # results come first


def test_prefect_tasks_cover_every_stage_by_name():
    from tasks.stages import TASKS

    assert list(TASKS) == list(STAGES)
    assert [t.name for t in TASKS.values()] == list(STAGES)
