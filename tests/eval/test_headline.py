"""``dvc metrics show`` prints a table a person can read: the headline figures, in 120 columns."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mimesis.eval.headline import agents_headline, user_headline, write_headline

ROOT = Path(__file__).resolve().parents[2]
DVC = Path(sys.executable).parent / "dvc"

# the shape of the two stages' metrics.json, with figures as wide as a real run's
USER_METRICS = {
    "trained": {"c2st_all": {"distance": 20.833333333333332, "ci_low": 8.6},
                "scored_rate": 0.9682539682539683, "termination_f1": 0.23529411764705882,
                "guards": {"resampled_rate": 0.23809523809523808, "resampled_junk": 0.05}},
    "comparisons_all": {"trained-vs-baseline": {"difference": -18.541666666666668}},
    "baseline": {"c2st_all": {"distance": 39.4}},
}
AGENT_METRICS = {"fact_reveal": {"frozen": {"heldout": {"mean": {
    "mean": 0.6694444444444444, "false_end": {"mean": 0.0, "n": 84}}}}},
    "agents": {"by_agent": {"grpo": {"frozen": {"ALL": {"success_rate": 0.1}}}}}}


def test_the_headlines_hold_the_figures_a_reader_compares_first():
    assert user_headline(USER_METRICS) == {"turing": 20.833, "vs_prompt": -18.542, "scored": 0.968,
                                           "term_f1": 0.235, "resampled": 0.238}
    assert agents_headline(AGENT_METRICS) == {"reveal": 0.669, "false_end": 0.0}


def test_a_missing_or_non_finite_figure_is_left_out_not_written_as_zero():
    metrics = {"trained": {"c2st_all": {"distance": math.nan}, "scored_rate": 1.0}}
    assert user_headline(metrics) == {"scored": 1.0}
    assert user_headline({"enabled": False}) == {}
    assert agents_headline({"agents": {}}) == {}


@pytest.mark.skipif(not DVC.exists() or shutil.which("git") is None, reason="needs dvc and git")
def test_dvc_metrics_show_fits_120_columns(tmp_path):
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    registered = [next(iter(m)) if isinstance(m, dict) else m
                  for s in stages.values() for m in s.get("metrics") or []]
    assert registered, "dvc.yaml registers no metrics"
    for path in registered:  # every registered file is a headline the stage writes
        assert Path(path).name == "headline.json", path
        figures = user_headline(USER_METRICS) if "evaluate_user" in path \
            else agents_headline(AGENT_METRICS)
        assert figures, path
        write_headline(tmp_path / Path(path).parent, figures)
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"metrics": registered}))
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run([str(DVC), "init", "-q"], cwd=tmp_path, check=True)
    shown = subprocess.run([str(DVC), "metrics", "show"], cwd=tmp_path, capture_output=True,
                           text=True, check=True).stdout
    lines = [line for line in shown.splitlines() if line.strip()]
    assert len(lines) == 1 + len(registered), shown
    assert max(len(line) for line in lines) <= 120, shown
    assert "20.833" in shown and "0.669" in shown
    assert json.loads((tmp_path / registered[0]).read_text())
