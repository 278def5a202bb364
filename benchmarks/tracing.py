"""What logging episodes as MLflow traces costs a stage: the same evaluation with tracing on and
off, in one process.

A pass is what ``evaluate_agents`` does per agent × user run, ``--runs`` times inside one MLflow
run: play ``--episodes`` held-out-style episodes with the rollout engine (the agent greedy, the
user the base model behind the trained simulator's prompt, sampled; both reseeded per run, so
every pass plays the same episodes), dump the records as the stage does, and, when traced, log
them with :func:`mimesis.traces.log_episode_traces` as the stage's ``keep`` does (the exporter
writes in background threads while the next run plays), then flush at the end. Traced and
untraced passes alternate (A B B A …), so a load that drifts weighs on both alike.

Figures: ``ratio`` = pooled traced seconds / pooled untraced seconds (what a stage pays, rollouts
included); ``direct`` = the seconds spent inside the tracing calls (logging + the final flush)
over the untraced seconds (the same cost without the rollout noise); ms per trace. The tracking
database is a fresh SQLite file (``--tracking-dir``: put it on the disk of the pipeline's
``mlflow.db``; a commit waits for the disk). The real stage also loads models and runs the fact-reveal check, which the
traces do not touch: its share is smaller than ``ratio - 1`` here.

    python benchmarks/tracing.py --model tiny-llama --quick        # seconds: a smoke check
    python benchmarks/tracing.py --threads 2 --repeats 2 --out /tmp/tracing.json
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

# isort: off
from mimesis.runtime_env import configure_environment

configure_environment()
import torch
# isort: on

from mimesis.models.base import load_base
from mimesis.models.engine.sampling import SamplingParams, TokenSampler
from mimesis.rollout.engine import RolloutEngine
from mimesis.rollout.records import RolloutParams, ScenarioSpec
from mimesis.simulator.runtime import UserSimulator
from mimesis.traces import flush, log_episode_traces

TOKENS = {"prompt_ids", "completion_ids", "env_mask", "logprobs", "turn_ids"}
QUICK = {"runs": 2, "episodes": 2, "max_turns": 2, "max_new_tokens": 8, "repeats": 1}


@dataclass
class Pass:
    """One pass: ``runs`` agent × user runs, traced or not."""

    traced: bool
    seconds: float
    tracing_seconds: float  # inside log_episode_traces and the final flush
    episodes: int
    traces: int
    load_avg: tuple[float, float]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2-135m", help="smollm2-135m | tiny-llama | HF folder")
    p.add_argument("--envs", default="TravelGym,PersuadeGym,TelepathyGym",
                   help="the default profile's evaluation envs")
    p.add_argument("--runs", type=int, default=4, help="agent x user runs per pass")
    p.add_argument("--episodes", type=int, default=6, help="episodes per run (the default's 6)")
    p.add_argument("--max-turns", type=int, default=3)
    p.add_argument("--max-new-tokens", type=int, default=48, help="per agent and per user turn")
    p.add_argument("--max-completion-tokens", type=int, default=640)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch's default)")
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--repeats", type=int, default=2, help="traced + untraced passes each")
    p.add_argument("--tracking-dir", type=Path, default=None,
                   help="where the fresh SQLite tracking database goes (default: the system's "
                        "temporary folder; put it on the disk of the pipeline's mlflow.db)")
    p.add_argument("--tracking-uri", default=None,
                   help="an MLflow tracking URI to use instead of the fresh database (an empty "
                        "store; the traced passes add their traces to it)")
    p.add_argument("--quick", action="store_true", help=f"smoke-check sizes: {QUICK}")
    p.add_argument("--out", type=Path, default=None, help="write the figures here (JSON)")
    args = p.parse_args(argv)
    if args.quick:
        p.set_defaults(**QUICK)
        args = p.parse_args(argv)
    return args


def play_pass(traced: bool, args: argparse.Namespace, model, tok,
              specs: list[ScenarioSpec]) -> Pass:
    """``args.runs`` evaluation runs in one MLflow run; traced: each run's episodes logged as
    traces when it ends, flushed at the end."""
    import mlflow

    params = RolloutParams(group_size=1, max_concurrent=len(specs), max_turns=args.max_turns,
                           max_new_tokens=args.max_new_tokens,
                           max_completion_tokens=args.max_completion_tokens)
    episodes = traces = 0
    tracing = 0.0
    load = os.getloadavg()[0]
    start = time.perf_counter()
    with mlflow.start_run(run_name=f"evaluate_agents ({'traced' if traced else 'untraced'})"):
        for run in range(args.runs):
            agent = TokenSampler(model, tok, SamplingParams(
                temperature=0.0, max_new_tokens=args.max_new_tokens, batch_size=len(specs)),
                seed=args.seed + run)
            user = TokenSampler(model, tok, SamplingParams(
                temperature=0.8, top_p=0.95, max_new_tokens=args.max_new_tokens,
                batch_size=len(specs)), seed=args.seed + 1000 + run)
            engine = RolloutEngine(agent, tok, UserSimulator(user.chat, max_turns=args.max_turns),
                                   params)
            records = engine.run(specs, desc=f"run {run}")
            rows = [{"agent": f"agent-{run}", "user": "frozen",
                     **r.model_dump(mode="json", exclude=TOKENS)} for r in records]
            episodes += len(rows)
            if traced:
                t = time.perf_counter()
                traces += log_episode_traces(rows, "evaluate_agents")
                tracing += time.perf_counter() - t
        if traced:
            t = time.perf_counter()
            flush()
            tracing += time.perf_counter() - t
    return Pass(traced, time.perf_counter() - start, tracing, episodes, traces,
                (load, os.getloadavg()[0]))


def summary(passes: list[Pass]) -> dict[str, float]:
    """Pooled figures: ratio traced/untraced wall time, the direct share, ms per trace."""
    on = [p for p in passes if p.traced]
    off = [p for p in passes if not p.traced]
    on_s, off_s = sum(p.seconds for p in on), sum(p.seconds for p in off)
    tracing, traces = sum(p.tracing_seconds for p in on), sum(p.traces for p in on)
    return {"traced_seconds": on_s, "untraced_seconds": off_s, "ratio": on_s / off_s,
            "direct_share": tracing / (off_s * len(on) / len(off)),
            "ms_per_trace": 1000 * tracing / max(traces, 1), "traces_per_pass": traces / len(on),
            "episodes_per_pass": sum(p.episodes for p in on) / len(on)}


def main(argv: Sequence[str] | None = None) -> dict:
    """Run the benchmark; print the passes and the pooled figures; return (and write) them."""
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    import mlflow

    if args.tracking_uri is None:
        tracking_dir = Path(tempfile.mkdtemp(prefix="tracing-bench-", dir=args.tracking_dir))
        args.tracking_uri = f"sqlite:///{tracking_dir / 'mlflow.db'}"
    mlflow.set_tracking_uri(args.tracking_uri)
    mlflow.set_experiment("mimesis")
    envs = args.envs.split(",")
    specs = [ScenarioSpec(env=envs[i % len(envs)], seed=args.seed + i)
             for i in range(args.episodes)]
    model, tok = load_base(args.model)
    play_pass(True, argparse.Namespace(**{**vars(args), "runs": 1}), model, tok, specs[:1])
    load_before = os.getloadavg()
    passes = [play_pass(traced, args, model, tok, specs) for i in range(args.repeats)
              for traced in ((True, False) if i % 2 == 0 else (False, True))]
    figures = summary(passes)
    print(f"\nmodel {args.model}; {args.runs} runs x {args.episodes} episodes, max "
          f"{args.max_turns} turns, {args.max_new_tokens} new tokens/turn, torch threads "
          f"{torch.get_num_threads()}, load avg {load_before[0]:.1f} -> {os.getloadavg()[0]:.1f}")
    for p in passes:
        print(f"  {'traced  ' if p.traced else 'untraced'} {p.seconds:8.1f} s  tracing "
              f"{p.tracing_seconds:6.2f} s  {p.traces:4d} traces  {p.episodes} episodes  "
              f"load {p.load_avg[0]:.1f}->{p.load_avg[1]:.1f}")
    print(f"\nratio traced/untraced {figures['ratio']:.3f}; tracing calls "
          f"{100 * figures['direct_share']:.2f} % of the untraced time; "
          f"{figures['ms_per_trace']:.1f} ms per trace")
    out = {"args": {k: str(v) for k, v in vars(args).items()},
           "passes": [asdict(p) for p in passes], "figures": figures}
    if args.out:
        args.out.write_text(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
