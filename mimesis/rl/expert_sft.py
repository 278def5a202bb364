"""The parts of ``sft_agent`` that are not the recipe: expert rollouts, the keep/reject triage,
the trace files and counts, and the supervised fine-tuning set and trainer.

Triage (:func:`triage`): an expert episode is kept only when it reaches its env's success
threshold (:func:`mimesis.envs.registry.success_threshold`, or ``min_reward`` when set) and
ends by a decision of the agent or the user. Every other episode is rejected with one reason,
checked in this order: ``truncated`` (turn or token budget), ``turn_cut`` (an agent turn hit
``max_new_tokens`` and lost its end-of-turn token, so it is not a complete target),
``user_ended`` (the user ended below the threshold), ``below_threshold``.

SFT examples (:func:`sft_rows`): ``input_ids = prompt_ids + completion_ids`` and
``completion_mask = [0] * len(prompt_ids) + env_mask`` — the loss is on the agent's tokens only,
exactly the tokens RL trains (user, tool and template tokens are context). TRL's
``SFTTrainer`` builds ``labels`` from ``completion_mask`` (``completion_only_loss``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from mimesis.io import sha256_file, write_jsonl
from mimesis.rollout.records import Episode, RolloutParams

_TOKENS = {"prompt_ids", "completion_ids", "env_mask", "logprobs", "turn_ids"}
REASONS = ("truncated", "turn_cut", "user_ended", "below_threshold")


def rl_params(p):
    """The :class:`~mimesis.rl.agent_training.AgentRLParams` view of ``p`` that the shared
    helpers read (``load_user``: dtype, user sampling, seed, turns; ``scenario_specs``: envs,
    seeds): one step of ``len(envs) × scenarios_per_env`` scenarios, envs in turn. Building it
    also refuses unknown and held-out envs."""
    from mimesis.rl.agent_training import AgentRLParams

    return AgentRLParams(
        envs=list(p.envs), env_kwargs=dict(p.env_kwargs), dtype=p.dtype, steps=1,
        scenarios_per_step=len(p.envs) * p.scenarios_per_env,
        group_size=max(2, p.episodes_per_scenario), max_turns=p.max_turns,
        max_new_tokens=p.max_new_tokens, max_completion_tokens=p.max_completion_tokens,
        micro_batch=1, scenario_seed=p.scenario_seed, user=p.user, seed=p.seed,
        profile=p.profile)


def play_experts(user, tokenizer, p, progress: bool = True) -> list[Episode]:
    """``episodes_per_scenario`` expert episodes of every training scenario of ``p``, against
    ``user`` (a :class:`~mimesis.users.frozen.FrozenUser`), encoded with the agent's
    ``tokenizer``; returned in scenario order."""
    from mimesis.rl.experts import ExpertPolicy
    from mimesis.rollout.engine import RolloutEngine
    from mimesis.rollout.scenarios import scenario_specs

    params = RolloutParams(group_size=p.episodes_per_scenario, max_concurrent=p.max_concurrent,
                           max_turns=p.max_turns, max_new_tokens=p.max_new_tokens,
                           max_completion_tokens=p.max_completion_tokens)
    engine = RolloutEngine(ExpertPolicy(), tokenizer, user.simulator, params, progress=progress)
    return engine.run(scenario_specs(rl_params(p)), desc="sft_agent: expert episodes")


@dataclass
class Traces:
    """Kept episodes, rejected ones (record + reason), and the threshold used per env."""

    kept: list[Episode] = field(default_factory=list)
    rejected: list[tuple[Episode, str]] = field(default_factory=list)
    thresholds: dict[str, float] = field(default_factory=dict)

    def counts(self) -> dict[str, Any]:
        """``played = kept + rejected`` overall and per env, rejects by reason."""
        envs = list(dict.fromkeys([e.env for e in self.kept] + [e.env for e, _ in self.rejected]))
        by_env = {}
        for env in envs:
            kept = sum(e.env == env for e in self.kept)
            reasons = Counter(r for e, r in self.rejected if e.env == env)
            by_env[env] = {"played": kept + sum(reasons.values()), "kept": kept,
                           "rejected": {r: reasons.get(r, 0) for r in REASONS},
                           "threshold": self.thresholds[env]}
        kept, rejected = len(self.kept), len(self.rejected)
        return {"played": kept + rejected, "kept": kept, "rejected": rejected, "by_env": by_env}


def reject_reason(e: Episode, eos_id: int, threshold: float) -> str | None:
    """Why ``e`` is not a training trace (module docstring), or ``None`` when it is one."""
    if e.truncated:
        return "truncated"
    ends = [i for i, (m, n) in enumerate(zip(e.env_mask, [*e.env_mask[1:], 0], strict=True))
            if m == 1 and n == 0]
    if any(e.completion_ids[i] != eos_id for i in ends):
        return "turn_cut"
    if e.reward < threshold - 1e-9:
        return "user_ended" if e.termination == "user_end" else "below_threshold"
    return None


def triage(episodes: list[Episode], eos_id: int, min_reward: float | None) -> Traces:
    """Split ``episodes`` into kept traces and rejects (module docstring)."""
    from mimesis.envs.registry import success_threshold

    out = Traces()
    for e in episodes:
        if e.env not in out.thresholds:
            out.thresholds[e.env] = success_threshold(e.env) if min_reward is None else min_reward
        reason = reject_reason(e, eos_id, out.thresholds[e.env])
        if reason is None:
            out.kept.append(e)
        else:
            out.rejected.append((e, reason))
    return out


def write_traces(out_dir: Path, traces: Traces) -> str:
    """``traces.jsonl`` (kept episodes) and ``rejects.jsonl`` (the others, with ``reason`` and
    ``threshold``), without token lists, also logged to the active MLflow run; returns the
    sha256 of ``traces.jsonl``."""
    def row(e: Episode) -> dict[str, Any]:
        return e.model_dump(mode="json", exclude=_TOKENS)

    import mlflow

    write_jsonl(out_dir / "traces.jsonl", [row(e) for e in traces.kept])
    write_jsonl(out_dir / "rejects.jsonl", [
        {"reason": r, "threshold": traces.thresholds[e.env], **row(e)} for e, r in traces.rejected])
    if mlflow.active_run() is not None:
        mlflow.log_artifact(str(out_dir / "traces.jsonl"))
        mlflow.log_artifact(str(out_dir / "rejects.jsonl"))
    return sha256_file(out_dir / "traces.jsonl")


def report_traces(traces: Traces) -> dict[str, Any]:
    """Log kept/played per env to MLflow (when a run is active), warn about envs without a kept
    trace; returns :meth:`Traces.counts`.

    Raises:
        ValueError: no episode was kept at all.
    """
    import mlflow

    counts = traces.counts()
    for env, c in counts["by_env"].items():
        if c["kept"] == 0:
            print(f"sft_agent: {env}: 0 of {c['played']} expert episodes reached the success "
                  f"threshold {c['threshold']} (rejected: {c['rejected']}); no traces for it")
    if mlflow.active_run() is not None:
        metrics = {"traces/played": counts["played"], "traces/kept": counts["kept"]}
        for env, c in counts["by_env"].items():
            metrics |= {f"traces/played/{env}": c["played"], f"traces/kept/{env}": c["kept"]}
        mlflow.log_metrics({k: float(v) for k, v in metrics.items()})
    if not traces.kept:
        raise ValueError(f"sft_agent: none of the {counts['played']} expert episodes reached its "
                         f"env's success threshold; nothing to train on (by env: "
                         f"{ {e: c['rejected'] for e, c in counts['by_env'].items()} })")
    return counts


def sft_rows(episodes: list[Episode]) -> list[dict[str, list[int]]]:
    """One pre-tokenised example per episode: ``input_ids`` and ``completion_mask`` (1 exactly
    on the agent's tokens, ``env_mask``)."""
    return [{"input_ids": [*e.prompt_ids, *e.completion_ids],
             "completion_mask": [0] * len(e.prompt_ids) + list(e.env_mask)} for e in episodes]


def build_trainer(model, tokenizer, episodes: list[Episode], p, ckpt_dir: Path,
                  callbacks: list):
    """TRL ``SFTTrainer`` (the model's own masked NLL, :class:`mimesis.train.sft.
    PlainLossSFTTrainer`) with a LoRA adapter (``p.lora``) over :func:`sft_rows` of
    ``episodes``; CPU-safe (fp32 unless ``p.dtype`` is bf16, no gradient checkpointing)."""
    from datasets import Dataset
    from trl import SFTConfig

    from mimesis.train.sft import PlainLossSFTTrainer

    args = SFTConfig(
        output_dir=str(ckpt_dir), completion_only_loss=True, assistant_only_loss=False,
        max_length=None, per_device_train_batch_size=p.batch_size,
        gradient_accumulation_steps=p.grad_accum, num_train_epochs=p.epochs,
        max_steps=p.max_steps or -1,
        learning_rate=p.learning_rate, lr_scheduler_type="cosine", weight_decay=0.0,
        logging_steps=1, save_strategy="steps", save_steps=p.save_steps, save_total_limit=2,
        eval_strategy="no", gradient_checkpointing=False, bf16=p.dtype == "bfloat16",
        report_to="none", seed=p.seed, data_seed=p.seed, use_cpu=not torch.cuda.is_available(),
        dataloader_num_workers=0, disable_tqdm=False,
        # batches of similar length: a TauGym trace is ~3x the others, padding to it is waste
        train_sampling_strategy="group_by_length" if len(episodes) > p.batch_size else "random")
    model.train()
    return PlainLossSFTTrainer(model=model, args=args,
                               train_dataset=Dataset.from_list(sft_rows(episodes)),
                               processing_class=tokenizer, peft_config=p.lora.peft_config(),
                               callbacks=callbacks)


def report_training(trainer, tokenizer) -> None:
    """MLflow: the loss plot and one training sequence with its loss mask made visible."""
    import matplotlib.pyplot as plt
    import mlflow

    from mimesis.train.reporting import loss_figure, render_mask

    if mlflow.active_run() is None:
        return
    fig = loss_figure(trainer.state.log_history)
    fig.axes[0].set_title("sft_agent: agent SFT on expert traces")
    fig.axes[0].set_ylabel("mean token NLL (nats), agent turns only")
    mlflow.log_figure(fig, "loss.png")
    plt.close(fig)
    example = trainer.train_dataset[0]
    mlflow.log_text(render_mask(tokenizer, example["input_ids"], example["labels"]),
                    "train_example.txt")

