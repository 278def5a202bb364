"""dvc.yaml's ``plots:``: the training curves (reward per env, group signal, loss) and the
evaluation figures render with ``dvc plots show``, from the files the stages write, and the
section survives ``mimesis deps --write``. The smoke pipeline's own files are checked in
tests/pipeline/test_flow_integration.py."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from mimesis.deps import write
from mimesis.rl.agent_report import write_plot_data

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
HISTORY = [{"step": 1, "reward": 0.25, "reward/TravelGym": 0.5, "reward/PersuadeGym": 0.0,
            "format_compliance/TravelGym": 1.0, "groups/raw_signal_frac": 0.5,
            "groups/kept_signal_frac": 0.5},
           {"step": 2, "reward": 0.5, "reward/TravelGym": 1.0, "groups/raw_signal_frac": 1.0,
            "groups/kept_signal_frac": 1.0}]
LOG = [{"step": 1, "loss": 0.7, "learning_rate": 1e-3}, {"step": 2, "loss": 0.6},
       {"step": 2, "train_runtime": 3.0}]


def plot_files(spec: list) -> dict[str, list[str]]:
    """Plot id -> the data files it reads (an image plot is its own file)."""
    out = {}
    for entry in spec:
        if isinstance(entry, str):
            out[entry] = [entry]
        else:
            [(name, props)] = entry.items()
            out[name] = list(props["y"]) if props and "y" in props else [name]
    return out


def rows(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def test_plot_data_has_a_row_per_step_and_env(tmp_path) -> None:
    write_plot_data(tmp_path, "grpo", HISTORY, LOG)
    assert [(r["step"], r["env"], r["reward"]) for r in rows(tmp_path / "rewards.csv")] == [
        ("1", "all", "0.25"), ("1", "PersuadeGym", "0.0"), ("1", "TravelGym", "0.5"),
        ("2", "all", "0.5"), ("2", "TravelGym", "1.0")]
    assert {r["arm"] for r in rows(tmp_path / "rewards.csv")} == {"grpo"}
    assert [r["kept_signal_frac"] for r in rows(tmp_path / "groups.csv")] == ["0.5", "1.0"]
    assert [(r["step"], r["loss"]) for r in rows(tmp_path / "loss.csv")] == [("1", "0.7"),
                                                                             ("2", "0.6")]


def test_every_plot_reads_a_stage_output_and_survives_deps_write(tmp_path) -> None:
    dvc = yaml.safe_load((ROOT / "dvc.yaml").read_text())
    outs = [next(iter(o)) if isinstance(o, dict) else o
            for stage in dvc["stages"].values() for o in stage.get("outs", [])]
    files = [f for fs in plot_files(dvc["plots"]).values() for f in fs]
    assert any("train_agent" in f and f.endswith("rewards.csv") for f in files)
    for f in files:
        assert any(f == o or f.startswith(o.rstrip("/") + "/") for o in outs), f
    for entry in dvc["plots"]:
        template = (next(iter(entry.values())) or {}).get("template", "") \
            if isinstance(entry, dict) else ""
        assert not template.endswith(".json") or (ROOT / template).is_file()
    shutil.copytree(ROOT / "mimesis", tmp_path / "mimesis",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "dvc.yaml", tmp_path / "dvc.yaml")
    write(tmp_path)
    assert yaml.safe_load((tmp_path / "dvc.yaml").read_text())["plots"] == dvc["plots"]


def test_dvc_plots_show_renders_the_training_curves(tmp_path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dvc = yaml.safe_load((ROOT / "dvc.yaml").read_text())
    for name in ("dvc.yaml", "configs/dvc_plots/by_env.json"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    for name, files in plot_files(dvc["plots"]).items():
        for f in files:
            path = tmp_path / f
            path.parent.mkdir(parents=True, exist_ok=True)
            if f.endswith(".png"):
                fig = plt.figure(figsize=(2, 1))
                fig.savefig(path)
                plt.close(fig)
            elif not path.exists():
                write_plot_data(path.parent, path.parent.parent.name, HISTORY, LOG)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run([str(BIN / "dvc"), "init", "-q"], cwd=tmp_path, check=True)
    shown = subprocess.run([str(BIN / "dvc"), "plots", "show", "--json"], cwd=tmp_path,
                           capture_output=True, text=True, check=True)
    report = json.loads(shown.stdout)
    assert not report.get("errors"), report.get("errors")
    [reward] = report["data"]["training reward per env"]
    values = reward["content"]["data"]["values"]
    assert {v["env"] for v in values} == {"all", "TravelGym", "PersuadeGym"}
    assert {v["arm"] for v in values} == {"grpo", "grpo-prompted", "distill_agent"}
    assert set(report["data"]) == set(plot_files(dvc["plots"]))
