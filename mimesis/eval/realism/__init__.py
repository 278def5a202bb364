"""Simulator realism: how close a user simulator's turns are to held-out real users' (docs/metrics.md).

- :mod:`~mimesis.eval.realism.protocol` — what every simulator is asked to write (the evaluation
  positions of real conversations) and :mod:`~mimesis.eval.realism.generate`, which lets a
  simulator write them.
- :mod:`~mimesis.eval.realism.metrics` — the realism table: every user-side metric for one
  simulator against the real turns; built on :mod:`~mimesis.eval.realism.c2st` (Turing
  distance), :mod:`~mimesis.eval.realism.divergence` (behaviour frequencies),
  :mod:`~mimesis.eval.realism.style`, :mod:`~mimesis.eval.realism.goals` and
  :mod:`~mimesis.eval.realism.userlm` (UserLM's metrics).
- :mod:`~mimesis.eval.realism.run` — :class:`~mimesis.eval.realism.run.RealismParams`, scoring and
  the outputs (:mod:`~mimesis.eval.realism.report`: table and plots), shared by the
  ``evaluate_user`` stage and :mod:`~mimesis.eval.realism.evaluate_simulator` (``mimesis
  evaluate-simulator``: any simulator, local or behind an endpoint).
"""
