"""benchmarks/tracing.py on the tiny random Llama: traced and untraced passes play the same
episodes, the traced ones log a trace per conversation turn, and the figures are finite (no
timing assertions: the tiny model's episodes take milliseconds, so its ratio means nothing)."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

BENCH_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "tracing.py"


def test_quick_run_traces_every_turn_of_the_same_episodes(tmp_path, empty_mlflow_store) -> None:
    spec = importlib.util.spec_from_file_location("bench_tracing", BENCH_PATH)
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench  # dataclasses look their module up there
    try:
        spec.loader.exec_module(bench)
        out = bench.main(["--model", "tiny-llama", "--quick", "--repeats", "2",
                          "--tracking-uri", empty_mlflow_store(tmp_path / "mlflow.db"),
                          "--out", str(tmp_path / "t.json")])
    finally:
        del sys.modules[spec.name]
    passes = out["passes"]
    assert [p["traced"] for p in passes] == [True, False, False, True]
    assert {p["episodes"] for p in passes} == {4}
    traced = [p for p in passes if p["traced"]]
    assert all(p["traces"] == traced[0]["traces"] >= 4 for p in traced)
    assert all(p["traces"] == 0 and p["tracing_seconds"] == 0 for p in passes if not p["traced"])
    figures = out["figures"]
    assert all(math.isfinite(v) and v > 0 for v in figures.values())
    assert json.loads((tmp_path / "t.json").read_text())["figures"] == figures
