"""Score generated user turns against real ones and write the realism outputs: shared by the
``evaluate_user`` stage (frozen simulator + prompted baseline) and ``mimesis evaluate-simulator``
(any simulator, :mod:`mimesis.eval.evaluate_simulator`).

Writes to ``out_dir``: ``metrics.json``, ``table.md``, ``plots/{lengths,behaviors}.png`` and
``generations.jsonl`` (every generated turn, reasoning in its own field), all also logged to the
active MLflow run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mimesis.eval.generate import Generated, generation_rows, real_records, simulated_records
from mimesis.eval.protocol import NEXT, EvalItem
from mimesis.eval.realism import RealismConfig, TurnRecord, evaluate_rows
from mimesis.eval.report import behavior_plot, length_plot, markdown_table
from mimesis.io import write_json, write_jsonl
from mimesis.tracking import flatten


def rule_behaviors(turns, index: int) -> list[str]:
    """Behaviours of ``turns[index]`` by the shared rule labeler (real and simulated alike)."""
    from mimesis.behaviors.rules import detect_rules

    return detect_rules(turns, index).behaviors


def realism_config(params: Any) -> RealismConfig:
    """The :class:`RealismConfig` of an ``EvaluateUserParams``."""
    return RealismConfig(params.min_support, params.c2st_min_support, params.c2st_folds,
                         params.c2st_c, params.seed, params.c2st_permutations,
                         params.c2st_real_splits, params.n_bootstrap, params.goal_distractors)


def score(items: Sequence[EvalItem], outputs: Mapping[str, Sequence[Generated]], params: Any
          ) -> tuple[dict, dict[str, list[TurnRecord]], list[TurnRecord]]:
    """Metrics of every simulator row and the real row (:func:`evaluate_rows`), with real and
    simulated turns cut to ``params.max_turn_chars`` alike.

    Returns:
        ``(metrics, simulated records by row, real records)``.
    """
    from mimesis.eval.c2st import c2st_featurizer
    from mimesis.models.embeddings import MiniLMEmbedder, cached_embed
    from mimesis.simulator.guards import is_assistant_like

    cap = params.max_turn_chars
    simulated = {n: simulated_records(items, o, rule_behaviors, cap) for n, o in outputs.items()}
    real = real_records(items, rule_behaviors, cap)
    embedder = MiniLMEmbedder(batch_size=params.embed_batch_size)
    embed = cached_embed(embedder)
    metrics = evaluate_rows(simulated, real, c2st_featurizer(embedder, embed), is_assistant_like,
                            realism_config(params), embed)
    for name, gens in outputs.items():
        metrics[name]["guards"] = guard_counts(gens)
    return metrics, simulated, real


def guard_counts(outputs: Sequence[Generated]) -> dict[str, float]:
    """What the run-time guards did over a row's positions: shares resampled (any
    ``resampled:<flag>``), per flag, and ended by each end reason (``end:<reason>``)."""
    n = max(len(outputs), 1)
    out = {"positions": float(len(outputs)),
           "resampled_rate": sum(any(f.startswith("resampled:") for f in g.flags)
                                 for g in outputs) / n}
    for prefix, key in (("resampled:", "resampled"), ("end:", "ended")):
        names = sorted({f[len(prefix):] for g in outputs for f in g.flags if f.startswith(prefix)})
        for name in names:
            out[f"{key}_{name}"] = sum(f"{prefix}{name}" in g.flags for g in outputs) / n
    return out


def counts(n_conversations: int, items: Sequence[EvalItem], skipped: Mapping[str, str],
           seconds: float) -> dict:
    """Reconciling counts: every conversation is evaluated, skipped (with reason, in
    ``skipped``) or not sampled."""
    evaluated = len({it.conv_id for it in items})
    return {"test_conversations": float(n_conversations),
            "evaluated_conversations": float(evaluated),
            "skipped_conversations": float(len(skipped)),
            "not_sampled": float(n_conversations - evaluated - len(skipped)),
            "positions": float(len(items)),
            "next_positions": float(sum(it.kind == NEXT for it in items)),
            "real_end_positions": float(sum(it.real_ended for it in items)),
            "seconds": round(seconds, 1)}


def write_outputs(out_dir: Path, metrics: dict, items: Sequence[EvalItem],
                  outputs: Mapping[str, Sequence[Generated]],
                  simulated: Mapping[str, Sequence[TurnRecord]], real: Sequence[TurnRecord],
                  model_ids: Mapping[str, str], prompts: Sequence[str] = ()) -> None:
    """metrics.json, table.md, generations.jsonl and plots to ``out_dir``, and all of it to the
    active MLflow run (metrics, model-id tags, the prompt templates named in ``prompts``)."""
    import mlflow

    from mimesis.prompts import load_prompt

    out_dir.mkdir(parents=True, exist_ok=True)
    write_jsonl(out_dir / "generations.jsonl",
                [row for n, o in outputs.items()
                 for row in generation_rows(n, model_ids[n], items, o, simulated[n])])
    write_json(out_dir / "metrics.json", metrics)
    (out_dir / "table.md").write_text(markdown_table(metrics, [*simulated, "real"]))
    lengths = {"real": [len(r.utterance) for r in real],
               **{n: [len(r.utterance) for r in recs if r.spoken] for n, recs in simulated.items()}}
    length_plot(lengths, out_dir / "plots" / "lengths.png")
    behavior_plot(metrics["behavior_frequencies"], out_dir / "plots" / "behaviors.png")
    numeric = {k: float(v) for k, v in flatten(metrics).items()
               if isinstance(v, int | float) and not isinstance(v, bool)}
    mlflow.log_metrics({k.replace(":", "_"): v for k, v in numeric.items()})
    mlflow.set_tags({f"mimesis.model.{n}": m for n, m in model_ids.items()})
    for name in prompts:
        mlflow.log_text(load_prompt(name), f"prompts/{name}.md")
    for path in ("metrics.json", "table.md", "generations.jsonl"):
        mlflow.log_artifact(str(out_dir / path))
    mlflow.log_artifacts(str(out_dir / "plots"), "plots")


def print_summary(metrics: dict, rows: Sequence[str], out_dir: Path, stage: str) -> None:
    """A few headline numbers per row."""
    print(f"{stage}: {json.dumps(metrics['counts'])}")
    nan = float("nan")
    for row in rows:
        m = metrics[row]
        c = m.get("c2st", {})
        print(f"  {row:12s} turing_dist={c.get('distance', nan):.1f} "
              f"[{c.get('ci_low', nan):.1f}, {c.get('ci_high', nan):.1f}] "
              f"p={c.get('p_value', nan):.3f} turn_loss={m.get('turn_loss_rate', nan):.2f} "
              f"realism_index={m.get('realism_index', nan):.2f} "
              f"goal_top1={m.get('goal', {}).get('top1', nan):.2f} n={m.get('n_turns', 0):.0f}")
    print(f"  -> {out_dir}/metrics.json, table.md, plots/, generations.jsonl")
