"""benchmarks/rollout.py on the tiny random Llama: every arm is played and compared, and the HF
``generate`` baseline samples what the engine's sampler would (no timing assertions)."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest

from mimesis.models.base import load_base
from mimesis.models.engine.sampling import SamplingParams, TokenSampler

ROLLOUT_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "rollout.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_rollout", ROLLOUT_PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def test_quick_run_reports_every_arm_with_finite_ratios(bench, tmp_path) -> None:
    out_path = tmp_path / "bench.json"
    figures = bench.main(["--model", "tiny-llama", "--quick", "--episodes", "2", "--repeats", "2",
                          "--out", str(out_path)])
    assert json.loads(out_path.read_text())["arms"].keys() == set(bench.ARMS)
    arms = list(bench.ARMS)
    assert [r["name"] for r in figures["runs"]] == arms + arms[::-1]  # ABBA across all arms
    for arm, f in figures["arms"].items():
        assert all(math.isfinite(f[k]) and f[k] > 0 for k in
                   ("tokens_per_s", "vs_hf", "vs_sequential", "cpu_vs_hf", "cpu_vs_sequential"))
        assert f"| {arm} |" in figures["markdown"]
    assert figures["arms"]["hf-generate"]["vs_hf"] == pytest.approx(1.0)
    assert figures["arms"]["sequential"]["vs_sequential"] == pytest.approx(1.0)
    assert math.isfinite(figures["fast_linears_gain"])
    batches = {r["name"]: r["mean_agent_batch"] for r in figures["runs"]}
    assert batches["sequential"] == 1 and batches["hf-generate"] == batches["engine"] == 2


def test_hf_generate_arm_samples_what_the_engine_sampler_does(bench) -> None:
    model, tok = load_base("tiny-llama")
    params = SamplingParams(temperature=0, max_new_tokens=6, cache_entries=0)
    prompts = [tok(t, add_special_tokens=False)["input_ids"]
               for t in ("hello there, how are you", "a b", "the quick brown fox jumps")]
    limits = [6, 3, 5]
    hf = bench.HFGenerate(model, tok, params)(prompts, limits)  # left-padded, one call
    ours = TokenSampler(model, tok, params)(prompts, limits)
    assert [s.ids for s in hf] == [s.ids for s in ours]
    for a, b in zip(hf, ours, strict=True):
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)
