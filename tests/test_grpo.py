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
    """PITFALLS 7: more injected tokens between turns must not shift any agent token's credit."""
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
    from mimesis.rl import agent_training as rl
    from mimesis.rl.grpo import TurnCreditGRPOTrainer
    from mimesis.stages.train_user import LoraParams

    sim, sim_tok = load_base("tiny-llama")
    agent, tok = load_base("tiny-llama")
    params = data.small_params()
    trainer = rl.build_trainer(TurnCreditGRPOTrainer, agent, tok, params,
                               data.scripted_user(sim, sim_tok), tmp_path / "ckpt", [],
                               peft_config=rl.lora_config(LoraParams(dropout=0.0)))
    trainer.current_gradient_accumulation_steps = 1
    inputs = loss_inputs(len(tok))
    env = (inputs["tool_mask"] == 0).float()
    with torch.no_grad():
        base = trainer._compute_loss(trainer.model, dict(inputs))
        env_changed = trainer._compute_loss(PerturbScores(trainer.model, env), dict(inputs))
        agent_changed = trainer._compute_loss(PerturbScores(trainer.model, 1 - env), dict(inputs))
    assert torch.isclose(base, env_changed, atol=1e-6), (base, env_changed)
    assert not torch.isclose(base, agent_changed, atol=1e-4)  # the check can fail
