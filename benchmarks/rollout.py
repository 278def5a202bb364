"""Throughput of the batched rollout engine vs one episode at a time, on the same model and scenarios.

One process, one model load; by default the simulator is the agent's base model behind the
trained simulator's system prompt (the format RL training uses; ``--prompted`` for the longer
prompted-baseline prompt, ``--simulator DIR`` for a frozen simulator). The same scenario list (FunctionGym/TravelGym tasks, G episodes
each) is played twice with the same code: batched (``--max-concurrent`` episodes in flight, one
agent call and one simulator call per step serving every waiting episode, freed slots refilled
from the queue) and sequential (``max_concurrent=1``: one episode at a time, batch 1). Both use
KV-cache reuse across turns unless ``--no-cache``. Generated tokens = agent + simulator tokens
sampled (reasoning included); episodes differ between the two runs (sampling), so tokens/s is
the fairer figure, episodes/min is also given.

    python benchmarks/rollout.py --model tiny-llama --episodes 8     # seconds
    python benchmarks/rollout.py                                     # smollm2-135m (minutes)
    python benchmarks/rollout.py --simulator data/freeze_user/simulator
    python benchmarks/rollout.py --threads 1     # on a CPU shared with other jobs
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from mimesis.models.base import load_base
from mimesis.rl import RolloutEngine, RolloutParams, SamplingParams, ScenarioSpec, TokenSampler
from mimesis.simulator.baseline import prompted_user_simulator
from mimesis.simulator.runtime import UserSimulator


@dataclass
class Run:
    """Measurements of one pass over the scenarios."""

    name: str
    seconds: float
    episodes: int
    generated_tokens: int
    agent_tokens: int
    agent_calls: int
    mean_agent_batch: float
    user_calls: int
    mean_user_batch: float
    reused_prefix_tokens: int
    terminations: dict[str, int]

    @property
    def episodes_per_min(self) -> float:
        return 60 * self.episodes / self.seconds

    @property
    def tokens_per_s(self) -> float:
        return self.generated_tokens / self.seconds


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2-135m", help="smollm2-135m | tiny-llama | HF folder")
    p.add_argument("--simulator", type=Path, default=None,
                   help="frozen simulator folder (default: the agent's base model)")
    p.add_argument("--prompted", action="store_true",
                   help="simulator system prompt of the prompted baseline (~2x longer) instead "
                        "of the trained simulator's, which RL training uses")
    p.add_argument("--envs", default="FunctionGym,TravelGym")
    p.add_argument("--episodes", type=int, default=16)
    p.add_argument("--group-size", type=int, default=2)
    p.add_argument("--max-concurrent", type=int, default=16)
    p.add_argument("--max-turns", type=int, default=3)
    p.add_argument("--max-new-tokens", type=int, default=48, help="per agent and per user turn")
    p.add_argument("--max-completion-tokens", type=int, default=1024)
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--no-cache", action="store_true", help="no KV reuse across turns")
    p.add_argument("--threads", type=int, default=0,
                   help="torch threads (0 = torch's default). On a shared CPU use 1: with both "
                        "cores busy, 2 OpenMP threads spin-wait and decode ~15x slower")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path, default=None, help="write the figures here")
    return p.parse_args()


def build(args: argparse.Namespace):
    """(agent model, tokenizer, simulator model, tokenizer, simulator factory)."""
    model, tok = load_base(args.model)
    factory = prompted_user_simulator if args.prompted else UserSimulator
    if args.simulator is None:
        return model, tok, model, tok, factory
    from mimesis.simulator.frozen import load_frozen

    sim_model, sim_tok, _ = load_frozen(args.simulator)
    return model, tok, sim_model, sim_tok, factory


def play(name: str, args, models, specs: list[ScenarioSpec], max_concurrent: int) -> Run:
    model, tok, sim_model, sim_tok, make_sim = models
    cache = 0 if args.no_cache else 4 * args.max_concurrent
    sampling = SamplingParams(temperature=args.temperature, top_p=0.95,
                              max_new_tokens=args.max_new_tokens, batch_size=args.max_concurrent,
                              cache_entries=cache)
    agent = TokenSampler(model, tok, sampling, seed=args.seed)
    user_model = TokenSampler(sim_model, sim_tok, sampling, seed=args.seed + 1)
    params = RolloutParams(group_size=args.group_size, max_concurrent=max_concurrent,
                           max_turns=args.max_turns, max_new_tokens=args.max_new_tokens,
                           max_completion_tokens=args.max_completion_tokens)
    engine = RolloutEngine(agent, tok, make_sim(user_model.chat, max_turns=args.max_turns), params)
    start = time.perf_counter()
    records = engine.run(specs, desc=name)
    seconds = time.perf_counter() - start
    stats = engine.stats
    ends: dict[str, int] = {}
    for r in records:
        ends[r.termination] = ends.get(r.termination, 0) + 1
    return Run(name, seconds, len(records), agent.sampled_tokens + user_model.sampled_tokens,
               sum(r.agent_tokens for r in records), len(stats.agent_batches),
               sum(stats.agent_batches) / max(len(stats.agent_batches), 1),
               len(stats.user_batches), sum(stats.user_batches) / max(len(stats.user_batches), 1),
               agent.cache.reused_tokens + user_model.cache.reused_tokens, ends)


def main() -> None:
    args = parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    envs = args.envs.split(",")
    n_scenarios = max(args.episodes // args.group_size, 1)
    specs = [ScenarioSpec(env=envs[i % len(envs)], seed=args.seed + i) for i in range(n_scenarios)]
    load_before = os.getloadavg()
    models = build(args)
    # Warm-up (first-call allocations) outside the timings.
    TokenSampler(models[0], models[1])([models[1]("warm up")["input_ids"]], [4])
    batched = play("batched", args, models, specs, args.max_concurrent)
    sequential = play("sequential", args, models, specs, 1)
    load_after = os.getloadavg()
    sim = f"{args.simulator or 'base model'}{' (prompted baseline prompt)' if args.prompted else ''}"
    print(f"\nmodel {args.model}, simulator {sim}; "
          f"{len(specs)} scenarios x G={args.group_size}, max {args.max_turns} turns, "
          f"{args.max_new_tokens} new tokens/turn, KV reuse {'off' if args.no_cache else 'on'}, "
          f"torch threads {torch.get_num_threads()}, load avg {load_before[0]:.1f} -> "
          f"{load_after[0]:.1f}")
    print(f"{'run':<11}{'s':>8}{'episodes/min':>14}{'gen tok/s':>11}{'gen tok':>9}"
          f"{'agent calls':>13}{'mean batch':>12}{'user calls':>12}{'mean batch':>12}")
    for r in (batched, sequential):
        print(f"{r.name:<11}{r.seconds:>8.1f}{r.episodes_per_min:>14.2f}{r.tokens_per_s:>11.2f}"
              f"{r.generated_tokens:>9}{r.agent_calls:>13}{r.mean_agent_batch:>12.2f}"
              f"{r.user_calls:>12}{r.mean_user_batch:>12.2f}  {r.terminations}")
    ratio_eps = batched.episodes_per_min / sequential.episodes_per_min
    ratio_tok = batched.tokens_per_s / sequential.tokens_per_s
    print(f"batched / sequential: {ratio_eps:.2f}x episodes/min, {ratio_tok:.2f}x tokens/s")
    if args.json:
        figures = {"args": {k: str(v) for k, v in vars(args).items()},
                   "runs": [asdict(batched), asdict(sequential)],
                   "ratio_episodes_per_min": ratio_eps, "ratio_tokens_per_s": ratio_tok,
                   "load_avg": [load_before, load_after]}
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
