"""Reinforcement learning of agents against the user simulator.

- :mod:`mimesis.rl.rollout` — :class:`RolloutEngine`: G episodes per scenario, agent ↔ user
  simulator ↔ environment, batched across episodes with a refilling queue; the one token-budget
  rule :func:`enforce_token_budget`.
  The agent is a token sampler or a :class:`~mimesis.rl.rollout.TextPolicy` that sees only an
  :class:`~mimesis.rl.rollout.AgentView` (e.g. the scripted experts of
  :mod:`mimesis.rl.experts`, whose successful episodes :mod:`mimesis.rl.expert_sft` turns into
  the ``sft_agent`` warm-up set).
- :mod:`mimesis.rl.tokens` — message-level token assembly with the chat template (env mask,
  log-probs, turn ids; :class:`TemplateDriftError` for templates that rewrite history).
- :mod:`mimesis.rl.sampling` — :class:`TokenSampler`: batched sampling with log-probs and
  KV-cache reuse across turns and shared prefixes (:mod:`mimesis.rl.prefix_cache`).
- :mod:`mimesis.rl.records` — :class:`ScenarioSpec`, :class:`RolloutParams`, :class:`Episode`.
- :mod:`mimesis.rl.trl_rollout` — the ``rollout_func`` output for TRL's ``GRPOTrainer``
  (:func:`to_trl`, :func:`env_reward`, :func:`scenario_dataset`); the factory itself is
  :func:`mimesis.rl.grpo.make_rollout_func` (it needs TRL, which this package does not import).
"""

from mimesis.rl.records import Episode, RolloutParams, ScenarioSpec, TurnRecord
from mimesis.rl.rollout import (
    AgentView,
    RolloutEngine,
    RolloutStats,
    TextPolicy,
    ViewTurn,
    enforce_token_budget,
    policy_turn_ids,
)
from mimesis.rl.sampling import Sample, SamplingParams, TokenSampler
from mimesis.rl.tokens import TemplateDriftError, Transcript
from mimesis.rl.trl_rollout import env_reward, scenario_dataset, to_trl

RolloutRecord = Episode  # the name for the per-episode record

__all__ = [
    "AgentView",
    "Episode",
    "RolloutEngine",
    "RolloutParams",
    "RolloutRecord",
    "RolloutStats",
    "Sample",
    "SamplingParams",
    "ScenarioSpec",
    "TemplateDriftError",
    "TextPolicy",
    "TokenSampler",
    "Transcript",
    "TurnRecord",
    "ViewTurn",
    "enforce_token_budget",
    "env_reward",
    "policy_turn_ids",
    "scenario_dataset",
    "to_trl",
]
