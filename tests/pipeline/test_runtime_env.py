"""``import mimesis`` changes nothing in the process; the entry points apply the environment
defaults; the library and the wheel stay free of the orchestration packages."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from setuptools import find_packages

from mimesis.runtime_env import OFFLINE_ENV

ROOT = Path(__file__).resolve().parents[2]
DEFAULTED = (*OFFLINE_ENV, "MLFLOW_TRACKING_URI")


def _python(code: str, **extra_env: str) -> dict:
    """Run ``code`` in a fresh interpreter whose environment lacks every default; it prints a
    JSON object, returned here."""
    env = {k: v for k, v in os.environ.items() if k not in DEFAULTED}
    env.update(extra_env, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                          text=True, check=True, timeout=300)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_importing_the_library_leaves_os_environ_unchanged():
    out = _python(
        "import json, os, sys\n"
        "import sklearn\n"  # third-party: it sets KMP_* itself; only our changes count
        "before = dict(os.environ)\n"
        "import mimesis, mimesis.cli, mimesis.params, mimesis.pipeline, mimesis.tracking\n"
        "import mimesis.deps, mimesis.serve.app, mimesis.eval.realism.metrics\n"
        "after = dict(os.environ)\n"
        "print(json.dumps({'changed': sorted(k for k in before.keys() | after.keys()\n"
        "                                    if before.get(k) != after.get(k)),\n"
        "                  'flows': 'flows' in sys.modules or 'tasks' in sys.modules}))\n")
    assert out == {"changed": [], "flows": False}


def test_the_cli_applies_the_defaults_before_any_command(tmp_path):
    code = ("import json, os\n"
            "from mimesis.cli import app\n"
            f"try:\n    app(['status', '--root', {str(tmp_path)!r}])\n"
            "except SystemExit:\n    pass\n"
            "print(json.dumps({k: os.environ.get(k) for k in "
            "('HF_HUB_OFFLINE', 'MLFLOW_TRACKING_URI', 'OMP_WAIT_POLICY')}))\n")
    assert _python(code) == {"HF_HUB_OFFLINE": "1", "MLFLOW_TRACKING_URI": "sqlite:///mlflow.db",
                             "OMP_WAIT_POLICY": "PASSIVE"}
    assert _python(code, OMP_WAIT_POLICY="ACTIVE")["OMP_WAIT_POLICY"] == "ACTIVE"  # caller wins


@pytest.mark.slow
def test_a_stage_entry_point_applies_them_before_torch_and_the_hub_load():
    out = _python("import json, os, warnings\n"
                  "warnings.simplefilter('error')\n"  # the 'torch came first' warning fails
                  "import mimesis.stages.sft_agent as stage\n"
                  "import huggingface_hub.constants as hub\n"
                  "print(json.dumps({'hub_offline': hub.HF_HUB_OFFLINE,\n"
                  "                  'omp': os.environ.get('OMP_WAIT_POLICY')}))\n")
    assert out == {"hub_offline": True, "omp": "PASSIVE"}


def test_the_wheel_installs_only_the_library():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = find_packages(where=str(ROOT), **config["packages"]["find"])
    assert "mimesis" in packages and "mimesis.stages" in packages
    assert [p for p in packages if p.split(".")[0] != "mimesis"] == []


def test_the_library_imports_no_orchestration_package():
    from mimesis.deps import _imported_names

    found = set()
    for path in (ROOT / "mimesis").rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        found |= {(name, n) for n in _imported_names(name, path, ROOT)
                  if n.split(".")[0] in ("flows", "tasks", "prefect")}
    assert found == set()  # `mimesis run` starts `python -m flows` as a process instead


def test_run_starts_the_flow_of_the_checkout_it_is_given(tmp_path):
    from typer.testing import CliRunner

    from mimesis.cli import app

    for name in ("dvc.yaml", "params.yaml"):
        shutil.copy(ROOT / name, tmp_path / name)
    before = (tmp_path / "params.yaml").read_text()
    result = CliRunner().invoke(app, ["run", "--profile", "smoke", "--root", str(tmp_path)])
    assert result.exit_code == 2 and "needs the project checkout" in result.output
    assert (tmp_path / "params.yaml").read_text() == before  # refused before any change

    (tmp_path / "flows").mkdir()
    (tmp_path / "flows" / "__init__.py").write_text("")
    (tmp_path / "flows" / "__main__.py").write_text(
        "import json, sys\nopen('argv.json', 'w').write(json.dumps(sys.argv[1:]))\n"
        "raise SystemExit(3)\n")
    result = CliRunner().invoke(app, ["run", "--stages", "curate,label", "--force",
                                      "--root", str(tmp_path)])
    assert result.exit_code == 3  # the flow's exit status is the command's
    profile = yaml.safe_load((tmp_path / "params.yaml").read_text())["profile"]
    argv = json.loads((tmp_path / "argv.json").read_text())
    assert argv == ["--root", ".", "--profile", profile, "--stages", "curate,label", "--force"]


def test_python_m_flows_states_its_options():
    out = subprocess.run([sys.executable, "-m", "flows", "--help"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    assert all(opt in out for opt in ("--root", "--profile", "--stages", "--force"))
