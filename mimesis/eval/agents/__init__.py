"""Agent evaluation: success and reward of each agent arm on held-out scenarios, under the
training simulator and users it never met (docs/agents.md).

- :mod:`~mimesis.eval.agents.evaluate` — play every agent against every user on the same
  scenarios and seeds; :mod:`~mimesis.eval.agents.arms` — the arms compared and the checks that
  make them comparable; :mod:`~mimesis.eval.agents.run` — the ``evaluate_agents`` stage's run.
- :mod:`~mimesis.eval.agents.stats` (success, bootstrap CIs), :mod:`~mimesis.eval.agents.pairs`
  (paired differences), :mod:`~mimesis.eval.agents.elicitation` (does the agent ask before it
  answers), :mod:`~mimesis.eval.agents.fact_reveal` (does each user state its hidden facts when
  asked; its rates and report: :mod:`~mimesis.eval.agents.fact_report`),
  :mod:`~mimesis.eval.agents.reward_trend` (did the training reward rise).
- :mod:`~mimesis.eval.agents.tables` and :mod:`~mimesis.eval.agents.claim` — the report and the
  claim table.
"""
