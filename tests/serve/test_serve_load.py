"""Short variants of benchmarks/serve_load.py (normal, oversized and slow clients at once) and
benchmarks/serve_long_history.py (time per request against history length)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH_DIR = Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH_DIR / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")
def test_mixed_load_serves_every_normal_request_without_5xx(tmp_path) -> None:
    bench = _load("serve_load")
    figures = bench.main(["--requests", "60", "--deadline-s", "4", "--timeout-s", "90",
                          "--out", str(tmp_path / "load.json")])
    assert figures["served"] == figures["normal"] == 42
    assert figures["server_errors"] == 0
    assert not any(status.startswith("5") for status in figures["statuses"])
    assert figures["refused"] == 12  # every oversized request, each with a 4xx
    assert figures["statuses"].get("408", 0) == 3  # the trickling clients, at the deadline
    assert figures["abandoned_requests"] >= 1  # the hung-up clients' work was dropped/stopped
    # Refusing is cheap: bounded by the body limit, never a tokenization or a model call.
    assert max(figures["cpu_ms_per_refusal"].values()) < 1000
    assert figures["rss_peak_mb"] < figures["rss_idle_mb"] + 400


def test_time_per_request_grows_linearly_with_the_history() -> None:
    bench = _load("serve_long_history")
    rows = bench.main(["--sizes", "200,2000", "--repeats", "2"])["rows"]
    assert [r["messages"] for r in rows] == [200, 2000]
    assert rows[1]["ratio"] < 25  # linear: ~10 at most; quadratic fitting: ~100
