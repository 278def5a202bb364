"""dvc.yaml, params.yaml, the stage modules, the Prefect tasks and the CLI agree on names."""

import importlib
from pathlib import Path

import yaml

from mimesis.pipeline import STAGES, stage_command

ROOT = Path(__file__).resolve().parents[1]


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
        assert {"profile", "seed", name, f"profiles.smoke.{name}", f"profiles.gpu.{name}"} <= set(declared)
        for profile in ("smoke", "gpu"):
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


def test_prefect_tasks_cover_every_stage_by_name():
    from tasks.stages import TASKS

    assert list(TASKS) == list(STAGES)
    assert [t.name for t in TASKS.values()] == list(STAGES)
