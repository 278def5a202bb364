"""What an agent RL run writes and logs: reward curves per environment, the episodes, metadata."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mimesis.io import write_json, write_jsonl

# Token lists are large and only useful to the trainer; the record keeps the readable parts.
_EPISODE_TOKENS = {"prompt_ids", "completion_ids", "env_mask", "logprobs", "turn_ids"}


def reward_figure(history: list[dict[str, float]], title: str):
    """Mean episode reward per optimizer step, one line per environment plus the overall mean.

    Args:
        history: ``TurnCreditGRPOTrainer.history`` rows (``step``, ``reward``, ``reward/<env>``).
        title: Figure title (the stage name).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    keys = sorted({k for row in history for k in row if k.startswith("reward")})
    for key in keys:
        points = [(row["step"], row[key]) for row in history if key in row]
        style = {"lw": 2.0, "color": "black"} if key == "reward" else {"lw": 1.2}
        ax.plot(*zip(*points, strict=True), "o-", label=key.replace("reward/", "") if
                key != "reward" else "all envs", **style)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("mean episode reward")
    ax.set_title(f"{title}: reward per environment")
    ax.grid(alpha=0.3)
    if keys:
        ax.legend()
    fig.tight_layout()
    return fig


def write_plot_data(plots_dir: Path, arm: str, history: list[dict[str, float]],
                    log_history: list[dict[str, Any]]) -> None:
    """The training curves as CSV for ``dvc plots`` (dvc.yaml ``plots:``), one row per step:

    - ``rewards.csv``: ``step, arm, env, reward`` (mean episode reward; ``env`` = ``all`` for
      the mean over every env, plotted per env by configs/dvc_plots/by_env.json);
    - ``groups.csv``: ``step, arm, raw_signal_frac, kept_signal_frac`` (share of GRPO groups
      with reward variance before / after dynamic sampling: the learning signal);
    - ``loss.csv``: ``step, arm, loss`` (TRL's logged training loss).

    Args:
        plots_dir: Created if missing; the three files are rewritten.
        arm: The arm's name (a column, so arms share one plot).
        history: ``TurnCreditGRPOTrainer.history`` rows.
        log_history: ``trainer.state.log_history`` (TRL's logs; rows with ``loss`` are kept).
    """
    import csv

    plots_dir.mkdir(parents=True, exist_ok=True)
    tables = {
        "rewards.csv": (["step", "arm", "env", "reward"], [
            [row["step"], arm, "all" if k == "reward" else k.removeprefix("reward/"), row[k]]
            for row in history for k in sorted(row)
            if k == "reward" or (k.startswith("reward/") and k.count("/") == 1)]),
        "groups.csv": (["step", "arm", "raw_signal_frac", "kept_signal_frac"], [
            [row["step"], arm, row["groups/raw_signal_frac"], row["groups/kept_signal_frac"]]
            for row in history if "groups/raw_signal_frac" in row]),
        "loss.csv": (["step", "arm", "loss"], [[row["step"], arm, row["loss"]]
                                               for row in log_history if "loss" in row]),
    }
    for name, (header, rows) in tables.items():
        with (plots_dir / name).open("w", newline="") as f:
            csv.writer(f).writerows([header, *rows])


def episode_rows(episodes: list[tuple[int, Any]]) -> list[dict[str, Any]]:
    """One JSON row per episode: the step it trained and its record without token lists."""
    return [{"step": step, **episode.model_dump(mode="json", exclude=_EPISODE_TOKENS)}
            for step, episode in episodes]


def write_run(out_dir: Path, trainer, meta: dict[str, Any], stage: str) -> None:
    """``meta.json``, ``train_log.json``, ``plots/`` (:func:`write_plot_data`), ``episodes.jsonl``
    and the MLflow artifacts of a run, with a sample of the episodes
    (``meta["params"]["mlflow_traces"]``, spread over the steps) as MLflow traces.

    Args:
        out_dir: Stage output folder.
        trainer: The finished trainer (``history``, ``episodes``, ``state.log_history``).
        meta: The stage's metadata (written as ``meta.json`` and logged).
        stage: Stage name (plot title).
    """
    import matplotlib.pyplot as plt
    import mlflow

    write_json(out_dir / "meta.json", meta)
    write_json(out_dir / "train_log.json", {"log_history": trainer.state.log_history,
                                            "rewards": trainer.history})
    write_plot_data(out_dir / "plots", meta.get("arm", stage), trainer.history,
                    trainer.state.log_history)
    rows = episode_rows(trainer.episodes)
    write_jsonl(out_dir / "episodes.jsonl", rows)
    if mlflow.active_run() is None:
        return
    from mimesis.envs.registry import success_thresholds
    from mimesis.traces import flush, log_episode_traces, sample_evenly

    # distill_agent's meta has no user: its csd arm trains against the frozen simulator
    user = (meta.get("user") or {}).get("kind", "frozen")
    log_episode_traces(sample_evenly(rows, int(meta["params"].get("mlflow_traces", 0))),
                       stage.split("/")[0], agent=meta.get("arm", stage), user=user,
                       thresholds=success_thresholds())
    flush()
    fig = reward_figure(trainer.history, stage)
    mlflow.log_figure(fig, "rewards.png")
    plt.close(fig)
    mlflow.log_artifact(str(out_dir / "episodes.jsonl"))
    numbers = {k: v for k, v in meta.get("rewards", {}).items()}
    numbers.update({k: meta[k] for k in ("train_seconds", "steps") if meta.get(k) is not None})
    mlflow.log_metrics({f"summary/{k}": float(v) for k, v in numbers.items()})


def print_summary(stage: str, out_dir: Path, meta: dict[str, Any]) -> None:
    """Short plain-text summary on stdout."""
    rewards = meta.get("rewards", {})
    envs = sorted({k.split("/")[1] for k in rewards if k.count("/") == 2})
    per_env = ", ".join(f"{e} {rewards[f'reward/{e}/first']:.2f} -> "
                        f"{rewards[f'reward/{e}/last']:.2f}" for e in envs)
    print(f"{stage}: {meta['steps']} steps, {meta['episodes']} episodes in "
          f"{meta['train_seconds']:.0f} s; mean reward {rewards.get('reward/first', 0):.2f} -> "
          f"{rewards.get('reward/last', 0):.2f} ({per_env}); model -> {out_dir / 'model'}")
