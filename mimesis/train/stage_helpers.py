"""The parts of the ``train_user`` recipe that are not the recipe: data loading, summaries,
MLflow reports. Kept here so ``mimesis.stages.train_user.run`` reads top to bottom."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from mimesis.io import read_jsonl
from mimesis.schemas import LabeledConversation, Reject
from mimesis.train.grounding import build_grounding_rows
from mimesis.train.reporting import MlflowMetricsCallback, loss_figure, render_mask
from mimesis.train.sft import count_parameters
from mimesis.train.sft_data import build_rows

__all__ = ["OUTPUTS", "MlflowMetricsCallback", "SplitData", "load_splits", "print_summary",
           "report", "summarise"]
OUTPUTS = ("model", "meta.json", "train_log.json", "rejects.jsonl")


@dataclass
class SplitData:
    """SFT datasets of both splits with what was left out, and fitting counts per split."""

    train: object  # datasets.Dataset with a "messages" column
    val: object | None
    rejects: list[Reject] = field(default_factory=list)
    counts: dict[str, dict[str, int]] = field(default_factory=dict)


def load_splits(label_dir: Path, tokenizer, params) -> SplitData:
    """Role-flipped, length-fitted SFT rows of ``train.jsonl`` and ``val.jsonl``; the training
    rows also get ``params.grounding``'s dialogues (:mod:`mimesis.train.grounding`), counted
    under ``counts["grounding"]``.

    Raises:
        FileNotFoundError: a split file is missing.
        ValueError: no usable training conversation.
    """
    from datasets import Dataset

    data = SplitData(train=None, val=None)
    limits = {"train": params.max_train_conversations, "val": params.max_val_conversations}
    for split, limit in limits.items():
        convs = read_jsonl(label_dir / f"{split}.jsonl", LabeledConversation)
        rows, rejects, counts = build_rows(convs, tokenizer, params.max_length,
                                           params.max_user_chars, params.max_agent_chars,
                                           limit=limit)
        data.rejects += rejects
        data.counts[split] = {"rows": len(rows), **counts}
        grounding = getattr(params, "grounding", None)
        if split == "train" and grounding is not None and grounding.tasks_per_env:
            extra, extra_rejects, extra_counts = build_grounding_rows(grounding, tokenizer,
                                                                      params.max_length)
            data.rejects += extra_rejects
            data.counts["grounding"] = {"rows": len(extra), **extra_counts}
            rows = rows + extra  # the trainer's sampler shuffles
        dataset = Dataset.from_list(rows) if rows else None
        setattr(data, split, dataset)
    if data.train is None:
        raise ValueError(f"{label_dir}/train.jsonl has no usable conversation "
                         f"(counts: {data.counts['train']})")
    return data


def summarise(trainer, data: SplitData, result, train_seconds: float, eval_start: dict,
              eval_end: dict, resumed_from: str | None, epochs: float) -> dict:
    """Figures for ``meta.json``, MLflow and the console."""
    tokens = data.counts["train"].get("tokens", 0) * epochs
    return {
        "parameters": count_parameters(trainer.model),
        "counts": data.counts,
        "steps": trainer.state.global_step,
        "train_loss": result.training_loss,
        "eval_loss_start": eval_start.get("eval_loss"),
        "eval_loss": eval_end.get("eval_loss"),
        "train_seconds": round(train_seconds, 1),
        # tokens of the training set (padding excluded) per second of training; a resumed run
        # covers only part of the set, so it is left out there
        "train_tokens_per_second": None if resumed_from else round(tokens / train_seconds, 1),
        "resumed_from": Path(resumed_from).name if resumed_from else None,
    }


def report(trainer, tokenizer, summary: dict) -> None:
    """Log the loss plot, one training sequence with its loss mask, and summary metrics."""
    import matplotlib.pyplot as plt
    import mlflow

    from mimesis.prompts import load_prompt

    fig = loss_figure(trainer.state.log_history)
    mlflow.log_figure(fig, "loss.png")
    plt.close(fig)
    example = trainer.train_dataset[0]
    mlflow.log_text(render_mask(tokenizer, example["input_ids"], example["labels"]),
                    "train_example.txt")
    mlflow.log_text(load_prompt("user_simulator"), "prompts/user_simulator.md")
    numbers = {k: v for k, v in summary.items() if isinstance(v, int | float) and v is not None}
    numbers.update({f"parameters_{k}": v for k, v in summary["parameters"].items()})
    mlflow.log_metrics({f"summary_{k}": float(v) for k, v in numbers.items()})


def print_summary(out_dir: Path, summary: dict) -> None:
    """Short plain-text summary on stdout."""
    train = summary["counts"]["train"]
    fitting = ", ".join(f"{k} {v}" for k, v in train.items() if k not in ("rows", "tokens"))

    def fmt(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.3f}"

    print(f"train_user: {train['rows']} training conversations ({fitting}), "
          f"{train.get('tokens', 0)} tokens; {summary['steps']} steps in "
          f"{summary['train_seconds']:.0f} s ({summary['train_tokens_per_second']} tok/s); "
          f"trainable {summary['parameters']['trainable']:,} params")
    grounding = summary["counts"].get("grounding")
    if grounding:
        per_env = ", ".join(f"{k} {v}" for k, v in grounding.items() if k not in ("rows",
                                                                                   "tokens"))
        print(f"  + {grounding['rows']} grounding dialogues ({per_env})")
    print(f"  train loss {fmt(summary['train_loss'])}; eval loss "
          f"{fmt(summary['eval_loss_start'])} -> {fmt(summary['eval_loss'])}; model -> "
          f"{out_dir / 'model'}")
