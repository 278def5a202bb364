"""Bad params fail fast, in one line, before a stage removes its outputs or Prefect retries."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from mimesis.cli import app
from mimesis.params import ParamsError, build
from mimesis.pipeline import run_stage
from mimesis.stages.distill_agent import DistillAgentParams

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """dvc.yaml + params.yaml of the repo, and an earlier run's outputs of the agent stages."""
    for name in ("dvc.yaml", "params.yaml"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "flows", tmp_path / "flows")  # `mimesis run` needs a checkout
    # `mimesis run --profile X` rewrites the checkout's profile line; these tests edit the base
    # sections, which a profile's overrides (claim's envs) would otherwise hide
    params = tmp_path / "params.yaml"
    params.write_text(re.sub(r"(?m)^profile: .*$", "profile: default", params.read_text()))
    for stage in ("train_agent", "distill_agent"):
        (tmp_path / "data" / stage).mkdir(parents=True)
        (tmp_path / "data" / stage / "meta.json").write_text("{}")
    return tmp_path


def _edit(project: Path, stage: str, **values) -> None:
    path = project / "params.yaml"
    raw = yaml.safe_load(path.read_text())
    raw[stage].update(values)
    path.write_text(yaml.safe_dump(raw))


def test_build_names_the_section_of_a_refused_value():
    with pytest.raises(ParamsError, match=r"^params\.yaml distill_agent\.coach: coach\.private"):
        build(DistillAgentParams, {"coach": {"private": "everything"}}, "distill_agent")
    with pytest.raises(ParamsError, match=r"^params\.yaml distill_agent: must be >= 1"):
        build(DistillAgentParams, {"group_size": -2}, "distill_agent")
    with pytest.raises(ParamsError, match=r"^distill_agent\.csd: unknown params \['alfa'\]"):
        build(DistillAgentParams, {"csd": {"alfa": 1}}, "distill_agent")


def test_stage_with_a_typo_in_an_env_name_keeps_its_outputs(project: Path):
    _edit(project, "train_agent", envs=["FunctionGym", "TravelGymm"])
    result = CliRunner().invoke(app, ["stage", "train_agent", "--root", str(project)])
    assert result.exit_code == 2
    assert "unknown environment(s) ['TravelGymm']" in result.output
    assert "Traceback" not in result.output and len(result.output.splitlines()) <= 4
    assert (project / "data" / "train_agent" / "meta.json").exists()


def test_run_stage_checks_params_before_removing_outputs(project: Path):
    raw = yaml.safe_load((project / "params.yaml").read_text())
    raw["evaluate_agents"]["agents"]["envs"] = ["TelepathyGymm"]
    (project / "params.yaml").write_text(yaml.safe_dump(raw))
    (project / "data" / "evaluate_agents").mkdir()
    (project / "data" / "evaluate_agents" / "metrics.json").write_text("{}")  # not persistent
    with pytest.raises(ParamsError, match=r"evaluate_agents\.agents: unknown environment"):
        run_stage(project, "evaluate_agents", force=True)
    assert (project / "data" / "evaluate_agents" / "metrics.json").exists()


def test_run_checks_every_selected_stage_before_the_flow(project: Path, capsys):
    """`python -m flows` (what `mimesis run` starts, passing on its exit status) refuses a bad
    value in the last stages before the first runs or Prefect starts."""
    from flows.__main__ import main

    _edit(project, "distill_agent", envs=["FunctionGym", "SearchGym"])
    assert main(["--root", str(project), "--profile", "default"]) == 2
    out = capsys.readouterr().out
    assert "params.yaml distill_agent: ['SearchGym']: not train environment" in out
    assert "Traceback" not in out and len(out.splitlines()) <= 4
    assert not (project / "data" / "curate").exists()  # nothing ran
    assert (project / "data" / "distill_agent" / "meta.json").exists()


def test_prefect_does_not_retry_invalid_params():
    from prefect.states import Failed

    from tasks.stages import TASKS, retry_unless_params_error

    assert not retry_unless_params_error(None, None, Failed(data=ParamsError("bad value")))
    assert retry_unless_params_error(None, None, Failed(data=ConnectionError("endpoint down")))
    assert all(t.retry_condition_fn is retry_unless_params_error for t in TASKS.values())


def test_run_with_an_unknown_profile_is_a_clear_error(project: Path):
    before = (project / "params.yaml").read_text()
    result = CliRunner().invoke(app, ["run", "--profile", "nosuch", "--root", str(project)])
    assert result.exit_code == 2
    assert "unknown profile 'nosuch'" in result.output and "Traceback" not in result.output
    assert (project / "params.yaml").read_text() == before
    assert not (project / "data" / "curate").exists()  # nothing ran
