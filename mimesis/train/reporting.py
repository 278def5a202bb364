"""What a training run reports: MLflow metric curves, a loss plot, a rendered training example."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

from transformers import TrainerCallback

IGNORE_INDEX = -100


class MlflowMetricsCallback(TrainerCallback):
    """Log every numeric value of the Trainer's logs to the active MLflow run, at the global step.

    Used instead of transformers' own ``MLflowCallback`` (``report_to="none"``), which would open
    or end runs itself; the stage already holds its run (``mimesis.tracking.stage_run``).
    Metric names keep the Trainer's keys (``loss``, ``eval_loss``, ``learning_rate``, ...).
    """

    def __init__(self) -> None:
        self._started: tuple[float, float] | None = None

    def on_step_begin(self, args, state, control, **kwargs):
        self._started = (time.perf_counter(), time.process_time())

    def on_step_end(self, args, state, control, **kwargs):
        """Log wall and process-CPU seconds of the step (CPU time is less skewed by other
        processes sharing the machine)."""
        import mlflow

        if self._started is None or mlflow.active_run() is None:
            return
        wall, cpu = self._started
        mlflow.log_metrics({"step_seconds": time.perf_counter() - wall,
                            "step_cpu_seconds": time.process_time() - cpu},
                           step=state.global_step)

    def on_log(self, args, state, control, logs=None, **kwargs):
        import mlflow

        if not logs or mlflow.active_run() is None:
            return
        values = {key.replace("/", "_"): float(value) for key, value in logs.items()
                  if isinstance(value, int | float) and not isinstance(value, bool)
                  and math.isfinite(float(value))}
        if values:
            mlflow.log_metrics(values, step=state.global_step)


def loss_figure(log_history: Sequence[dict]):
    """Matplotlib figure of training loss (per logged step) and eval loss (points).

    Args:
        log_history: ``Trainer.state.log_history``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    train = [(h["step"], h["loss"]) for h in log_history if "loss" in h]
    evals = [(h["step"], h["eval_loss"]) for h in log_history if "eval_loss" in h]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    if train:
        ax.plot(*zip(*train, strict=True), label="train loss", lw=1.2)
    if evals:
        ax.plot(*zip(*evals, strict=True), "o--", label="eval loss")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("mean token NLL (nats), user turns only")
    ax.set_title("train_user: simulator SFT")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    return fig


def render_mask(tokenizer, input_ids: Sequence[int], labels: Sequence[int]) -> str:
    """Text of one training sequence with its loss mask made visible.

    Trained tokens (``labels != -100``) are wrapped in ``⟦…⟧``; everything outside is context
    only. Reading the result shows at a glance that system and agent text is never trained.
    """
    parts: list[str] = []
    inside = False
    for token_id, label in zip(input_ids, labels, strict=True):
        trained = label != IGNORE_INDEX
        if trained != inside:
            parts.append("⟦" if trained else "⟧")
            inside = trained
        parts.append(tokenizer.decode([token_id]))
    if inside:
        parts.append("⟧")
    n_trained = sum(1 for label in labels if label != IGNORE_INDEX)
    header = (f"# one training sequence: {len(input_ids)} tokens, {n_trained} in the loss "
              "(inside ⟦ ⟧)\n\n")
    return header + "".join(parts)
