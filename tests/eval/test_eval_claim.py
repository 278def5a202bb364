"""The claim report: the unseen-user mean keeps the pairing, success has its own MDE, the
evaluation plays the difficulty level train_agent chose, arms trained at another setting are
refused, and the claim table shows what docs/claim.md promises."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from mimesis.eval.agents.arms import check_arms, with_trained_difficulty
from mimesis.eval.agents.claim import claim_markdown, claim_metrics
from mimesis.eval.agents.pairs import UNSEEN_MEAN, paired_differences, unseen_mean_rows
from mimesis.eval.agents.run import AgentComparisonParams


def _row(agent: str, user: str, scenario: int, reward: float, episode: int = 0) -> dict:
    return {"agent": agent, "user": user, "env": "TravelGym", "scenario": f"s{scenario}",
            "episode": episode, "reward": reward, "success": float(reward >= 0.5)}


def _outcomes() -> list[dict]:
    """Agent a beats b by 1.0 under user p on every scenario, by 0.0 under user q."""
    rows = []
    for s in range(6):
        rows += [_row("a", "p", s, 1.0), _row("b", "p", s, 0.0),
                 _row("a", "q", s, float(s % 2)), _row("b", "q", s, float(s % 2))]
    return rows


def test_unseen_mean_averages_users_per_scenario_and_keeps_the_pairing():
    mean = unseen_mean_rows(_outcomes(), ["p", "q"])
    assert {r["user"] for r in mean} == {UNSEEN_MEAN} and len(mean) == 12
    d = next(r for r in paired_differences(mean, [["a", "b"]], n_bootstrap=200)
             if r["env"] == "ALL")
    # (1.0 under p + 0.0 under q) / 2 on every scenario: no spread, so the CI is a point
    assert d["success_rate"] == pytest.approx(0.5)
    assert d["success_rate_ci_low"] == pytest.approx(0.5) and d["success_rate_verdict"] == "real"
    assert d["n_scenarios"] == 6


def test_unseen_mean_drops_keys_a_user_did_not_play_and_refuses_too_few_users():
    rows = [r for r in _outcomes() if not (r["user"] == "q" and r["scenario"] == "s0")]
    assert {r["scenario"] for r in unseen_mean_rows(rows, ["p", "q"])} == {
        f"s{i}" for i in range(1, 6)}
    with pytest.raises(ValueError, match="at least 2 users"):
        unseen_mean_rows(rows, ["p"])
    with pytest.raises(ValueError, match=r"no outcome rows for users \['z'\]"):
        unseen_mean_rows(rows, ["p", "z"])


def test_success_has_its_own_detectable_effect():
    # rewards differ by the same 0.1 on every scenario (no spread: reward MDE 0), but success
    # flips on half the scenarios: the success MDE must come from the success differences
    rows = []
    for s in range(8):
        rows += [{**_row("a", "p", s, 0.0), "reward": 0.5, "success": float(s % 2)},
                 {**_row("b", "p", s, 0.0), "reward": 0.4, "success": 0.0}]
    d = next(r for r in paired_differences(rows, [["a", "b"]], n_bootstrap=100)
             if r["env"] == "ALL")
    assert d["mde"] == pytest.approx(0.0, abs=1e-9)
    assert d["success_mde"] > 0.3


def _params(**kw) -> AgentComparisonParams:
    return AgentComparisonParams(envs=("TravelGym",), n_scenarios=2, max_new_tokens=48,
                                 n_bootstrap=50, base=False, csd=False,
                                 comparisons=[["grpo", "grpo-prompted"], ["grpo", "sft"]],
                                 env_kwargs={"TravelGym": {"n_options": 6}}, **kw)


def test_evaluation_plays_the_level_train_agent_selected(tmp_path):
    p = _params()
    assert with_trained_difficulty(p, tmp_path) is p  # no file: as configured
    (tmp_path / "difficulty.json").write_text('{"enabled": false}')
    assert with_trained_difficulty(p, tmp_path) is p
    (tmp_path / "difficulty.json").write_text(json.dumps({
        "enabled": True, "env": "TravelGym",
        "env_kwargs": {"n_options": 6, "n_preferences": 1}, "selection": {}}))
    chosen = with_trained_difficulty(p, tmp_path)
    assert chosen.env_kwargs["TravelGym"] == {"n_options": 6, "n_preferences": 1}
    assert chosen.n_scenarios == p.n_scenarios
    (tmp_path / "difficulty.json").write_text('{"enabled": true}')
    with pytest.raises(ValueError, match="not a difficulty selection"):
        with_trained_difficulty(p, tmp_path)


def _arm(folder: Path, env_kwargs: dict) -> Path:
    (folder / "model").mkdir(parents=True)
    params = {"envs": ["TravelGym"], "env_kwargs": env_kwargs, "steps": 1,
              "scenarios_per_step": 2, "scenario_seed": 0, "max_new_tokens": 48}
    (folder / "meta.json").write_text(json.dumps({"stage": "train_agent",
                                                  "base_model": "tiny-llama", "params": params}))
    return folder


def test_arms_trained_at_another_env_setting_are_refused(tmp_path):
    trained = {"TravelGym": {"n_options": 6, "n_preferences": 1}}
    sources = {"sft": _arm(tmp_path / "sft", trained),
               "grpo-prompted": _arm(tmp_path / "gp", trained),
               "grpo": _arm(tmp_path / "g", trained)}
    with pytest.raises(ValueError, match="other env settings.*n_preferences"):
        check_arms(sources, _params())
    check_arms(sources, _params().__class__(**{**_params().__dict__, "env_kwargs": trained}))


def test_claim_table_shows_users_their_mean_mdes_mechanism_and_trends():
    outcomes = _outcomes()
    diffs = paired_differences(outcomes, [["a", "b"]], n_bootstrap=100)
    diffs += paired_differences(unseen_mean_rows(outcomes, ["p", "q"]), [["a", "b"]],
                                n_bootstrap=100)
    nan = math.nan
    elicitation = [{"agent": "a", "user": "p", "env": "ALL", "n": 6, "n_scenarios": 6,
                    "ask_rate": 0.5, "ask_rate_ci_low": 0.2, "ask_rate_ci_high": 0.8,
                    **{f"{m}{s}": nan for m in ("answer_rate", "questions", "turns",
                                                "facts_elicited", "elicited_fraction",
                                                "asked_only_fraction")
                       for s in ("", "_ci_low", "_ci_high")}}]
    trend = {"n_steps": 8, "mean_first": 0.1, "mean_last": 0.3, "n_first": 24, "n_last": 24,
             "diff": 0.2, "ci_low": 0.05, "ci_high": 0.35, "verdict": "rose"}
    md = claim_markdown(diffs, elicitation, {"a": trend, "b": None}, ["p", "q"])
    lines = md.splitlines()
    mean_line = next(line for line in lines if f"**{UNSEEN_MEAN}** (p, q)" in line)
    assert "+0.500" in mean_line and "real" in mean_line
    rows = [line for line in lines if line.startswith("| a − b |") and "| user |" not in line]
    assert [line.split(" | ")[1] for line in rows] == ["p", "q", f"**{UNSEEN_MEAN}** (p, q)"]
    assert "0.50 [0.20, 0.80]" in md  # elicitation with its CI
    assert "[+0.050, +0.350] | rose" in md and "No trend for b" in md
    metrics = claim_metrics(elicitation, {"a": trend, "b": None})
    assert metrics["elicitation"]["a"]["p"] == {"ask_rate": 0.5}  # NaN left out
    assert metrics["reward_trend"] == {"a": {"diff": 0.2, "ci_low": 0.05, "ci_high": 0.35}}


def _diff(mde: float, success_mde: float, worst: float) -> dict:
    return {"env": "ALL", "n_scenarios": 8, "n": 8, "mde": mde, "success_mde": success_mde,
            "mde_worst": worst}


def test_detectability_note_says_when_the_spread_gives_no_mde():
    from mimesis.eval.agents.tables import detectability_note

    note = detectability_note([_diff(0.0, 0.0, 1.31)], "smoke")
    assert note.startswith("**Smoke test of the machinery")
    assert "n = 8 scenarios" in note and "0.00–0.00" not in note
    assert "not estimable from this run" in note and "beyond the whole [0, 1] reward range" in note
    note = detectability_note([_diff(0.12, 0.2, 0.9), _diff(0.3, 0.4, 0.9)], "claim")
    assert note.startswith("**Detectable effects:**")
    assert "0.12–0.30 from the spread" in note and "0.20–0.40 from the spread" in note
    assert "beyond the whole" not in note
