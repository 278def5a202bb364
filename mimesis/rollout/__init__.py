"""Episodes: an agent, a user simulator and an environment taking turns.

- :mod:`mimesis.rollout.engine` — :class:`~mimesis.rollout.engine.RolloutEngine`: G episodes per
  scenario, batched across episodes with a refilling queue; the one token-budget rule
  :func:`~mimesis.rollout.engine.enforce_token_budget`. The agent is a token sampler or a
  :class:`~mimesis.rollout.engine.TextPolicy` that sees only an
  :class:`~mimesis.rollout.engine.AgentView`.
- :mod:`mimesis.rollout.records` — what a rollout takes in (:class:`ScenarioSpec`,
  :class:`RolloutParams`) and gives back (:class:`Episode`, one record per episode).
- :mod:`mimesis.rollout.scenarios` — the seeded stream of training scenarios.

Both agent training (:mod:`mimesis.rl`) and agent evaluation (:mod:`mimesis.eval`) run episodes
through this package, so neither has to import the other.
"""
