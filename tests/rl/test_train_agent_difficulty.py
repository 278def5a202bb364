"""train_agent's pre-registered difficulty step (docs/claim.md rule 1): the ladder is measured on
training scenarios only (disjoint from the GRPO stream, the SFT agent's scenarios and every
held-out scenario), its params refuse what could not be measured or trained, and the stage's
outputs are cleared as they should; an arm's reward trend (2 steps needed, resumed runs). The
end-to-end check (arms train at the chosen level, difficulty.json, reward_trend in meta.json)
is in tests/rl/test_train_agent.py."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from mimesis.params import ParamsError, build, stage_params
from mimesis.rl.difficulty import DifficultyLevel
from mimesis.rl.difficulty_run import DifficultyParams, check_sft_disjoint, level_specs
from mimesis.stages.train_agent import TrainAgentParams

_spec = importlib.util.spec_from_file_location(
    "train_agent_data", Path(__file__).with_name("test_train_agent_data.py"))
data = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(data)
REPO = Path(__file__).resolve().parents[2]

LADDER = [{"env": "TravelGym", "env_kwargs": {"n_preferences": 1}},
          {"env": "TravelGym", "env_kwargs": {"n_preferences": 2}}]


def _params(**difficulty) -> TrainAgentParams:
    """TravelGym training at 6 options, a 2-level ladder of 2 scenarios x 1 episode."""
    settings = {"ladder": LADDER, "scenarios": 2, "episodes": 1, "min_episodes": 2,
                **difficulty}
    return data.small_params(TrainAgentParams, envs=["TravelGym"], base_model="tiny-llama",
                             env_kwargs={"TravelGym": {"n_options": 6}}, max_turns=2,
                             max_new_tokens=8, max_completion_tokens=768,
                             difficulty=DifficultyParams(**settings))


def _key(spec) -> tuple:
    return spec.env, json.dumps(spec.options, sort_keys=True) if spec.options else spec.seed


def _assert_training_only(specs, p: TrainAgentParams) -> None:
    """No spec of the GRPO stream's reach, and none of the evaluation's held-out scenarios."""
    from mimesis.eval.agents.evaluate import check_disjoint, heldout_specs
    from mimesis.rollout.scenarios import scenario_specs

    stream = scenario_specs(p, 1000)  # far beyond what the run can draw
    assert not {_key(s) for s in specs} & {_key(s) for s in stream}
    heldout = heldout_specs([s.env for s in specs][:1], 1000)  # default seed_offset
    check_disjoint(heldout, specs)


def test_levels_are_measured_on_training_scenarios_disjoint_from_grpo_and_held_out():
    p = _params()
    levels = p.difficulty.levels(p.env_kwargs)
    assert [lv.label() for lv in levels] == ["TravelGym(n_options=6, n_preferences=1)",
                                             "TravelGym(n_options=6, n_preferences=2)"]
    for level in levels:
        specs = level_specs(level, p.difficulty)
        assert [s.seed for s in specs] == [250_000, 250_001]
        assert all(s.env_kwargs == level.env_kwargs for s in specs)  # the level's setting
        _assert_training_only(specs, p)
    # fixed task lists: only indices of the list's training part (never an evaluation task)
    from mimesis.envs import make
    from mimesis.envs.registry import task_indices

    fixed = level_specs(DifficultyLevel("PersuadeGym", {}),
                        DifficultyParams(scenarios=40, episodes=1, min_episodes=1))
    train = set(task_indices(len(make("PersuadeGym").tasks), "train"))
    assert {s.options["index"] for s in fixed} <= train


@pytest.mark.slow
def test_choose_level_plays_every_level_on_its_training_scenarios(tmp_path, monkeypatch):
    from mimesis.rl.difficulty_run import choose_level
    from mimesis.rollout.engine import RolloutEngine
    from mimesis.users.frozen import load_user

    p = _params()
    user = load_user(data.build_frozen_tiny(tmp_path / "freeze_user" / "simulator").parent, p)
    played: list = []
    original = RolloutEngine.run

    def record(self, specs, desc="rollout"):
        episodes = original(self, specs, desc)
        played.append((list(specs), episodes))
        return episodes

    monkeypatch.setattr(RolloutEngine, "run", record)
    selection = choose_level(None, user, p, p.difficulty, progress=False)
    levels = p.difficulty.levels(p.env_kwargs)
    assert [r.level for r in selection.levels] == levels  # one result per level, in order
    assert [(r.n_scenarios, r.n_episodes) for r in selection.levels] == [(2, 2), (2, 2)]
    assert all(0.0 <= r.success <= 1.0 for r in selection.levels)
    assert len(played) == 2
    for level, (specs, episodes) in zip(levels, played, strict=True):
        assert specs == level_specs(level, p.difficulty)
        assert len(episodes) == 2 and [e.spec for e in episodes] == specs  # 1 episode each
        _assert_training_only(specs, p)
    assert selection.chosen in (0, 1) and selection.to_dict()["levels"][0]["env_kwargs"] == {
        "n_options": 6, "n_preferences": 1}


@pytest.mark.parametrize(("difficulty", "needle"), [
    ({"ladder": [{"env": "PersuadeGym", "env_kwargs": {}}]},
     r"ladder envs \['PersuadeGym'\] are not among train_agent envs \['TravelGym'\]"),
    ({"ladder": [{"env": "TelepathyGym", "env_kwargs": {}}]},
     r"\['TelepathyGym'\]: not train environment"),
    ({"ladder": [{"env": "TravelGymm", "env_kwargs": {}}]}, r"unknown environment"),
    ({"ladder": [LADDER[0], {"env": "TravelGym", "env_kwargs": {"n_preferences": 4}}]},
     r"difficulty level 1 \(TravelGym\(n_options=6, n_preferences=4\)\): TravelGym rejects"),
    ({"ladder": [LADDER[0], {"env": "TravelGym", "env_kwargs": {"n_prefs": 2}}]},
     r"ladder\[1\] \(TravelGym\) sets \['n_prefs'\].*same keys"),
    ({"ladder": [{"env": "TravelGym", "env_kwargs": {"n_prefs": 2}}]}, r"rejects.*n_prefs"),
    ({"ladder": [LADDER[0], LADDER[0]]}, r"level 1 .*repeats"),
    ({"ladder": [{"envv": "TravelGym"}]}, r"ladder\[0\]: need \{env"),
    ({"ladder": [{"env": "TravelGym", "env_kwargs": [1]}]}, r"ladder\[0\]: need \{env"),
    ({"scenarios": 2, "episodes": 2, "min_episodes": 5}, r"fewer than min_episodes \(5\)"),
    ({"low": 0.5, "target": 0.45}, r"need 0 <= low <= target <= high <= 1"),
    ({"scenario_seed": 299_999}, r"seeds 299999..300000 must lie in \[0, 300000\).*grounding"),
    ({"scenario_seed": 2}, r"difficulty seeds 2..3 overlap the GRPO scenario stream"),
])
def test_difficulty_params_are_checked_when_built(difficulty, needle):
    values = {"envs": ["TravelGym"], "env_kwargs": {"TravelGym": {"n_options": 6}},
              "difficulty": {"ladder": LADDER, "scenarios": 2, "episodes": 1,
                             "min_episodes": 2, **difficulty}}
    with pytest.raises(ParamsError, match=needle):
        build(TrainAgentParams, values, "train_agent")


def test_an_empty_ladder_is_off_and_unchecked_against_envs():
    p = build(TrainAgentParams, {"envs": ["TravelGym"], "difficulty": {"scenarios": 1}})
    assert p.difficulty.ladder == [] and p.difficulty.levels() == []


def test_difficulty_seeds_must_not_be_the_sft_agents(tmp_path):
    meta = {"params": {"envs": ["TravelGym"], "scenarios_per_env": 16, "scenario_seed": 249_990}}
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=r"overlap the scenarios the SFT agent was trained on "
                                         r"\(249990..250005"):
        check_sft_disjoint(tmp_path, DifficultyParams())
    meta["params"]["scenario_seed"] = 200_000
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    check_sft_disjoint(tmp_path, DifficultyParams())  # the claim profile's: disjoint
    check_sft_disjoint(None, DifficultyParams())  # no start adapter: nothing to check


def test_claim_profile_measures_the_protocols_ladder():
    p = build(TrainAgentParams, stage_params("train_agent", REPO / "params.yaml", "claim"))
    assert [lv.label() for lv in p.difficulty.levels(p.env_kwargs)] == [
        f"TravelGym(n_options=6, n_preferences={k})" for k in (1, 2, 3)]  # docs/claim.md
    d = p.difficulty
    assert (d.scenarios, d.episodes, d.low, d.high, d.target) == (12, 2, 0.2, 0.7, 0.45)
    assert d.scenarios * d.episodes >= d.min_episodes
    sft = stage_params("sft_agent", REPO / "params.yaml", "claim")
    sft_seeds = range(sft["scenario_seed"], sft["scenario_seed"] + sft["scenarios_per_env"])
    assert not set(sft_seeds) & set(range(d.scenario_seed, d.scenario_seed + d.scenarios))
    default = build(TrainAgentParams, stage_params("train_agent", REPO / "params.yaml"))
    assert default.difficulty.ladder == []  # off outside the claim


def test_stale_stage_files_are_cleared_and_arms_kept(tmp_path):
    from mimesis.stages.train_agent import _clear_stale

    out = tmp_path / "train_agent"
    (out / "grpo").mkdir(parents=True)
    (out / "grpo" / "meta.json").write_text("{}")
    (out / "gone").mkdir()
    (out / "gone" / "meta.json").write_text("{}")
    for name in ("difficulty.json", "difficulty.md", "reward_trend.md"):
        (out / name).write_text("from an earlier run")
    _clear_stale(out, {"grpo"})
    assert sorted(p.name for p in out.iterdir()) == ["grpo"]  # an arm's files are its own
    assert (out / "grpo" / "meta.json").exists()


class _Ep:
    """An ``episodes.jsonl`` row as the trainer's record gives it (only what the trend reads)."""

    def __init__(self, reward: float, group: int) -> None:
        self.row = {"reward": reward, "group_id": group, "scenario_id": f"ParityGym:{group}",
                    "env": "ParityGym"}

    def model_dump(self, **_) -> dict:
        return dict(self.row)


def _trainer(steps_of_episodes: list[int], history_steps: list[int]):
    from types import SimpleNamespace

    episodes = [(s, _Ep(float((s + i) % 2), i // 2)) for s in steps_of_episodes for i in range(4)]
    return SimpleNamespace(episodes=episodes,
                           history=[{"step": s, "reward": 0.5} for s in history_steps])


def test_reward_trend_of_an_arm_needs_two_steps_and_survives_a_resume():
    from mimesis.stages.train_agent import _reward_trend

    one = _reward_trend(_trainer([1], [1]), seed=13)  # a 1-step run (smoke): no trend, no error
    assert one["reward_trend"] is None and "at least 2 steps" in one["reward_trend_reason"]
    two = _reward_trend(_trainer([1, 2], [1, 2]), seed=13)["reward_trend"]
    assert two["source"] == "episodes" and two["units"] == "groups"
    assert (two["first_steps"], two["last_steps"], two["n_first"]) == ([1], [2], 4)
    # resumed after step 2: the episodes of steps 1-2 are gone, the restored history is not
    resumed = _reward_trend(_trainer([3, 4], [1, 2, 3, 4]), seed=13)["reward_trend"]
    assert resumed["source"] == "history step means" and resumed["n_steps"] == 4


def test_reward_trend_md_says_why_an_arm_did_not_rise(tmp_path, monkeypatch):
    """Bug: a flat or falling trend reported without the run's own reasons."""
    import mlflow

    from mimesis.stages.train_agent import _reward_trend, _write_trends

    monkeypatch.setattr(mlflow, "log_text", lambda *a, **k: None)
    arm = _reward_trend(_trainer([1, 2, 3, 4], [1, 2, 3, 4]), seed=13)
    assert arm["group_signal"]["groups"] == 8  # 2 groups a step
    (tmp_path / "difficulty.json").write_text(json.dumps(
        {"enabled": True, "selection": {"in_band": False, "reason": "no level in the band"}}))
    _write_trends(tmp_path, [{"arm": "grpo", **arm}])
    text = (tmp_path / "reward_trend.md").read_text()
    assert "grpo: the training reward did not rise. Measured:" in text
    assert "groups (100%) had any reward variance" in text and "no level in the band" in text
