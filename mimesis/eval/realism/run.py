"""Score generated user turns against real ones and write the realism outputs: shared by the
``evaluate_user`` stage (frozen simulator + prompted baseline) and ``mimesis evaluate-simulator``
(any simulator, :mod:`mimesis.eval.realism.evaluate_simulator`).

Writes to ``out_dir``: ``metrics.json``, ``table.md``, ``plots/{lengths,behaviors}.png`` and
``generations.jsonl`` (every generated turn, reasoning in its own field), all also logged to the
active MLflow run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mimesis.eval.headline import user_headline, write_headline
from mimesis.eval.realism.generate import (
    Generated,
    generation_rows,
    real_records,
    simulated_records,
)
from mimesis.eval.realism.metrics import (
    RealismConfig,
    TurnRecord,
    clustered_share,
    evaluate_rows,
    with_share,
)
from mimesis.eval.realism.protocol import NEXT, EvalItem
from mimesis.eval.realism.report import behavior_plot, length_plot, markdown_table
from mimesis.io import write_json, write_jsonl
from mimesis.tracking import flatten


@dataclass(frozen=True)
class RealismParams:
    """How realism is scored against held-out real users: the sample of conversations, the
    simulator's sampling and prompt budgets, the cap on every scored turn and the statistics'
    settings. The fields of params.yaml ``evaluate_user`` that the stage's
    :class:`~mimesis.stages.evaluate_user.EvaluateUserParams` inherits and ``mimesis
    evaluate-simulator`` (:mod:`mimesis.eval.realism.evaluate_simulator`) reads.

    Raises:
        ValueError: a count, cap or statistic setting out of range, or an unknown dtype.
    """

    max_conversations: int = field(default=24, metadata={"help": "test conversations (0 = all)"})
    next_positions: int = field(default=2, metadata={"help": "next-turn positions per conv"})
    max_new_tokens: int = field(default=80, metadata={"help": "tokens per generated turn"})
    temperature: float = field(default=0.8, metadata={"help": "sampling temperature (0=greedy)"})
    top_p: float = field(default=0.95, metadata={"help": "nucleus sampling mass"})
    batch_size: int = field(default=16, metadata={"help": "prompts per generate call"})
    max_prompt_tokens: int = field(default=384, metadata={"help": "prompt budget; oldest "
                                                         "history dropped first"})
    max_agent_chars: int = field(default=600, metadata={"help": "clip agent replies in history"})
    max_user_chars: int = field(default=400, metadata={"help": "clip user turns in history"})
    max_turn_chars: int = field(default=300, metadata={"help": "cap of every scored turn, real "
                                                       "and simulated alike (0 = none)"})
    dtype: str = field(default="float32", metadata={"help": "float32 (CPU) | bfloat16 (GPU)"})
    device_map: str = field(default="", metadata={"help": "'' = CPU; 'auto' on GPU"})
    min_support: int = field(default=5, metadata={"help": "turns per half for a 2-sample metric"})
    c2st_min_support: int = field(default=12, metadata={"help": "turns per half for C2ST"})
    c2st_folds: int = field(default=5, metadata={"help": "grouped CV folds of the C2ST"})
    c2st_c: float = field(default=1.0, metadata={"help": "inverse L2 strength of the C2ST"})
    c2st_permutations: int = field(default=200, metadata={"help": "permutations of the C2ST "
                                                          "p-value (0 = none)"})
    c2st_real_splits: int = field(default=10, metadata={"help": "random half splits pooled in "
                                                       "the real-vs-real C2ST"})
    n_bootstrap: int = field(default=1000, metadata={"help": "bootstrap resamples of the CIs"})
    goal_distractors: int = field(default=10, metadata={"help": "other goals the true goal is "
                                                        "ranked among"})
    embed_batch_size: int = field(default=32, metadata={"help": "texts per MiniLM forward"})
    seed: int = 13

    def __post_init__(self) -> None:
        positive = ("next_positions", "max_new_tokens", "batch_size", "min_support",
                    "c2st_min_support", "embed_batch_size", "c2st_real_splits",
                    "goal_distractors")
        bad = [k for k in positive if getattr(self, k) < 1]
        bad += [k for k in ("max_turn_chars", "c2st_permutations", "n_bootstrap")
                if getattr(self, k) < 0]
        if bad or self.max_conversations < 0 or self.c2st_folds < 2 or self.c2st_c <= 0:
            raise ValueError(f"evaluate_user params out of range: {bad or 'conversations/folds/c'}")
        if not (0 <= self.temperature and 0 < self.top_p <= 1):
            raise ValueError("temperature must be >= 0 and top_p in (0, 1]")
        if self.dtype not in ("float32", "bfloat16", "float16"):
            raise ValueError("dtype must be float32, bfloat16 or float16")


def rule_behaviors(turns, index: int) -> list[str]:
    """Behaviours of ``turns[index]`` by the shared rule labeler (real and simulated alike)."""
    from mimesis.behaviors.rules import detect_rules

    return detect_rules(turns, index).behaviors


def realism_config(params: RealismParams) -> RealismConfig:
    """The :class:`RealismConfig` of ``params``."""
    return RealismConfig(params.min_support, params.c2st_min_support, params.c2st_folds,
                         params.c2st_c, params.seed, params.c2st_permutations,
                         params.c2st_real_splits, params.n_bootstrap, params.goal_distractors)


def score(items: Sequence[EvalItem], outputs: Mapping[str, Sequence[Generated]],
          params: RealismParams) -> tuple[dict, dict[str, list[TurnRecord]], list[TurnRecord]]:
    """Metrics of every simulator row and the real row (:func:`evaluate_rows`), with real and
    simulated turns cut to ``params.max_turn_chars`` alike.

    Returns:
        ``(metrics, simulated records by row, real records)``.
    """
    from mimesis.eval.realism.c2st import c2st_featurizer
    from mimesis.models.embeddings import MiniLMEmbedder, cached_embed
    from mimesis.simulator.guards import is_assistant_like

    cap = params.max_turn_chars
    simulated = {n: simulated_records(items, o, rule_behaviors, cap) for n, o in outputs.items()}
    real = real_records(items, rule_behaviors, cap)
    embedder = MiniLMEmbedder(batch_size=params.embed_batch_size)
    embed = cached_embed(embedder)
    metrics = evaluate_rows(simulated, real, c2st_featurizer(embedder, embed), is_assistant_like,
                            realism_config(params), embed)
    groups = [it.conv_id for it in items]
    for name, gens in outputs.items():
        metrics[name]["guards"] = guard_counts(gens)
        metrics[name].update(raw_rates(gens, groups, params.n_bootstrap, params.seed))
        raw_end = raw_termination(items, gens)
        if raw_end:
            metrics[name]["raw_termination"] = raw_end
    return metrics, simulated, real


def guard_counts(outputs: Sequence[Generated]) -> dict[str, float]:
    """What the run-time guards did over a row's positions: shares resampled (any
    ``resampled:<reason>``), per reason (``resampled_<reason>``: the guard or rule 0 that asked
    for the redraw, e.g. ``off_topic``, ``end_confirm``, ``restart``; a position redrawn for
    two reasons counts in both), and ended by each end reason (``ended_<reason>``)."""
    n = max(len(outputs), 1)
    out = {"positions": float(len(outputs)),
           "resampled_rate": sum(any(f.startswith("resampled:") for f in g.flags)
                                 for g in outputs) / n}
    for prefix, key in (("resampled:", "resampled"), ("end:", "ended")):
        names = sorted({f[len(prefix):] for g in outputs for f in g.flags if f.startswith(prefix)})
        for name in names:
            out[f"{key}_{name}"] = sum(f"{prefix}{name}" in g.flags for g in outputs) / n
    return out


# Flags of a draw whose utterance, had the parser or rule 0 not moved the text, would carry
# private text: a think block left open or opened in a prefill only, reasoning without tags
# (split off, or the whole turn refused), an aside, text after the end signal, a JSON
# reasoning field (parser, mimesis.simulator.parsing), a copied scenario directive or a hidden
# fact read out with meta-talk (the runtime's rule 0, mimesis.simulator.runtime).
LEAK_FLAGS = frozenset({"think_unclosed", "think_unopened", "unsafe_split", "untagged_reasoning",
                        "untagged_reasoning_unsplit", "aside", "after_end_signal",
                        "json_reasoning", "directive_copy", "hidden_fact"})


def think_blocks(text: str) -> int:
    """Reasoning blocks opened in ``text``, any tag dialect (``<think>``, ``<thought>``,
    ``[THINK]`` …, counted after :func:`~mimesis.simulator.private_forms.canonical_tags`).

    >>> think_blocks("<think>a</think> hi <thought>b</thought>"), think_blocks("hi")
    (2, 0)
    """
    from mimesis.simulator.private_forms import canonical_tags

    return canonical_tags(text).count("<think>")


def raw_leak(g: Generated) -> bool:
    """Whether a position's first draw would have put private text in the utterance: a flag of
    :data:`LEAK_FLAGS` among its :attr:`Generated.first_flags`, or more than one reasoning block
    (:func:`think_blocks`; the view the simulator is trained on holds one)."""
    return bool(LEAK_FLAGS & set(g.first_flags)) or think_blocks(g.first_raw) > 1


def raw_empty(g: Generated) -> bool:
    """Whether a position's first draw parses to no utterance and no end signal (a turn the
    runtime must redraw or refuse)."""
    from mimesis.simulator.parsing import parse_turn

    parsed = parse_turn(g.first_raw)
    return not parsed.utterance.strip() and not parsed.ended


def raw_termination(items: Sequence[EvalItem], outputs: Sequence[Generated]) -> dict[str, float]:
    r"""Termination of each next-turn position's first draw, before the runtime's end rule
    (``GuardParams.end_draws``) drew an end again: the draw "ends" when it parses to the end
    signal and no utterance. :func:`~mimesis.eval.realism.userlm.termination_f1`'s keys
    (``f1``, ``recall`` = true-end rate, ``false_end_rate``, ``n`` …) over the positions with
    a draw; ``{}`` when there are none. Beside the sent row's termination it shows whether the
    simulator's own end decisions aim at where real users stop (docs/metrics.md).

    >>> it = lambda text: EvalItem("c", 0, NEXT, 2, None, (), text, ())  # no scenario needed
    >>> end = Generated("", "", "", True, (), "<think>done</think>\n<|end_conversation|>", ())
    >>> more = Generated("", "", "more?", False, (), "<think>a</think>\nmore?", ())
    >>> out = raw_termination([it(None), it("ok"), it("go on")], [end, end, more])
    >>> out["recall"], out["false_end_rate"], out["n"]
    (1.0, 0.5, 3.0)
    """
    from mimesis.eval.realism.userlm import termination_f1
    from mimesis.simulator.parsing import parse_turn

    pairs = [(it.real_ended, parse_turn(g.first_raw)) for it, g in zip(items, outputs, strict=True)
             if it.kind == NEXT and g.first_raw]
    if not pairs:
        return {}
    return termination_f1([p.ended and not p.utterance.strip() for _, p in pairs],
                          [real for real, _ in pairs])


def raw_rates(outputs: Sequence[Generated], groups: Sequence[str], n_bootstrap: int = 1000,
              seed: int = 0) -> dict[str, float]:
    r"""How the simulator writes before the guards act, over each position's first draw
    (:attr:`Generated.first_raw`; positions without one, an endpoint that failed, are left out):

    - ``raw_leak_rate``: share of first draws that would have put private text in the
      utterance had the parser and the runtime's rule 0 not moved it (:func:`raw_leak`);
    - ``raw_empty_rate``: share that parse to no utterance and no end signal (:func:`raw_empty`);

    each with ``<key>_ci_low`` / ``<key>_ci_high`` (95% bootstrap over conversations,
    :func:`~mimesis.eval.realism.metrics.clustered_share`), and ``raw_positions`` /
    ``raw_conversations`` (the n). No rate when no position has a draw. Source: ours
    (docs/metrics.md, "Raw leak / raw empty rate").

    Args:
        outputs: A row's outputs, one per position.
        groups: The conversation id of each position.

    >>> g = Generated("", "", "", False, (), "<think>a</think>\nhi", ("think_tagged",))
    >>> out = raw_rates([g, Generated("", "", "", False, (), "<think>a</think>\n<think>b",
    ...                               ("think_unclosed",))], ["c1", "c2"], n_bootstrap=0)
    >>> out["raw_leak_rate"], out["raw_empty_rate"], out["raw_positions"]
    (0.5, 0.5, 2.0)
    """
    drawn = [(g, c) for g, c in zip(outputs, groups, strict=True) if g.first_raw]
    out: dict[str, float] = {"raw_positions": float(len(drawn)),
                             "raw_conversations": float(len({c for _, c in drawn}))}
    if drawn:
        convs = [c for _, c in drawn]
        for key, test in (("raw_leak_rate", raw_leak), ("raw_empty_rate", raw_empty)):
            with_share(out, key, clustered_share([test(g) for g, _ in drawn], convs,
                                                 n_bootstrap, seed))
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
    write_headline(out_dir, user_headline(metrics))
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
    """A few headline numbers per row: the Turing distance with, beside it, the scored positions
    (share, CI, turns / positions over conversations) and the distance over all positions; then
    the paired differences (spoken turns and all positions)."""
    print(f"{stage}: {json.dumps(metrics['counts'])}")
    nan = float("nan")
    for row in rows:
        m = metrics[row]
        c, a = m.get("c2st", {}), m.get("c2st_all", {})
        print(f"  {row:12s} turing_dist={c.get('distance', nan):.1f} "
              f"[{c.get('ci_low', nan):.1f}, {c.get('ci_high', nan):.1f}] "
              f"scored={m.get('scored_rate', nan):.2f} "
              f"[{m.get('scored_rate_ci_low', nan):.2f}, {m.get('scored_rate_ci_high', nan):.2f}]"
              f" ({m.get('n_turns', 0):.0f}/{m.get('n_positions', 0):.0f} positions, "
              f"{m.get('n_conversations', 0):.0f} convs) "
              f"all_positions={a.get('distance', nan):.1f} "
              f"[{a.get('ci_low', nan):.1f}, {a.get('ci_high', nan):.1f}] (n={a.get('n', 0):.0f}) "
              f"p={c.get('p_value', nan):.3f} turn_loss={m.get('turn_loss_rate', nan):.2f} "
              f"raw_leak={m.get('raw_leak_rate', nan):.2f} "
              f"raw_empty={m.get('raw_empty_rate', nan):.2f} "
              f"realism_index={m.get('realism_index', nan):.2f} "
              f"goal_top1={m.get('goal', {}).get('top1', nan):.2f} n={m.get('n_turns', 0):.0f}")
    for group, what in (("comparisons", "spoken turns"), ("comparisons_all", "all positions")):
        for pair, d in metrics.get(group, {}).items():
            print(f"  {pair} ({what}): turing_dist {d['difference']:+.1f} "
                  f"[{d['ci_low']:+.1f}, {d['ci_high']:+.1f}] over "
                  f"{d['conversations']:.0f} convs, p(a closer)={d['p_a_better']:.3g}")
    print(f"  -> {out_dir}/metrics.json, table.md, plots/, generations.jsonl")
