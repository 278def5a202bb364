"""The TRL integration: ``examples/trl_grpo_one_step.py`` trains the tiny policy for one GRPO step
against the tiny frozen simulator through :func:`mimesis.integrations.trl.frozen_user_rollout`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from mimesis.integrations.trl import frozen_user_rollout, scenario_prompts
from mimesis.rollout.records import RolloutParams, ScenarioSpec
from tests.serve.test_serve_frozen import build_frozen_tiny

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "trl_grpo_one_step.py"


def test_scenario_prompts_are_specs_of_a_registered_env() -> None:
    rows = scenario_prompts("TravelGym", count=3, seed=5)["prompt"]
    assert [ScenarioSpec.from_prompt(p) for p in rows] == [
        ScenarioSpec(env="TravelGym", seed=s) for s in (5, 6, 7)]
    with pytest.raises(ValueError, match="unknown environment"):
        scenario_prompts("NoSuchGym")


@pytest.fixture(scope="module")
def sim_dir(tmp_path_factory) -> Path:
    return build_frozen_tiny(tmp_path_factory.mktemp("frozen") / "simulator")


@pytest.mark.slow
def test_rollout_masks_user_and_tool_tokens(sim_dir) -> None:
    from mimesis.models.base import load_base

    model, tok = load_base("tiny-llama")
    trainer = SimpleNamespace(
        model=model, processing_class=tok, num_generations=2, num_generations_eval=2,
        accelerator=SimpleNamespace(unwrap_model=lambda m: m),
        args=SimpleNamespace(temperature=1.0, top_p=1.0))
    rollout = frozen_user_rollout(sim_dir, RolloutParams(max_turns=2, max_new_tokens=6,
                                                         max_completion_tokens=400),
                                  max_turns=2, max_new_tokens=8)
    prompts = [p for p in scenario_prompts("TravelGym", count=2)["prompt"] for _ in range(2)]
    out = rollout(prompts, trainer)  # TRL repeats each row num_generations times
    assert all(len(v) == 4 for v in out.values())
    for ids, mask in zip(out["completion_ids"], out["env_mask"], strict=True):
        assert len(ids) == len(mask) and set(mask) <= {0, 1} and 1 in mask
    assert any(0 in mask for mask in out["env_mask"])  # injected user/tool tokens: no loss
    assert out["group_id"] == [0, 0, 1, 1]


@pytest.mark.slow
def test_example_runs_one_grpo_step_on_the_tiny_model(sim_dir, tmp_path) -> None:
    out_dir = tmp_path / "run"
    env = {**os.environ, "TRL_EXPERIMENTAL_SILENCE": "1",
           "PYTHONPATH": os.pathsep.join([str(EXAMPLE.parents[1]),
                                          os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, str(EXAMPLE), "--simulator", str(sim_dir),
                           "--output-dir", str(out_dir)], capture_output=True, text=True,
                          env=env, timeout=900, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads((out_dir / "summary.json").read_text())
    assert summary["global_step"] == 1
    assert summary["env_reward_mean"] is not None
    assert isinstance(summary["loss"], float)
