"""Reinforcement learning of agents against the user simulator: GRPO and Coached On-Policy
Self-Distillation (CSD) over the episodes of :mod:`mimesis.rollout`.

- :mod:`mimesis.rl.grpo` — the multi-turn GRPO loss and TRL's ``rollout_func``
  (:func:`~mimesis.rl.grpo.make_rollout_func`; it needs TRL).
- :mod:`mimesis.rl.trl_rollout` — the ``rollout_func`` output for TRL's ``GRPOTrainer``
  (:func:`~mimesis.rl.trl_rollout.to_trl`, :func:`~mimesis.rl.trl_rollout.env_reward`,
  :func:`~mimesis.rl.trl_rollout.scenario_dataset`).
- :mod:`mimesis.rl.csd` and :mod:`mimesis.rl.coach` — CSD: the coach's note and the
  with-note teacher / without-note student loss.
- :mod:`mimesis.rl.agent_training` — what ``train_agent`` and ``distill_agent`` share: params,
  TRL config, the trainer, the starting policy, resumable training.
- :mod:`mimesis.rl.experts` and :mod:`mimesis.rl.expert_sft` — scripted experts whose
  successful episodes make the ``sft_agent`` warm-up set.
- :mod:`mimesis.rl.difficulty` — picking each env's difficulty level for a useful reward signal.

Layering: ``rl`` builds on ``rollout``, ``users``, ``models`` and ``train``; it never imports
``eval`` (docs/architecture.md).
"""
