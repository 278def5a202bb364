"""Rollout throughput: the engine vs one episode at a time vs HF ``generate``, in one process.

One model load; by default the simulator is the agent's base model behind the trained
simulator's system prompt (the format RL training uses; ``--prompted`` for the longer
prompted-baseline prompt, ``--simulator DIR`` for a frozen simulator). The same scenario list
(FunctionGym/TravelGym tasks, G episodes each) is played by every arm with the same rollout
engine; the arms differ only in what samples the agent's and the simulator's turns:

- ``engine``: :class:`~mimesis.models.engine.sampling.TokenSampler` with ``--max-concurrent`` episodes in
  flight (one agent and one simulator call per step serving every waiting episode, freed slots
  refilled from the queue), KV reuse across turns (unless ``--no-cache``), GQA attention without
  copies and ``fast_linears``;
- ``engine-no-fast-linears``: the same with ``SamplingParams.fast_linears=False``: what
  ``fast_linears`` earns (kept only at >= 1.3x);
- ``sequential``: the ``engine`` sampler at ``max_concurrent=1`` (batch 1);
- ``hf-generate``, the library baseline: the same engine and batches, each call answered by one
  left-padded ``model.generate`` on the whole batch (same sampling: temperature, top-p, no top-k;
  same per-turn limit, EOS stops a row). So it is the engine's batching with plain HF
  generation per call: every turn re-prefills the whole history, finished rows stay in the batch
  until the last one ends, and attention and linears are transformers' own. Playing the episodes
  (rather than timing ``generate`` on fixed prompts) keeps the prompt lengths, batch sizes and
  per-turn token budget of agent and simulator turns exactly those of the other arms, so the
  ratio measures only the sampler.

Generated tokens = agent + simulator tokens kept (reasoning included; an HF row's pads after its
EOS are not counted). Episodes differ between arms (sampling), so tokens/s is the fairer figure;
episodes/min is also given.

The machine may be shared: other jobs change the speed over time. ``--repeats N`` plays every
arm N times, the order reversed on every other repeat (A B C D D C B A …), so a load that drifts
steadily weighs on all arms alike (use an even N); ratios are of the arms' pooled figures (total
tokens over total seconds). Process CPU time is reported next to wall time as a check: with one
torch thread it leaves out the time the process waited for a core, though not the slowdown from
other jobs sharing memory bandwidth (seen here: the same batched pass took 64 s of CPU in one
run and 113 s in another, next to a 9 GB pipeline job).

    python benchmarks/rollout.py --model tiny-llama --quick          # seconds: a smoke check
    python benchmarks/rollout.py --threads 1 --repeats 2 --episodes 16 --out /tmp/bench.json
    python benchmarks/rollout.py --simulator data/freeze_user/simulator
    python benchmarks/rollout.py --arms engine,hf-generate            # a subset of the arms
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from collections.abc import Sequence
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
from mimesis.models.engine.sampling import Sample, SamplingParams, TokenSampler
from mimesis.rollout.engine import RolloutEngine
from mimesis.rollout.records import RolloutParams, ScenarioSpec
from mimesis.simulator.baseline import prompted_user_simulator
from mimesis.simulator.runtime import UserSimulator

ARMS = ("engine", "engine-no-fast-linears", "sequential", "hf-generate")
HF, SEQUENTIAL = "hf-generate", "sequential"
FAST_LINEARS_BAR = 1.3  # engine / engine-no-fast-linears tokens/s needed to keep fast_linears
QUICK = {"episodes": 4, "group_size": 2, "max_concurrent": 4, "max_turns": 2,
         "max_new_tokens": 8, "repeats": 1}


class HFGenerate:
    """:class:`~mimesis.models.engine.sampling.TokenGenerateFn` (and ``chat``) on plain ``model.generate``.

    Each chunk of ``params.batch_size`` prompts is one left-padded ``generate`` call with
    ``max_new_tokens`` = the chunk's largest limit; each row is then cut at its EOS and its own
    limit. Log-probs are those :class:`TokenSampler` returns (``log_softmax(logits /
    temperature)`` of the drawn token), from the raw logits ``generate`` hands back. Sampling
    draws from the global torch generator (``generate`` takes no other).
    """

    chat = TokenSampler.chat  # the same rendering of simulator chats

    def __init__(self, model, tokenizer, params: SamplingParams | None = None) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.params = params or SamplingParams()
        self.sampled_tokens = 0

    def __call__(self, prompts: Sequence[Sequence[int]],
                 max_new_tokens: Sequence[int]) -> list[Sample]:
        size = self.params.batch_size
        return [s for i in range(0, len(prompts), size)
                for s in self._generate(prompts[i:i + size], max_new_tokens[i:i + size])]

    @torch.inference_mode()
    def _generate(self, prompts: Sequence[Sequence[int]], limits: Sequence[int]) -> list[Sample]:
        tok, p = self.tokenizer, self.params
        width = max(len(x) for x in prompts)
        ids = torch.tensor([[tok.pad_token_id] * (width - len(x)) + list(x) for x in prompts])
        mask = torch.tensor([[0] * (width - len(x)) + [1] * len(x) for x in prompts])
        sampling = ({"do_sample": True, "temperature": p.temperature, "top_p": p.top_p, "top_k": 0}
                    if p.temperature > 0 else {"do_sample": False})
        out = self.model.generate(input_ids=ids.to(self.model.device),
                                  attention_mask=mask.to(self.model.device),
                                  max_new_tokens=max(limits), pad_token_id=tok.pad_token_id,
                                  eos_token_id=tok.eos_token_id, return_dict_in_generate=True,
                                  output_logits=True, **sampling)
        new = out.sequences[:, width:]
        scaled = torch.stack(out.logits, dim=1).float() / (p.temperature or 1.0)  # [rows, steps, V]
        logps = scaled.gather(-1, new[..., None])[..., 0] - torch.logsumexp(scaled, dim=-1)
        samples = []
        for row, limit in zip(new.tolist(), limits, strict=True):
            row = row[:limit]
            if tok.eos_token_id in row:
                row = row[:row.index(tok.eos_token_id) + 1]
            samples.append(Sample(row, logps[len(samples), :len(row)].tolist()))
        self.sampled_tokens += sum(len(s.ids) for s in samples)
        return samples


@dataclass
class Run:
    """Measurements of one pass of one arm over the scenarios."""

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


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2-135m", help="smollm2-135m | tiny-llama | HF folder")
    p.add_argument("--simulator", type=Path, default=None,
                   help="frozen simulator folder (default: the agent's base model)")
    p.add_argument("--prompted", action="store_true",
                   help="simulator system prompt of the prompted baseline (~2x longer) instead "
                        "of the trained simulator's, which RL training uses")
    p.add_argument("--envs", default="FunctionGym,TravelGym")
    p.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated subset of {ARMS}")
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
                   help="passes of every arm, order reversed every other pass; pooled ratios")
    p.add_argument("--quick", action="store_true",
                   help=f"smoke-check sizes (explicit flags still win): {QUICK}")
    p.add_argument("--out", "--json", type=Path, default=None, help="write the figures here")
    args = p.parse_args(argv)
    if args.quick:
        p.set_defaults(**QUICK)
        args = p.parse_args(argv)
    unknown = set(args.arms.split(",")) - set(ARMS)
    if unknown:
        p.error(f"unknown arms {sorted(unknown)}; choose from {ARMS}")
    return args


def build(args: argparse.Namespace):
    """(agent model, tokenizer, simulator model, tokenizer, simulator factory)."""
    model, tok = load_base(args.model)
    factory = prompted_user_simulator if args.prompted else UserSimulator
    if args.simulator is None:
        return model, tok, model, tok, factory
    from mimesis.simulator.frozen import load_frozen

    sim_model, sim_tok, _ = load_frozen(args.simulator)
    return model, tok, sim_model, sim_tok, factory


def play(arm: str, args, models, specs: list[ScenarioSpec]) -> Run:
    """One pass of ``arm`` (see the module docstring) over ``specs``."""
    model, tok, sim_model, sim_tok, make_sim = models
    cache = 0 if args.no_cache else 4 * args.max_concurrent
    sampling = SamplingParams(temperature=args.temperature, top_p=0.95,
                              max_new_tokens=args.max_new_tokens, batch_size=args.max_concurrent,
                              cache_entries=cache, fast_linears=arm != "engine-no-fast-linears")
    torch.manual_seed(args.seed)  # hf-generate's sampling
    if arm == HF:
        agent, user_model = HFGenerate(model, tok, sampling), HFGenerate(sim_model, sim_tok, sampling)
    else:
        agent = TokenSampler(model, tok, sampling, seed=args.seed)
        user_model = TokenSampler(sim_model, sim_tok, sampling, seed=args.seed + 1)
    params = RolloutParams(group_size=args.group_size,
                           max_concurrent=1 if arm == SEQUENTIAL else args.max_concurrent,
                           max_turns=args.max_turns, max_new_tokens=args.max_new_tokens,
                           max_completion_tokens=args.max_completion_tokens)
    engine = RolloutEngine(agent, tok, make_sim(user_model.chat, max_turns=args.max_turns), params)
    load = os.getloadavg()[0]
    start, cpu = time.perf_counter(), time.process_time()
    records = engine.run(specs, desc=arm)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    stats = engine.stats
    ends: dict[str, int] = {}
    for r in records:
        ends[r.termination] = ends.get(r.termination, 0) + 1
    reused = sum(s.cache.reused_tokens for s in (agent, user_model) if isinstance(s, TokenSampler))
    return Run(arm, seconds, cpu, len(records), agent.sampled_tokens + user_model.sampled_tokens,
               sum(r.agent_tokens for r in records), len(stats.agent_batches),
               sum(stats.agent_batches) / max(len(stats.agent_batches), 1),
               len(stats.user_batches), sum(stats.user_batches) / max(len(stats.user_batches), 1),
               reused, ends, (load, os.getloadavg()[0]))


def pooled(runs: list[Run]) -> dict[str, float]:
    """Figures of ``runs`` together: totals over total wall (and process CPU) seconds."""
    seconds, cpu = sum(r.seconds for r in runs), sum(r.cpu_seconds for r in runs)
    episodes, tokens = sum(r.episodes for r in runs), sum(r.generated_tokens for r in runs)
    return {"seconds": seconds, "cpu_seconds": cpu, "episodes_per_min": 60 * episodes / seconds,
            "tokens_per_s": tokens / seconds, "tokens_per_cpu_s": tokens / cpu,
            "mean_agent_batch": sum(r.mean_agent_batch * r.agent_calls for r in runs)
            / max(sum(r.agent_calls for r in runs), 1)}


def summary(runs: list[Run], arms: Sequence[str]) -> dict[str, dict[str, float]]:
    """Pooled figures per arm, with tokens/s ratios to the HF and sequential arms (NaN when
    that arm was not run)."""
    table = {arm: pooled([r for r in runs if r.name == arm]) for arm in arms}
    for figures in table.values():
        for ref, key in ((HF, "vs_hf"), (SEQUENTIAL, "vs_sequential")):
            base = table.get(ref)
            figures[key] = figures["tokens_per_s"] / base["tokens_per_s"] if base else math.nan
            figures[f"cpu_{key}"] = (figures["tokens_per_cpu_s"] / base["tokens_per_cpu_s"]
                                     if base else math.nan)
    return table


def markdown(table: dict[str, dict[str, float]]) -> str:
    """The pooled table as markdown (the form docs/results.md records it in)."""
    head = ("| arm | s | CPU s | episodes/min | gen tokens/s | vs HF generate | vs sequential "
            "| by CPU time: vs HF, vs sequential |")
    lines = [head, "|---|---|---|---|---|---|---|---|"]
    for arm, f in table.items():
        lines.append(f"| {arm} | {f['seconds']:.1f} | {f['cpu_seconds']:.1f} | "
                     f"{f['episodes_per_min']:.2f} | {f['tokens_per_s']:.2f} | "
                     f"{f['vs_hf']:.2f}× | {f['vs_sequential']:.2f}× | "
                     f"{f['cpu_vs_hf']:.2f}×, {f['cpu_vs_sequential']:.2f}× |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> dict:
    """Run the benchmark; print the tables; return (and write to ``--out``) the figures."""
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    arms = [a for a in ARMS if a in args.arms.split(",")]
    envs = args.envs.split(",")
    n_scenarios = max(args.episodes // args.group_size, 1)
    specs = [ScenarioSpec(env=envs[i % len(envs)], seed=args.seed + i) for i in range(n_scenarios)]
    load_before = os.getloadavg()
    models = build(args)
    # Warm-up (first-call allocations, fast_linears' weight copies) outside the timings.
    for model, tok in {id(models[0]): models[:2], id(models[2]): models[2:4]}.values():
        for sampler in (TokenSampler(model, tok), HFGenerate(model, tok)):
            sampler([tok("warm up")["input_ids"]], [4])
    runs = [play(arm, args, models, specs) for i in range(args.repeats)
            for arm in (arms if i % 2 == 0 else arms[::-1])]
    load_after = os.getloadavg()
    sim = f"{args.simulator or 'base model'}{' (prompted baseline prompt)' if args.prompted else ''}"
    print(f"\nmodel {args.model}, simulator {sim}; "
          f"{len(specs)} scenarios x G={args.group_size}, max {args.max_turns} turns, "
          f"{args.max_new_tokens} new tokens/turn, batch {args.max_concurrent}, KV reuse "
          f"{'off' if args.no_cache else 'on'}, torch threads {torch.get_num_threads()}, "
          f"load avg {load_before[0]:.1f} -> {load_after[0]:.1f}")
    print(f"{'run':<24}{'s':>8}{'cpu s':>8}{'episodes/min':>14}{'gen tok/s':>11}{'gen tok':>9}"
          f"{'agent calls':>13}{'mean batch':>12}{'user calls':>12}{'mean batch':>12}{'load':>11}")
    for r in runs:
        print(f"{r.name:<24}{r.seconds:>8.1f}{r.cpu_seconds:>8.1f}{r.episodes_per_min:>14.2f}"
              f"{r.tokens_per_s:>11.2f}{r.generated_tokens:>9}{r.agent_calls:>13}"
              f"{r.mean_agent_batch:>12.2f}{r.user_calls:>12}{r.mean_user_batch:>12.2f}"
              f"{r.load_avg[0]:>5.1f}->{r.load_avg[1]:<4.1f}  {r.terminations}")
    table = summary(runs, arms)
    print(f"\npooled over {args.repeats} pass(es) per arm (order reversed every other pass)\n")
    print(markdown(table))
    gain = None
    if "engine" in table and "engine-no-fast-linears" in table:
        gain = table["engine"]["tokens_per_s"] / table["engine-no-fast-linears"]["tokens_per_s"]
        print(f"\nfast_linears: engine / engine-no-fast-linears = {gain:.2f}x tokens/s "
              f"({'keep' if gain >= FAST_LINEARS_BAR else 'delete'}: the bar is "
              f"{FAST_LINEARS_BAR}x)")
    figures = {"args": {k: str(v) for k, v in vars(args).items()},
               "runs": [asdict(r) for r in runs], "arms": table, "fast_linears_gain": gain,
               "markdown": markdown(table), "load_avg": [load_before, load_after]}
    if args.out:
        args.out.write_text(json.dumps(figures, indent=2))
    return figures


if __name__ == "__main__":
    main()
