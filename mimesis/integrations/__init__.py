"""The frozen user simulator inside frameworks our users already run.

* :mod:`mimesis.integrations.tau2` — a tau2-bench user (``BaseUser`` subclass, registered as
  ``mimesis_user``) backed by a frozen simulator folder or a ``mimesis serve`` URL.
* :mod:`mimesis.integrations.trl` — a TRL ``GRPOTrainer`` ``rollout_func`` that plays one of our
  environments with the frozen simulator as the user.
* :mod:`mimesis.integrations.mlflow_simulator` — the simulated user of MLflow's
  ``ConversationSimulator`` (``mlflow.genai.simulators``), served by ``mimesis serve``.

Each module imports its framework (``tau2``, ``trl``, ``mlflow.genai``) itself; nothing here is
imported by the pipeline stages, and importing this package imports none of them.
"""
