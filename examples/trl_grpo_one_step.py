"""One GRPO step with TRL's ``GRPOTrainer`` against the frozen user simulator.

The policy plays ``--env`` (a registered environment, default TravelGym) with the frozen
simulator as the user, through :func:`mimesis.integrations.trl.frozen_user_rollout`; the user's
and tools' tokens are masked out of the loss (``env_mask``), the environment's reward is the GRPO
reward. Writes ``<output-dir>/summary.json`` (step, loss, mean env reward, terminations).

Run (CPU, the tiny random policy; a real run passes ``--policy smollm2-135m`` or a folder)::

    TRL_EXPERIMENTAL_SILENCE=1 python examples/trl_grpo_one_step.py \\
        --simulator data/freeze_user/simulator --output-dir /tmp/grpo-one-step
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--simulator", type=Path, required=True, help="frozen simulator folder")
    ap.add_argument("--policy", default="tiny-llama",
                    help="tiny-llama, smollm2-135m or a local HF folder")
    ap.add_argument("--env", default="TravelGym", help="registered environment")
    ap.add_argument("--output-dir", type=Path, default=Path("grpo-one-step"))
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--scenarios", type=int, default=2, help="dataset rows (one scenario each)")
    ap.add_argument("--num-generations", type=int, default=2, help="episodes per scenario (G)")
    ap.add_argument("--max-turns", type=int, default=2, help="agent turns per episode")
    ap.add_argument("--max-new-tokens", type=int, default=16, help="tokens per agent turn")
    ap.add_argument("--user-max-new-tokens", type=int, default=24, help="tokens per user turn")
    ap.add_argument("--trust-folder", action="store_true",
                    help="accept a freeze_user folder without registry.json")
    args = ap.parse_args(argv)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is experimental

    import torch
    from trl import GRPOConfig, GRPOTrainer

    from mimesis.integrations.trl import env_reward, frozen_user_rollout, scenario_prompts
    from mimesis.models.base import load_base
    from mimesis.rollout.records import RolloutParams

    policy, tokenizer = load_base(args.policy)
    rollout = frozen_user_rollout(
        args.simulator,
        RolloutParams(max_turns=args.max_turns, max_new_tokens=args.max_new_tokens,
                      max_completion_tokens=512),
        max_turns=args.max_turns, max_new_tokens=args.user_max_new_tokens,
        trust_folder=args.trust_folder)
    config = GRPOConfig(
        output_dir=str(args.output_dir), max_steps=args.steps, learning_rate=1e-5,
        per_device_train_batch_size=args.scenarios * args.num_generations,
        num_generations=args.num_generations, temperature=1.0, report_to="none",
        bf16=False, use_cpu=not torch.cuda.is_available(), gradient_checkpointing=False,
        save_strategy="no", logging_steps=1)
    trainer = GRPOTrainer(model=policy, processing_class=tokenizer, args=config,
                          reward_funcs=[env_reward],
                          train_dataset=scenario_prompts(args.env, count=args.scenarios),
                          rollout_func=rollout)
    trainer.train()
    logs = next(h for h in trainer.state.log_history if "loss" in h)
    summary = {"global_step": trainer.state.global_step, "loss": logs["loss"],
               "env_reward_mean": logs.get("rewards/env_reward/mean"),
               "completion_length_mean": logs.get("completions/mean_length")}
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
