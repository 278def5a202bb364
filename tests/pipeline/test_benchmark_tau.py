"""benchmarks/tau_episode.py: both arms play every episode kind with equal rewards (no timing
assertions)."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

BENCH_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "tau_episode.py"


def test_quick_run_scores_alike_and_reports_every_kind(tmp_path) -> None:
    spec = importlib.util.spec_from_file_location("bench_tau_episode", BENCH_PATH)
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench
    try:
        spec.loader.exec_module(bench)
        figures = bench.main(["--tasks", "1", "--repeats", "1", "--out", str(tmp_path / "t.json")])
    finally:
        del sys.modules[spec.name]
    assert json.loads((tmp_path / "t.json").read_text())["kinds"].keys() == set(bench.KINDS)
    assert len(figures["tasks"]) == 2  # one airline, one retail
    for kind, row in figures["kinds"].items():
        assert row["episodes"] == 2 and math.isfinite(row["speedup"]) and row["speedup"] > 0
        assert f"| {kind} | 2 |" in figures["markdown"]
