"""Turn-credit GRPO: group-normalised advantages, the per-turn discount on a hand example, and
agent-only masking in the trained loss."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest
import torch

from mimesis.rl.grpo import group_advantages, turn_advantages

_spec = importlib.util.spec_from_file_location(
    "train_agent_data", Path(__file__).with_name("test_train_agent_data.py"))
data = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(data)


def test_group_advantages_hand_example():
    # group 0: rewards 1 and 0 -> mean 0.5, sample std sqrt(0.5); group 1: all equal -> 0
    adv = group_advantages([1.0, 0.0, 0.3, 0.3, 0.3], [0, 0, 1, 1, 1])
    expected = 0.5 / (math.sqrt(0.5) + 1e-4)
    assert adv == pytest.approx([expected, -expected, 0.0, 0.0, 0.0])
    assert group_advantages([1.0], [0]) == [0.0]  # no baseline in a group of one


def test_per_turn_discount_hand_example():
    # episode 0: 3 agent turns (turn 0 has 2 agent + 1 env token), reward 1
    # episode 1: 1 agent turn, reward 0; same group
    turn_ids = [[0, 0, 0, 1, 1, 2, 2], [0, 0]]
    adv = turn_advantages([1.0, 0.0], [0, 0], turn_ids, gamma=0.8, width=8)
    a = 0.5 / (math.sqrt(0.5) + 1e-4)
    assert adv.shape == (2, 8)
    assert adv[0].tolist() == pytest.approx([0.64 * a] * 3 + [0.8 * a] * 2 + [a] * 2 + [0.0])
    assert adv[1].tolist() == pytest.approx([-a, -a] + [0.0] * 6)


def test_gamma_one_is_trls_group_advantage():
    from trl.trainer.utils import nanstd

    rewards = torch.tensor([0.0, 1.0, 1.0, 0.5, 0.2, 0.9, 0.9, 0.1])
    grouped = rewards.view(-1, 4)
    trl = (rewards - grouped.mean(1).repeat_interleave(4)) / (
        nanstd(grouped, dim=1).repeat_interleave(4) + 1e-4)
    turn_ids = [[0, 1, 1, 2]] * 8
    adv = turn_advantages(rewards.tolist(), [0] * 4 + [1] * 4, turn_ids, gamma=1.0)
    assert torch.allclose(adv, trl[:, None].expand(8, 4), atol=1e-6)


def test_credit_is_by_turn_not_by_position():
    """More injected tokens between turns must not shift any agent token's credit
    (docs/pitfalls.md #7)."""
    short = turn_advantages([1.0, 0.0], [0, 0], [[0, 0, 1, 1], [0, 1]], gamma=0.5)
    long = turn_advantages([1.0, 0.0], [0, 0], [[0, 0, 0, 0, 0, 1, 1], [0, 0, 0, 1]], gamma=0.5)
    assert short[0, 0] == long[0, 0] and short[0, 3] == long[0, 6]
    assert short[1, 0] == long[1, 0] and short[1, 1] == long[1, 3]


def test_bad_gamma_is_refused():
    with pytest.raises(ValueError):
        turn_advantages([1.0, 0.0], [0, 0], [[0], [0]], gamma=0.0)


class PerturbScores(torch.nn.Module):
    """Wraps the policy and adds noise to the scores of chosen completion tokens — what changing
    those tokens' logits does to TRL's per-token log-probabilities."""

    def __init__(self, inner, where: torch.Tensor) -> None:
        super().__init__()
        self.inner, self.where = inner, where

    def forward(self, **kwargs):
        out = self.inner(**kwargs)
        width = self.where.shape[1]
        noise = torch.randn(self.where.shape, generator=torch.Generator().manual_seed(0)) * 3
        out.log_probs = torch.cat([out.log_probs[:, :-width],
                                   out.log_probs[:, -width:] + noise * self.where], dim=1)
        return out


def loss_inputs(vocab: int, completion: int = 8) -> dict[str, torch.Tensor]:
    """Two episodes: prompt 5 tokens, completion with env tokens (tool_mask 0) in the middle."""
    g = torch.Generator().manual_seed(1)
    tool = torch.tensor([[1, 1, 1, 0, 0, 1, 1, 1], [1, 1, 0, 0, 0, 1, 1, 1]])
    completion_mask = torch.tensor([[1] * 8, [1] * 6 + [0, 0]])
    return {
        "prompt_ids": torch.randint(3, vocab, (2, 5), generator=g),
        "prompt_mask": torch.ones(2, 5, dtype=torch.long),
        "completion_ids": torch.randint(3, vocab, (2, completion), generator=g),
        "completion_mask": completion_mask, "tool_mask": tool,
        "advantages": torch.randn(2, completion, generator=g),  # non-zero on env tokens too
        "old_per_token_logps": -4 - torch.rand(2, completion, generator=g),  # ratio != 1
        "num_items_in_batch": (completion_mask * tool).sum(),
    }


def test_env_tokens_do_not_change_the_grpo_loss(tmp_path):
    from mimesis.models.base import load_base
    from mimesis.models.lora import LoraParams
    from mimesis.rl import agent_training as rl
    from mimesis.rl.grpo import TurnCreditGRPOTrainer

    sim, sim_tok = load_base("tiny-llama")
    agent, tok = load_base("tiny-llama")
    params = data.small_params()
    trainer = rl.build_trainer(TurnCreditGRPOTrainer, agent, tok, params,
                               data.scripted_user(sim, sim_tok), tmp_path / "ckpt", [],
                               peft_config=LoraParams(dropout=0.0).peft_config())
    trainer.current_gradient_accumulation_steps = 1
    inputs = loss_inputs(len(tok))
    env = (inputs["tool_mask"] == 0).float()
    with torch.no_grad():
        base = trainer._compute_loss(trainer.model, dict(inputs))
        env_changed = trainer._compute_loss(PerturbScores(trainer.model, env), dict(inputs))
        agent_changed = trainer._compute_loss(PerturbScores(trainer.model, 1 - env), dict(inputs))
    assert torch.isclose(base, env_changed, atol=1e-6), (base, env_changed)
    assert not torch.isclose(base, agent_changed, atol=1e-4)  # the check can fail


# ----------------------------------------------------------------------------- dynamic sampling
def _fake_episode(group_id: int, reward: float, env: str = "FunctionGym", seed: int = 0):
    from mimesis.rollout.records import Episode, ScenarioSpec

    return Episode.model_construct(group_id=group_id, reward=reward, env=env, index=-1,
                                   spec=ScenarioSpec(env=env, seed=seed))


def test_flat_groups_are_replaced_by_fresh_scenarios_of_the_same_env():
    from mimesis.rl.grpo import refill_flat_groups

    first = [_fake_episode(0, 0.0, "FunctionGym"), _fake_episode(0, 0.0, "FunctionGym"),
             _fake_episode(1, 1.0, "TravelGym"), _fake_episode(1, 0.0, "TravelGym"),
             _fake_episode(2, 1.0, "TravelGym"), _fake_episode(2, 1.0, "TravelGym")]
    asked: list[str] = []
    plays: list[list] = []

    def fresh(env):
        asked.append(env)
        from mimesis.rollout.records import ScenarioSpec

        return ScenarioSpec(env=env, seed=100 + len(asked))

    def play(jobs):  # round 1: group 0 stays flat, group 2 gets signal; round 2: group 0 too
        plays.append(jobs)
        rewards = {1: {0: [0.0, 0.0], 2: [1.0, 0.0]}, 2: {0: [0.5, 0.0]}}[len(plays)]
        out, seen = [], {}
        for spec, g in jobs:
            k = seen.setdefault(g, 0)
            seen[g] += 1
            out.append(_fake_episode(g, rewards[g][k], spec.env, spec.seed))
        return out

    kept, stats = refill_flat_groups(play, first, fresh, max_rounds=3, group_size=2)
    assert asked == ["FunctionGym", "TravelGym", "FunctionGym"]
    assert stats == {"first_round": 3, "raw_signal": 1, "replayed": 3, "rounds": 2,
                     "kept_signal": 3, "played": 6}
    assert [e.group_id for e in kept] == [0, 0, 1, 1, 2, 2]
    assert [e.index for e in kept] == list(range(6))
    assert [e.reward for e in kept] == [0.5, 0.0, 1.0, 0.0, 1.0, 0.0]
    assert {e.spec.seed for e in kept if e.group_id == 0} == {103}  # the round-2 replacement


def test_resampling_stops_at_max_rounds_and_keeps_flat_groups():
    from mimesis.rl.grpo import refill_flat_groups

    first = [_fake_episode(0, 0.0), _fake_episode(0, 0.0)]
    calls = []

    def play(jobs):
        calls.append(len(jobs))
        return [_fake_episode(g, 0.0, s.env, s.seed) for s, g in jobs]

    from mimesis.rollout.records import ScenarioSpec

    kept, stats = refill_flat_groups(play, first, lambda env: ScenarioSpec(env=env, seed=7),
                                     max_rounds=2, group_size=2)
    assert calls == [2, 2] and stats["kept_signal"] == 0 and len(kept) == 2
    kept, stats = refill_flat_groups(play, first, None, max_rounds=2, group_size=2)
    assert len(calls) == 2 and stats["rounds"] == 0  # fresh=None: no resampling


def test_scenario_stream_fresh_scenarios_follow_the_dataset_and_keep_the_env():
    from mimesis.rl.agent_training import AgentRLParams
    from mimesis.rollout.scenarios import ScenarioStream, scenario_specs

    p = AgentRLParams(envs=["FunctionGym", "TravelGym"], steps=2, scenarios_per_step=2)
    stream = ScenarioStream(p)
    dataset = scenario_specs(p)
    assert [s.seed for s in dataset] == [0, 1, 2, 3]
    assert stream.fresh("TravelGym").seed == 5 and stream.fresh("TravelGym").seed == 7
    assert stream.fresh("FunctionGym").seed == 8 and stream.drawn == 9
    assert scenario_specs(p, count=stream.drawn)[8] == stream.spec(8)
    with pytest.raises(ValueError):
        stream.fresh("TurtleGym")


def _flat_first_trainer(tmp_path, enabled: bool):
    from mimesis.models.base import load_base
    from mimesis.models.lora import LoraParams
    from mimesis.rl import agent_training as rl
    from mimesis.rl.agent_training import DynamicSamplingParams
    from mimesis.rl.grpo import TurnCreditGRPOTrainer

    sim, sim_tok = load_base("tiny-llama")
    agent, tok = load_base("tiny-llama")
    params = data.small_params(envs=["FlatFirstGym"], scenarios_per_step=2, group_size=4,
                               scenario_seed=data.FLAT_BELOW - 2, max_turns=1,
                               dynamic_sampling=DynamicSamplingParams(enabled=enabled,
                                                                      max_rounds=4))
    trainer = rl.build_trainer(TurnCreditGRPOTrainer, agent, tok, params,
                               data.scripted_user(sim, sim_tok, max_turns=1), tmp_path / "ckpt",
                               [], peft_config=LoraParams(dropout=0.0).peft_config())
    rl.train(trainer, None)
    moved = sum(float(p.detach().abs().sum()) for n, p in trainer.model.named_parameters()
                if "lora_B" in n)
    return trainer, moved


@pytest.mark.slow
def test_zero_variance_groups_are_resampled_and_the_step_learns(tmp_path):
    trainer, moved = _flat_first_trainer(tmp_path, enabled=True)
    (row,) = trainer.history
    assert row["groups/first_round"] == 2 and row["groups/raw_signal"] == 0
    assert row["groups/kept_signal"] >= 1 and row["groups/replayed"] >= 2
    assert row["groups/raw_signal_frac"] == 0.0 and row["groups/kept_signal_frac"] >= 0.5
    assert row["scenarios_drawn"] >= 4  # replacements came from after the dataset's 2
    assert {"format_compliance", "mean_turns", "truncated"} <= set(row)
    trained_seeds = {e.spec.seed for _, e in trainer.episodes}
    assert min(trained_seeds) >= data.FLAT_BELOW  # the flat groups were replaced
    assert moved > 0  # a group with signal gave non-zero advantages: LoRA B left zero


@pytest.mark.slow
def test_without_dynamic_sampling_flat_groups_teach_nothing(tmp_path):
    trainer, moved = _flat_first_trainer(tmp_path, enabled=False)
    (row,) = trainer.history
    assert row["groups/raw_signal"] == 0 and row["groups/kept_signal"] == 0
    assert moved == 0.0  # all advantages 0: the adapter never leaves its zero init
