"""Stage ``evaluate``: offline realism of the frozen user simulator (METRICS.md, user side).

Reads ``<label>/test.jsonl`` (held-out real conversations, ``LabeledConversation``) and the frozen
simulator ``<freeze_user>/simulator`` (+ its ``meta.json``, whose ``base_model`` names the base
prompted as a user for the baseline). On a seeded sample of test conversations, split into two
halves by conversation, each simulator writes the first user turn from the scenario alone and the
next user turn at a few positions after agent replies, given the real history (always the one after
the final agent reply when the real user ended there). Rows: trained simulator, prompted baseline,
real vs real (the ceiling). Metrics: style distances, behaviour-frequency JS, C2ST Turing distance,
first-turn diversity, intent decomposition, termination F1, role adherence; all also per behaviour.

Agent half (:mod:`mimesis.eval.agent_run`, params ``evaluate.agents``): the base, SFT
(``sft_agent``), GRPO (``train_agent/<arm>``: ``grpo-prompted``, ``grpo``) and CSD
(``distill_agent``) agents play the same held-out scenarios of every listed env, with the same
seeds, under the frozen training simulator and under unseen users (registry of
:mod:`mimesis.eval.unseen_users`; the training simulator is refused there); ``comparisons`` get
paired differences with paired bootstrap CIs. The arms are checked before the realism half runs:
a missing arm folder, another base model or another per-turn budget than training's is refused.

Writes to ``<out>``: ``metrics.json`` (``dvc metrics``; agent results under ``agents``, paired
differences under ``agents.diff``), ``table.md``, ``agents.md``, ``agents.json``,
``plots/{lengths,behaviors,agents,agent_diffs}.png``, ``generations.jsonl`` (every generated
turn, reasoning in its own field), ``agent_episodes.jsonl``, and ``fact_reveal.md`` /
``fact_reveal.json`` (:mod:`mimesis.eval.fact_reveal`, params ``evaluate.fact_reveal``: does each
user state its hidden facts when asked; rates under ``fact_reveal`` in metrics.json). Everything
is also logged to the MLflow run ``evaluate``.

Run: ``python -m mimesis.stages.evaluate --freeze-user data/freeze_user --label data/label
--sft-agent data/sft_agent --train-agent data/train_agent --distill-agent data/distill_agent
--out data/evaluate`` (or ``dvc repro evaluate``).
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from mimesis.eval.agent_run import AgentEvaluateParams
from mimesis.eval.embeddings import MiniLMEmbedder, c2st_featurizer
from mimesis.eval.fact_reveal import FactRevealParams
from mimesis.eval.generate import (
    VIEWS,
    generation_rows,
    make_generator,
    real_records,
    simulate,
    simulated_records,
)
from mimesis.eval.protocol import NEXT, build_items
from mimesis.eval.realism import RealismConfig, evaluate_rows
from mimesis.eval.report import behavior_plot, length_plot, markdown_table
from mimesis.io import read_jsonl, write_json, write_jsonl
from mimesis.params import build, stage_params
from mimesis.schemas import LabeledConversation
from mimesis.tracking import flatten, stage_run


@dataclass(frozen=True)
class EvaluateParams:
    """Parameters of the ``evaluate`` section of params.yaml (with the active profile applied)."""

    max_conversations: int = field(default=32, metadata={"help": "test conversations (0 = all)"})
    next_positions: int = field(default=2, metadata={"help": "next-turn positions per conv"})
    max_new_tokens: int = field(default=80, metadata={"help": "tokens per generated turn"})
    temperature: float = field(default=0.8, metadata={"help": "sampling temperature (0=greedy)"})
    top_p: float = field(default=0.95, metadata={"help": "nucleus sampling mass"})
    batch_size: int = field(default=16, metadata={"help": "prompts per generate call"})
    max_prompt_tokens: int = field(default=384, metadata={"help": "prompt budget; oldest "
                                                         "history dropped first"})
    max_agent_chars: int = field(default=600, metadata={"help": "clip agent replies in history"})
    max_user_chars: int = field(default=400, metadata={"help": "clip user turns in history"})
    dtype: str = field(default="float32", metadata={"help": "float32 (CPU) | bfloat16 (GPU)"})
    device_map: str = field(default="", metadata={"help": "'' = CPU; 'auto' on GPU"})
    min_support: int = field(default=5, metadata={"help": "turns per half for a 2-sample metric"})
    c2st_min_support: int = field(default=12, metadata={"help": "turns per half for C2ST"})
    c2st_folds: int = field(default=5, metadata={"help": "grouped CV folds of the C2ST"})
    c2st_c: float = field(default=1.0, metadata={"help": "inverse L2 strength of the C2ST"})
    embed_batch_size: int = field(default=32, metadata={"help": "texts per MiniLM forward"})
    agents: AgentEvaluateParams = field(default_factory=AgentEvaluateParams)
    fact_reveal: FactRevealParams = field(default_factory=FactRevealParams)
    seed: int = 0
    profile: str = "default"

    def __post_init__(self) -> None:
        positive = ("next_positions", "max_new_tokens", "batch_size", "min_support",
                    "c2st_min_support", "embed_batch_size")
        bad = [k for k in positive if getattr(self, k) < 1]
        if bad or self.max_conversations < 0 or self.c2st_folds < 2 or self.c2st_c <= 0:
            raise ValueError(f"evaluate params out of range: {bad or 'conversations/folds/c'}")
        if not (0 <= self.temperature and 0 < self.top_p <= 1):
            raise ValueError("temperature must be >= 0 and top_p in (0, 1]")
        if self.dtype not in ("float32", "bfloat16", "float16"):
            raise ValueError("dtype must be float32, bfloat16 or float16")


def run(freeze_user_dir: Path, label_dir: Path, out_dir: Path, params: EvaluateParams,
        train_agent_dir: Path | None = None, distill_agent_dir: Path | None = None,
        sft_agent_dir: Path | None = None) -> Path:
    """Evaluate the frozen simulator and the prompted baseline against real users, then (when
    ``params.agents.enabled``) the base, SFT, GRPO and CSD agents under the frozen and the unseen
    users (see module docstring); returns ``out_dir``.

    Raises:
        FileNotFoundError: ``test.jsonl`` or the frozen simulator is missing, or an agent arm's
            folder (named in the message) is missing or incomplete.
        FrozenSimulatorError: a frozen file's sha256 does not match its meta.json.
        ValueError: an unseen user is the training simulator; an arm trained with another
            per-turn budget or base model, or on a held-out scenario.
    """
    import mlflow

    from mimesis.eval.agent_run import agent_sources, check_arms
    from mimesis.simulator.guards import is_assistant_like

    started = time.time()
    agents = None
    if params.agents.enabled:  # refuse unfair arms before the realism half spends its minutes
        agents = agent_sources(train_agent_dir, distill_agent_dir, sft_agent_dir, params.agents)
        check_arms(agents, params.agents)
    convs = list(read_jsonl(label_dir / "test.jsonl", LabeledConversation))
    items, skipped = build_items(convs, params.max_conversations, params.next_positions,
                                 params.seed)
    with stage_run("evaluate", dataclasses.asdict(params)):
        outputs, model_ids = generate_both(freeze_user_dir, items, params)
        simulated = {n: simulated_records(items, o, rule_behaviors) for n, o in outputs.items()}
        real = real_records(items, rule_behaviors)
        cfg = RealismConfig(params.min_support, params.c2st_min_support, params.c2st_folds,
                            params.c2st_c, params.seed)
        featurize = c2st_featurizer(MiniLMEmbedder(batch_size=params.embed_batch_size))
        metrics = evaluate_rows(simulated, real, featurize, is_assistant_like, cfg)
        metrics["counts"] = counts(convs, items, skipped, time.time() - started)
        if agents is not None:
            from mimesis.eval.agent_run import run_agent_evaluation

            metrics["agents"] = run_agent_evaluation(
                freeze_user_dir, agents, label_dir / "test.jsonl", out_dir, params.agents)
        else:  # dvc.yaml declares the agent files: say why they are empty
            out_dir.mkdir(parents=True, exist_ok=True)
            (out_dir / "agents.md").write_text("Agent evaluation disabled (evaluate.agents.enabled"
                                               ": false).\n")
            (out_dir / "agents.json").write_text('{"rows": [], "comparisons": []}\n')
            write_jsonl(out_dir / "agent_episodes.jsonl", [])
        if params.fact_reveal.enabled:  # do the users state their hidden facts when asked?
            from mimesis.eval.fact_reveal import run_fact_reveal

            metrics["fact_reveal"] = run_fact_reveal(freeze_user_dir, out_dir, params.fact_reveal)
        else:  # dvc.yaml declares the files
            out_dir.mkdir(parents=True, exist_ok=True)
            (out_dir / "fact_reveal.md").write_text("Fact-reveal check disabled.\n")
            (out_dir / "fact_reveal.json").write_text("{}\n")
        mlflow.log_dict(skipped, "skipped_conversations.json")  # id -> reason (malformed turns)
        write_jsonl(out_dir / "generations.jsonl",
                    [row for n, o in outputs.items()
                     for row in generation_rows(n, model_ids[n], items, o, simulated[n])])
        write_outputs(out_dir, metrics, simulated, real, model_ids)
    print_summary(metrics, out_dir)
    return out_dir


def rule_behaviors(turns, index: int) -> list[str]:
    """Behaviours of ``turns[index]`` by the shared rule labeler (real and simulated alike)."""
    from mimesis.behaviors.rules import detect_rules

    return detect_rules(turns, index).behaviors


def generate_both(freeze_user_dir: Path, items: list, params: EvaluateParams) -> tuple[dict, dict]:
    """Generations of the trained simulator, then of its base model prompted as a user (loaded
    one at a time to keep memory low)."""
    from mimesis.models.base import load_base
    from mimesis.simulator.frozen import load_frozen

    device_map = params.device_map or None
    model, tokenizer, meta = load_frozen(freeze_user_dir / "simulator", params.dtype, device_map)
    base_name = meta.get("base_model")
    if not base_name:
        raise KeyError(f"{freeze_user_dir}/simulator/meta.json has no 'base_model'")
    model_ids = {"trained": f"frozen:{meta.get('registered_model', freeze_user_dir.name)}",
                 "baseline": f"base:{base_name}"}
    outputs = {}
    for name in ("trained", "baseline"):
        if name == "baseline":
            del model
            gc.collect()
            model, tokenizer = load_base(base_name, params.dtype, device_map)
        gen = make_generator(model, tokenizer, model_ids[name], params.max_new_tokens,
                             params.temperature, params.top_p, params.batch_size,
                             params.max_prompt_tokens)
        outputs[name] = simulate(gen, VIEWS[name], items, params.seed, params.max_user_chars,
                                 params.max_agent_chars, desc=f"evaluate:{name}")
    return outputs, model_ids


def counts(convs: list, items: list, skipped: dict[str, str], seconds: float) -> dict:
    """Reconciling counts: every test conversation is evaluated, skipped (with reason, in
    ``skipped``) or not sampled."""
    evaluated = len({it.conv_id for it in items})
    return {"test_conversations": float(len(convs)), "evaluated_conversations": float(evaluated),
            "skipped_conversations": float(len(skipped)),
            "not_sampled": float(len(convs) - evaluated - len(skipped)),
            "positions": float(len(items)),
            "next_positions": float(sum(it.kind == NEXT for it in items)),
            "real_end_positions": float(sum(it.real_ended for it in items)),
            "seconds": round(seconds, 1)}


def write_outputs(out_dir: Path, metrics: dict, simulated: dict, real: list,
                  model_ids: dict) -> None:
    """metrics.json, table.md and plots to ``out_dir``, and all of it to the MLflow run."""
    import mlflow

    from mimesis.simulator.prompts import load_prompt

    write_json(out_dir / "metrics.json", metrics)
    (out_dir / "table.md").write_text(markdown_table(metrics))
    lengths = {"real": [len(r.utterance) for r in real],
               **{n: [len(r.utterance) for r in recs if r.spoken] for n, recs in simulated.items()}}
    length_plot(lengths, out_dir / "plots" / "lengths.png")
    behavior_plot(metrics["behavior_frequencies"], out_dir / "plots" / "behaviors.png")
    numeric = {k: float(v) for k, v in flatten(metrics).items() if isinstance(v, int | float)}
    mlflow.log_metrics({k.replace(":", "_"): v for k, v in numeric.items()})
    mlflow.set_tags({f"mimesis.model.{n}": m for n, m in model_ids.items()})
    for name in ("user_simulator", "prompted_user"):
        mlflow.log_text(load_prompt(name), f"prompts/{name}.md")
    for path in ("metrics.json", "table.md", "generations.jsonl", "agents.md", "agents.json",
                 "agent_episodes.jsonl", "fact_reveal.md", "fact_reveal.json"):
        if (out_dir / path).exists():  # the agent files only when the agent half ran
            mlflow.log_artifact(str(out_dir / path))
    mlflow.log_artifacts(str(out_dir / "plots"), "plots")


def print_summary(metrics: dict, out_dir: Path) -> None:
    """A few headline numbers per row."""
    print(f"evaluate: {json.dumps(metrics['counts'])}")
    for row in ("trained", "baseline", "real"):
        m = metrics[row]
        print(f"  {row:9s} turing_dist={m.get('c2st', {}).get('distance', float('nan')):.1f} "
              f"behavior_js={m.get('behavior_js', float('nan')):.3f} "
              f"termination_f1={m.get('termination_f1', float('nan')):.2f} "
              f"role_adherence={m.get('role_adherence', float('nan')):.2f} "
              f"n={m.get('n_turns', 0):.0f}")
    for agent, users in metrics.get("agents", {}).get("by_agent", {}).items():
        print(f"  agent {agent:13s} mean reward (all envs): " + "  ".join(
            f"{user}={envs['ALL']['mean_reward']:.3f}" for user, envs in users.items()))
    for pair, users in metrics.get("agents", {}).get("diff", {}).items():
        print(f"  diff  {pair:18s} mean reward (all envs): " + "  ".join(
            f"{user}={_signed(envs['ALL'])}" for user, envs in users.items()))
    for user, envs in metrics.get("fact_reveal", {}).items():
        if isinstance(envs, dict):
            print(f"  fact reveal {user}: " + "  ".join(
                f"{env}={c['rate']:.0%}" for env, c in envs.items()))
    print(f"  -> {out_dir}/metrics.json, table.md, agents.md, plots/, generations.jsonl")


def _signed(d: dict) -> str:
    """``+0.125 [-0.010, +0.250]`` (CI omitted when there is none)."""
    ci = "" if d.get("mean_reward_ci_low") is None else (
        f" [{d['mean_reward_ci_low']:+.3f}, {d['mean_reward_ci_high']:+.3f}]")
    return f"{d['mean_reward']:+.3f}{ci}"


def load_params(params_path: Path = Path("params.yaml")) -> EvaluateParams:
    """This stage's params from ``params_path`` (active profile applied).

    Raises:
        mimesis.params.ParamsError: a missing section, an unknown key or an invalid value.
    """
    return build(EvaluateParams, stage_params("evaluate", params_path), "evaluate")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--freeze-user", type=Path, default=Path("data/freeze_user"))
    parser.add_argument("--label", type=Path, default=Path("data/label"))
    parser.add_argument("--sft-agent", type=Path, default=Path("data/sft_agent"))
    parser.add_argument("--train-agent", type=Path, default=Path("data/train_agent"),
                        help="its arms are subfolders (evaluate.agents.train_agent_arms)")
    parser.add_argument("--distill-agent", type=Path, default=Path("data/distill_agent"))
    parser.add_argument("--out", type=Path, default=Path("data/evaluate"))
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    args = parser.parse_args(argv)
    params = load_params(Path(args.params))
    run(args.freeze_user, args.label, args.out, params, args.train_agent, args.distill_agent,
        args.sft_agent)


if __name__ == "__main__":
    main()
