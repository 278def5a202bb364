"""The evaluate_user stage end to end with the tiny random model: three rows, outputs, MLflow."""

from __future__ import annotations

import json
import random

import pytest

from mimesis.io import read_jsonl, write_json, write_jsonl
from mimesis.schemas import LabeledConversation, Scenario, Turn, TurnLabel
from mimesis.stages.evaluate_user import EvaluateUserParams, run

WORDS = ["hey", "need", "help", "fix", "my", "code", "why", "not", "working", "thanks", "ok", "so", "what", "about", "the", "list"]


def _conversation(i: int, rng: random.Random) -> LabeledConversation:
    turns, labels = [], []
    for k in range(rng.randint(2, 4)):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 10)))
        turns.append(Turn(role="user", text=text + rng.choice(["", "?"])))
        labels.append(TurnLabel(turn_index=2 * k, behaviors=["B9"] if k == 1 else [],
                                reasoning="", reasoning_annotator="none"))
        turns.append(Turn(role="assistant", text=f"Here is step {k}. " * rng.randint(2, 20)))
    return LabeledConversation(id=f"conv{i:02d}", turns=turns, labels=labels, ended=i % 4 != 0,
                               end_reasoning="", end_reasoning_annotator="none",
                               scenario=Scenario(goal=f"fix a python list bug number {i}",
                                                 annotator="test"))


@pytest.fixture(scope="module")
def frozen_dir(tmp_path_factory):
    from mimesis.models.base import load_base
    from mimesis.simulator.frozen import hash_files

    out = tmp_path_factory.mktemp("freeze_user")
    model, tokenizer = load_base("tiny-llama")
    model.save_pretrained(out / "simulator")
    tokenizer.save_pretrained(out / "simulator")
    write_json(out / "simulator" / "meta.json",
               {"base_model": "tiny-llama", "files": hash_files(out / "simulator")})
    return out


@pytest.mark.slow
def test_evaluate_user_stage_writes_three_rows_and_logs_to_mlflow(tmp_path, frozen_dir):
    import mlflow

    rng = random.Random(0)
    label_dir, out_dir = tmp_path / "label", tmp_path / "evaluate_user"
    write_jsonl(label_dir / "test.jsonl", [_conversation(i, rng) for i in range(10)])
    params = EvaluateUserParams(max_conversations=8, next_positions=2, max_new_tokens=8,
                                batch_size=16, min_support=2, c2st_min_support=3, c2st_folds=2,
                                c2st_permutations=20, n_bootstrap=200, max_turn_chars=64,
                                seed=0, profile="smoke")
    assert run(frozen_dir, label_dir, out_dir, params) == out_dir
    # the agents are evaluate_agents' (tests/eval/test_fact_reveal.py, tests/pipeline/test_flow_integration.py)
    assert not (out_dir / "agents.md").exists()

    metrics = json.loads((out_dir / "metrics.json").read_text())
    assert {"trained", "baseline", "real", "slices", "counts"} <= set(metrics)
    counts = metrics["counts"]
    assert counts["evaluated_conversations"] == 8 and counts["not_sampled"] == 2
    assert counts["real_end_positions"] > 0  # the final position is always asked
    for row in ("trained", "baseline"):
        m = metrics[row]
        assert 0 <= m["termination_f1"] <= 1 and m["termination"]["positives"] > 0
        assert m["termination"]["n"] == counts["next_positions"]
    assert metrics["real"]["termination_f1"] == 1.0
    for row in ("trained", "baseline", "real"):  # honest statistics, goal, openings
        m = metrics[row]
        assert {"turn_loss_rate", "opening", "goal", "n_conversations"} <= set(m)
        if "c2st" in m:
            assert 0 < m["c2st"]["p_value"] <= 1 and "ci_high" in m["c2st"]
        assert row == "real" or 0 <= m["reasoning_rate"] <= 1
    assert "style" in metrics["real"] and "c2st" in metrics["real"]
    assert metrics["slices"]["B9"]["support"]["turns"] > 0

    rows = list(read_jsonl(out_dir / "generations.jsonl"))
    assert len(rows) == 2 * counts["positions"]
    assert {r["simulator"] for r in rows} == {"trained", "baseline"}
    assert all("<think>" not in r["utterance"] for r in rows)
    assert "real vs real" in (out_dir / "table.md").read_text()
    for name in ("lengths.png", "behaviors.png"):
        assert (out_dir / "plots" / name).stat().st_size > 1000

    runs = mlflow.search_runs(experiment_names=["mimesis"], filter_string="run_name = 'evaluate_user'")
    assert len(runs) >= 1
    logged = runs.iloc[0]
    assert logged["metrics.real.termination_f1"] == 1.0
    assert "metrics.trained.termination_f1" in runs.columns


def test_disabled_evaluate_user_writes_its_declared_outputs_and_loads_nothing(tmp_path):
    # a profile that only trains agents (claim) skips realism: the stage must still leave
    # every output dvc.yaml declares, say so, and never touch the (here missing) inputs
    out_dir = tmp_path / "evaluate_user"
    params = EvaluateUserParams(enabled=False, profile="claim")
    assert run(tmp_path / "no_freeze_user", tmp_path / "no_label", out_dir, params) == out_dir
    metrics = json.loads((out_dir / "metrics.json").read_text())
    assert metrics["enabled"] is False and metrics["params"]["profile"] == "claim"
    assert "not scored" in (out_dir / "table.md").read_text()
    assert (out_dir / "generations.jsonl").read_text() == "" and (out_dir / "plots").is_dir()
