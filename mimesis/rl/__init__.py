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

import importlib

# Names are imported on first use (PEP 562): importing one submodule, e.g. the sampler that
# evaluate_user shares with RL, must not load (and make the stage depend on) the rollout engine.
_EXPORTS = {
    "Episode": "records", "RolloutParams": "records", "ScenarioSpec": "records",
    "TurnRecord": "records", "AgentView": "rollout", "RolloutEngine": "rollout",
    "RolloutStats": "rollout", "TextPolicy": "rollout", "ViewTurn": "rollout",
    "enforce_token_budget": "rollout", "policy_turn_ids": "rollout", "Sample": "sampling",
    "SamplingParams": "sampling", "TokenSampler": "sampling", "TemplateDriftError": "tokens",
    "Transcript": "tokens", "env_reward": "trl_rollout", "scenario_dataset": "trl_rollout",
    "to_trl": "trl_rollout", "RolloutRecord": "records",  # the name for Episode
}


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'mimesis.rl' has no attribute {name!r}")
    module = importlib.import_module(f"mimesis.rl.{_EXPORTS[name]}")
    return getattr(module, "Episode" if name == "RolloutRecord" else name)


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
