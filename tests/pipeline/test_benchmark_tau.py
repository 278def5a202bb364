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
        # retail alone: its database loads in a third of airline's time
        figures = bench.main(["--tasks", "1", "--repeats", "1", "--domains", "retail",
                              "--out", str(tmp_path / "t.json")])
    finally:
        del sys.modules[spec.name]
    assert json.loads((tmp_path / "t.json").read_text())["kinds"].keys() == set(bench.KINDS)
    assert [t.split("-")[0] for t in figures["tasks"]] == ["retail"]
    for kind, row in figures["kinds"].items():
        assert row["episodes"] == 1 and math.isfinite(row["speedup"]) and row["speedup"] > 0
        assert f"| {kind} | 1 |" in figures["markdown"]
