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

The machine may be shared: other jobs change the speed of both runs over time. ``--repeats N``
plays the pair N times in ABBA order (batched, sequential, sequential, batched, …), so a load
that drifts steadily weighs on both arms alike, and the ratios are of the arms' pooled figures
(total episodes or tokens over total seconds). Process CPU time is reported next to wall time
as a check: with one torch thread it leaves out the time the process waited for a core, though
not the slowdown from other jobs sharing memory bandwidth (seen here: the same batched pass took
64 s of CPU in one run and 113 s in another, next to a 9 GB pipeline job).

    python benchmarks/rollout.py --model tiny-llama --episodes 8     # seconds
    python benchmarks/rollout.py                                     # smollm2-135m (minutes)
    python benchmarks/rollout.py --simulator data/freeze_user/simulator
    python benchmarks/rollout.py --threads 1     # on a CPU shared with other jobs
    python benchmarks/rollout.py --threads 1 --repeats 2    # B S S B, pooled ratios
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

# isort: off
# The environment defaults first: OMP_WAIT_POLICY=PASSIVE is read once, when torch loads
# (spinning threads made a contended run ~25x slower: both arms, but not equally).
from mimesis.runtime_env import configure_environment

configure_environment()
import torch
# isort: on

from mimesis.models.base import load_base
from mimesis.rl import RolloutEngine, RolloutParams, SamplingParams, ScenarioSpec, TokenSampler
from mimesis.simulator.baseline import prompted_user_simulator
from mimesis.simulator.runtime import UserSimulator


@dataclass
class Run:
    """Measurements of one pass over the scenarios."""

    name: str
    seconds: float
    cpu_seconds: float
    episodes: int
    generated_tokens: int
    agent_tokens: int
    agent_calls: int
    mean_agent_batch: float
    user_calls: int
    mean_user_batch: float
    reused_prefix_tokens: int
    terminations: dict[str, int]
    load_avg: tuple[float, float]  # 1-minute load average before and after

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
    p.add_argument("--repeats", type=int, default=2,
                   help="pairs of runs, in ABBA order; ratios of the pooled figures")
    p.add_argument("--hf-reference", action="store_true",
                   help="also time plain HF generate on the scenarios' opening prompts at batch "
                        "--max-concurrent and at batch 1 (same model, threads, sampling, tokens): "
                        "the machine's batching headroom under the same load")
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
    load = os.getloadavg()[0]
    start, cpu = time.perf_counter(), time.process_time()
    records = engine.run(specs, desc=name)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    stats = engine.stats
    ends: dict[str, int] = {}
    for r in records:
        ends[r.termination] = ends.get(r.termination, 0) + 1
    return Run(name, seconds, cpu, len(records),
               agent.sampled_tokens + user_model.sampled_tokens,
               sum(r.agent_tokens for r in records), len(stats.agent_batches),
               sum(stats.agent_batches) / max(len(stats.agent_batches), 1),
               len(stats.user_batches), sum(stats.user_batches) / max(len(stats.user_batches), 1),
               agent.cache.reused_tokens + user_model.cache.reused_tokens, ends,
               (load, os.getloadavg()[0]))


def hf_reference(args, model, tok, specs: list[ScenarioSpec]) -> tuple[float, float]:
    """Tokens/s of plain ``model.generate`` at batch ``--max-concurrent`` and at batch 1, on the
    agent's opening prompts (G copies of each scenario's), exactly ``--max-new-tokens`` each."""
    from mimesis.envs import make

    openings = []
    for spec in specs:
        obs, _ = make(spec.env, max_turns=args.max_turns).reset(seed=spec.seed)
        text = tok.apply_chat_template([{"role": "user", "content": obs}], tokenize=False,
                                       add_generation_prompt=True)
        openings += [text] * args.group_size
    kwargs = {"do_sample": True, "temperature": args.temperature, "top_p": 0.95,
              "max_new_tokens": args.max_new_tokens, "min_new_tokens": args.max_new_tokens,
              "pad_token_id": tok.pad_token_id}
    side, tok.padding_side = tok.padding_side, "left"
    try:
        timings = {}
        for batch in (args.max_concurrent, 1):
            start = time.perf_counter()
            for i in range(0, len(openings), batch):
                inputs = tok(openings[i:i + batch], return_tensors="pt", padding=True,
                             add_special_tokens=False)
                with torch.inference_mode():
                    model.generate(**inputs, **kwargs)
            timings[batch] = len(openings) * args.max_new_tokens / (time.perf_counter() - start)
    finally:
        tok.padding_side = side
    return timings[args.max_concurrent], timings[1]


def pooled(runs: list[Run]) -> tuple[float, float, float, float]:
    """(episodes/min, tokens/s, episodes per CPU-minute, tokens per CPU-second) of ``runs``
    together."""
    seconds, cpu = sum(r.seconds for r in runs), sum(r.cpu_seconds for r in runs)
    episodes, tokens = sum(r.episodes for r in runs), sum(r.generated_tokens for r in runs)
    return 60 * episodes / seconds, tokens / seconds, 60 * episodes / cpu, tokens / cpu


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
    # Warm-up (first-call allocations, column-major weight copies) outside the timings.
    for model, tok in {id(models[0]): models[:2], id(models[2]): models[2:4]}.values():
        TokenSampler(model, tok)([tok("warm up")["input_ids"]], [4])
    runs: list[Run] = []
    for i in range(2 * args.repeats):
        batched_now = i % 4 in (0, 3)  # B S S B B S S B ...
        runs.append(play("batched" if batched_now else "sequential", args, models, specs,
                         args.max_concurrent if batched_now else 1))
    batched = [r for r in runs if r.name == "batched"]
    sequential = [r for r in runs if r.name == "sequential"]
    load_after = os.getloadavg()
    sim = f"{args.simulator or 'base model'}{' (prompted baseline prompt)' if args.prompted else ''}"
    print(f"\nmodel {args.model}, simulator {sim}; "
          f"{len(specs)} scenarios x G={args.group_size}, max {args.max_turns} turns, "
          f"{args.max_new_tokens} new tokens/turn, KV reuse {'off' if args.no_cache else 'on'}, "
          f"torch threads {torch.get_num_threads()}, load avg {load_before[0]:.1f} -> "
          f"{load_after[0]:.1f}")
    print(f"{'run':<11}{'s':>8}{'cpu s':>8}{'episodes/min':>14}{'gen tok/s':>11}{'gen tok':>9}"
          f"{'agent calls':>13}{'mean batch':>12}{'user calls':>12}{'mean batch':>12}{'load':>11}")
    for r in runs:
        print(f"{r.name:<11}{r.seconds:>8.1f}{r.cpu_seconds:>8.1f}{r.episodes_per_min:>14.2f}"
              f"{r.tokens_per_s:>11.2f}{r.generated_tokens:>9}{r.agent_calls:>13}"
              f"{r.mean_agent_batch:>12.2f}{r.user_calls:>12}{r.mean_user_batch:>12.2f}"
              f"{r.load_avg[0]:>5.1f}->{r.load_avg[1]:<4.1f}  {r.terminations}")
    b, q = pooled(batched), pooled(sequential)
    ratio_eps, ratio_tok = b[0] / q[0], b[1] / q[1]
    if args.repeats > 1:
        print(f"pooled over {args.repeats} pairs (ABBA order)")
    print(f"batched / sequential: {ratio_eps:.2f}x episodes/min, {ratio_tok:.2f}x tokens/s")
    print(f"by process CPU time:  {b[2] / q[2]:.2f}x episodes/min, {b[3] / q[3]:.2f}x tokens/s")
    reference = None
    if args.hf_reference:
        load = os.getloadavg()[0]
        reference = hf_reference(args, models[0], models[1], specs)
        print(f"plain HF generate on the opening prompts, batch {args.max_concurrent} / batch 1: "
              f"{reference[0]:.2f} / {reference[1]:.2f} tokens/s = "
              f"{reference[0] / reference[1]:.2f}x (load avg {load:.1f} -> "
              f"{os.getloadavg()[0]:.1f})")
    if args.json:
        figures = {"args": {k: str(v) for k, v in vars(args).items()},
                   "runs": [asdict(r) for r in runs],
                   "ratio_episodes_per_min": ratio_eps, "ratio_tokens_per_s": ratio_tok,
                   "ratio_cpu_episodes": b[2] / q[2], "ratio_cpu_tokens": b[3] / q[3],
                   "hf_reference_tokens_per_s": reference,
                   "load_avg": [load_before, load_after]}
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
