"""GPU check of the scaled agent RL path: no network, random weights.

Builds a randomly initialised Llama of realistic size (default ~1.2B parameters) from a config,
saves it as the agent base and as a frozen-simulator stand-in, serves the simulator with
``mimesis serve``-style episodes in this process (transformers backend on loopback), and runs a
few GRPO steps twice — agent rollouts from the transformers sampler (``generator: cpu``), then
from TRL's colocated vLLM (``generator: vllm-colocate``) — printing rollout tokens/s, step time
and peak GPU memory for each. Run: ``bash scripts/gpu_check.sh`` (exits 2 without CUDA).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path


def build_model(out_dir: Path, hidden: int, layers: int) -> Path:
    """A random Llama (bf16) with the tiny test tokenizer's vocabulary, saved to ``out_dir``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from mimesis.models.base import load_base

    _, tokenizer = load_base("tiny-llama")
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=hidden,
                         intermediate_size=hidden * 4, num_hidden_layers=layers,
                         num_attention_heads=hidden // 128, num_key_value_heads=8,
                         max_position_embeddings=4096, torch_dtype="bfloat16",
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    print(f"model: {sum(p.numel() for p in model.parameters()) / 1e9:.2f}B parameters")
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir


def measure(generator: str, model_dir: Path, user_url: str, steps: int, work: Path) -> dict:
    """``steps`` GRPO steps with ``generator``; rollout tokens/s, step seconds, peak memory."""
    import torch

    from mimesis.models.base import load_base
    from mimesis.models.lora import LoraParams
    from mimesis.rl import agent_training as rl
    from mimesis.rl.agent_training import AgentRLParams
    from mimesis.rl.grpo import TurnCreditGRPOTrainer
    from mimesis.users.factory import make_user
    from mimesis.users.frozen import FrozenUser, weights_fingerprint
    from mimesis.users.spec import UserSamplingParams, UserSpec

    p = AgentRLParams(envs=["FunctionGym"], dtype="bfloat16", steps=steps, scenarios_per_step=4,
                      group_size=4, max_turns=4, max_new_tokens=128, max_completion_tokens=1024,
                      micro_batch=4, generator=generator, user=UserSamplingParams(
                          max_new_tokens=64))
    torch.cuda.reset_peak_memory_stats()
    model, tok = load_base(str(model_dir), dtype="bfloat16")
    model.to("cuda")
    guard = FrozenUser(None, torch.nn.Linear(1, 1), tok, {}, weights_fingerprint(
        torch.nn.Linear(1, 1)), model_dir)
    spec = UserSpec(name="served", kind="served", base_url=user_url, api_key_env="")
    user = make_user(spec.with_sampling(p.user, dtype=p.dtype, seed=p.seed), frozen=guard,
                     max_turns=p.max_turns)
    trainer = rl.build_trainer(TurnCreditGRPOTrainer, model, tok, p, guard, work / generator,
                               [], peft_config=LoraParams(dropout=0.0).peft_config(),
                               simulator=user)
    started = time.perf_counter()
    rl.train(trainer, None)
    seconds = time.perf_counter() - started
    tokens = sum(len(ep.completion_ids) for _, ep in trainer.episodes
                 if getattr(ep, "completion_ids", None))
    rollout = sum(v for row in trainer.state.log_history for k, v in row.items()
                  if k.startswith("profiling/Time taken") and "rollout" in k.lower())
    return {"generator": generator, "steps": steps, "step_seconds": round(seconds / steps, 2),
            "rollout_tokens_per_s": round(tokens / max(rollout or seconds, 1e-9), 1),
            "peak_memory_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--layers", type=int, default=16)
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("gpu_check: no CUDA device visible; this check needs a GPU machine", file=sys.stderr)
        return 2
    from mimesis.rl.generators import require_generator

    require_generator("vllm-colocate")  # clear error when vLLM is missing
    from mimesis.serve.backends import TransformersBackend
    from mimesis.serve.batching import BatchingSimulator
    from mimesis.serve.config import ServeConfig

    work = Path(tempfile.mkdtemp(prefix="gpu_check-"))
    model_dir = build_model(work / "model", args.hidden, args.layers)
    from mimesis.models.base import load_base

    sim, sim_tok = load_base(str(model_dir), dtype="bfloat16")
    served = BatchingSimulator(TransformersBackend(sim.to("cuda").eval(), sim_tok, batch_size=64),
                               max_turns=4)
    from mimesis.serve.app import create_app
    from mimesis.serve.local import serve_in_thread

    with serve_in_thread(create_app(served, ServeConfig())) as url:
        rows = [measure(g, model_dir, url, args.steps, work) for g in ("cpu", "vllm-colocate")]
    for row in rows:
        print(json.dumps(row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
