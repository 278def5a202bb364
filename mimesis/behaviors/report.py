"""Label frequencies, reconciling counts and the MLflow report of the ``label`` stage."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from mimesis.behaviors.catalog import BEHAVIOR_IDS, TRAIT_IDS
from mimesis.schemas import LabeledConversation

LABELS: tuple[str, ...] = (*BEHAVIOR_IDS, *TRAIT_IDS)


def label_frequency(convs: Sequence[LabeledConversation]) -> dict[str, float]:
    """Share of labelled user turns carrying each behaviour and trait (0 when there are none)."""
    counts: Counter[str] = Counter()
    turns = 0
    for conv in convs:
        for lab in conv.labels:
            turns += 1
            counts.update(lab.behaviors)
            counts.update(lab.traits)
    return {label: counts[label] / turns if turns else 0.0 for label in LABELS}


def reconcile(split_counts: Mapping[str, Mapping[str, int]]) -> None:
    """Check ``input == labelled + rejected + not_sampled`` for every split.

    Raises:
        RuntimeError: a split's counts do not add up (a record was lost: a bug).
    """
    for split, c in split_counts.items():
        if c["input"] != c["labelled"] + c["rejected"] + c["not_sampled"]:
            raise RuntimeError(f"label counts do not reconcile for {split}: {dict(c)}")


def frequency_figure(freqs: Mapping[str, Mapping[str, float]]):
    """Grouped bar chart of label frequencies per split (matplotlib figure, Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(11, 4))
    splits = list(freqs)
    width = 0.8 / max(1, len(splits))
    for k, split in enumerate(splits):
        xs = [i + k * width for i in range(len(LABELS))]
        ax.bar(xs, [freqs[split][label] for label in LABELS], width=width, label=split)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(LABELS))])
    ax.set_xticklabels(LABELS, rotation=45, ha="right")
    ax.set_ylabel("share of labelled user turns")
    ax.set_title("Behaviour and trait frequency per split (label stage)")
    ax.legend()
    fig.tight_layout()
    return fig


def log_to_mlflow(counts: dict, templates: Mapping[str, str]) -> None:
    """Counts, label frequencies, producer shares, prompt templates and the frequency plot."""
    import mlflow

    metrics = {f"{split}.{key}": float(value) for split, c in counts["splits"].items()
               for key, value in c.items()}
    metrics.update({f"freq.{split}.{label}": value
                    for split, f in counts["label_frequency"].items() for label, value in f.items()})
    for kind, producers in counts["producers"].items():
        total = sum(producers.values())
        metrics[f"fallback_share.{kind}"] = (producers.get("rules:fallback", 0) / total
                                             if total else 0.0)
    mlflow.log_metrics(metrics)
    for name, text in templates.items():
        mlflow.log_text(text, f"prompts/{name}.md")
    mlflow.log_dict(counts, "counts.json")
    figure = frequency_figure(counts["label_frequency"])
    mlflow.log_figure(figure, "behavior_frequency.png")
    import matplotlib.pyplot as plt

    plt.close(figure)
