"""The parts of the agent RL recipe shared by ``train_agent`` and ``distill_agent``: their common
params, TRL's config, the trainer over the scenario stream, the policy a run starts from,
resumable training, and the run's summaries.

The frozen simulator is in :mod:`mimesis.users.frozen`, its guard in
:mod:`mimesis.rl.frozen_guard`; the training scenarios
in :mod:`mimesis.rollout.scenarios`.
"""

from __future__ import annotations

import json
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from mimesis.envs.registry import small_agent_env_kwargs
from mimesis.rl.frozen_guard import FrozenGuard
from mimesis.rl.grpo import HISTORY, make_rollout_func
from mimesis.rollout.records import RolloutParams
from mimesis.rollout.scenarios import ScenarioStream, scenario_specs
from mimesis.users.frozen import FrozenUser
from mimesis.users.spec import UserSamplingParams


@dataclass(frozen=True)
class DynamicSamplingParams:
    """Dynamic sampling (DAPO, Yu et al. 2025, arXiv 2503.14476, section 3.2): a group whose
    episodes all got the same reward has zero advantage everywhere and teaches nothing, so it is
    replaced by a group on a fresh training scenario of the same env, up to ``max_rounds`` extra
    rollout rounds per step; groups still flat after that stay in the batch (advantage 0)."""

    enabled: bool = True
    max_rounds: int = 0  # extra rollout rounds per optimizer step (each replays only flat groups)

    def __post_init__(self) -> None:
        if self.max_rounds < 0:
            raise ValueError("dynamic_sampling.max_rounds must be >= 0")


@dataclass(frozen=True)
class AgentRLParams:
    """Params shared by ``train_agent`` and ``distill_agent`` (one field per params.yaml key)."""

    envs: list[str] = field(default_factory=lambda: ["TravelGym", "PersuadeGym"])  # train envs
    # env -> constructor args
    env_kwargs: dict[str, dict[str, Any]] = field(default_factory=small_agent_env_kwargs)
    dtype: str = "float32"  # agent and simulator weights: float32 on CPU, bfloat16 on GPU
    steps: int = 2  # optimizer steps (one rollout of scenarios_per_step x group_size each)
    scenarios_per_step: int = 2  # scenarios per step, envs taken in turn
    group_size: int = 2  # G: episodes per scenario (the group of the advantage)
    max_turns: int = 3  # agent messages per episode (paper: 16)
    max_new_tokens: int = 48  # per agent turn
    max_completion_tokens: int = 640  # per episode: agent + injected tokens
    temperature: float = 1.0  # agent sampling temperature (also scales the trained log-probs)
    top_p: float = 1.0
    gamma: float = 0.8  # per-turn discount of the episode reward (paper: 0.8)
    clip_low: float = 0.2  # ratio clip below 1 (epsilon)
    clip_high: float = 0.28  # ratio clip above 1 (DAPO clip-higher)
    kl_beta: float = 0.0  # KL to the initial policy; 0 = none (default, no reference pass)
    iterations: int = 1  # optimisation passes per rollout (mu); clipping binds only when > 1
    learning_rate: float = 5.0e-5
    micro_batch: int = 2  # episodes per forward/backward; accumulation covers the rollout
    save_steps: int = 1  # checkpoint every N steps (resume granularity)
    keep_checkpoints: bool = False
    scenario_seed: int = 0  # seed of the first scenario (consecutive seeds after it)
    # > 0: every step replays the first N scenarios (a check that GRPO learns what it sees)
    overfit_scenarios: int = 0
    user: UserSamplingParams = field(default_factory=UserSamplingParams)
    # agent rollout tokens: cpu (TokenSampler) | vllm-colocate | vllm-server (mimesis.rl.generators)
    generator: str = "cpu"
    vllm_server_host: str = "127.0.0.1"  # vllm-server: where `trl vllm-serve` listens
    vllm_server_port: int = 8000
    vllm_gpu_memory_utilization: float = 0.3  # vllm-colocate: share of each GPU for vLLM
    dynamic_sampling: DynamicSamplingParams = field(default_factory=DynamicSamplingParams)
    mlflow_traces: int = 8  # trained episodes logged as MLflow traces (a sample); 0 = none
    seed: int = 13
    profile: str = "default"

    def __post_init__(self) -> None:
        positive = ("steps", "scenarios_per_step", "group_size", "max_turns", "max_new_tokens",
                    "max_completion_tokens", "iterations", "micro_batch", "save_steps")
        bad = [n for n in positive if getattr(self, n) < 1]
        if bad:
            raise ValueError(f"must be >= 1: {bad}")
        if self.group_size < 2:
            raise ValueError("group_size must be >= 2 (a group of one has no baseline)")
        if (self.scenarios_per_step * self.group_size) % self.micro_batch:
            raise ValueError("scenarios_per_step * group_size must be a multiple of micro_batch")
        if not 0 < self.gamma <= 1 or not 0 <= self.clip_low < 1 or self.clip_high < 0:
            raise ValueError("need 0 < gamma <= 1, 0 <= clip_low < 1, clip_high >= 0")
        if self.learning_rate <= 0 or self.kl_beta < 0 or not self.envs:
            raise ValueError("need learning_rate > 0, kl_beta >= 0 and at least one env")
        from mimesis.rl.generators import GENERATORS

        if self.generator not in GENERATORS:
            raise ValueError(f"generator must be one of {GENERATORS}, got {self.generator!r}")
        if not 0 < self.vllm_gpu_memory_utilization <= 1 or not 0 < self.vllm_server_port < 65536:
            raise ValueError("need 0 < vllm_gpu_memory_utilization <= 1 and a valid port")
        if self.overfit_scenarios < 0:
            raise ValueError("overfit_scenarios must be >= 0 (0 = off)")
        if self.overfit_scenarios and self.dynamic_sampling.enabled:
            raise ValueError("overfit_scenarios replays fixed scenarios: turn dynamic_sampling "
                             "off (it would bring fresh ones)")
        if self.dtype not in ("float32", "bfloat16", "float16"):
            raise ValueError("dtype must be float32, bfloat16 or float16")
        from mimesis.envs.registry import check_envs

        # Checked here, not when the scenarios are drawn: a typo must fail before a stage
        # clears its outputs and loads two models.
        check_envs(self.envs, "train", self.env_kwargs)


def rollout_params(p: AgentRLParams) -> RolloutParams:
    """Engine settings: every episode of a step in flight at once."""
    return RolloutParams(group_size=p.group_size,
                         max_concurrent=p.scenarios_per_step * p.group_size,
                         max_turns=p.max_turns, max_new_tokens=p.max_new_tokens,
                         max_completion_tokens=p.max_completion_tokens)


def grpo_config(p: AgentRLParams, ckpt_dir: Path, max_completion_length: int):
    """TRL ``GRPOConfig``: one rollout of ``scenarios × G`` episodes per optimizer step, split
    into ``micro_batch`` forward/backward passes (CPU-safe: fp32, no gradient checkpointing);
    a ``vllm-*`` generator turns on TRL's vLLM engine (:func:`~mimesis.rl.generators.vllm_config`).

    Under ``accelerate launch`` every process plays its own ``scenarios × G`` episodes per step
    (whole groups per process), so the global batch grows with the number of processes."""
    from trl import GRPOConfig

    from mimesis.rl.generators import vllm_config

    episodes = p.scenarios_per_step * p.group_size
    return GRPOConfig(
        output_dir=str(ckpt_dir), max_steps=p.steps, learning_rate=p.learning_rate,
        lr_scheduler_type="constant", weight_decay=0.0, per_device_train_batch_size=p.micro_batch,
        gradient_accumulation_steps=episodes // p.micro_batch, num_generations=p.group_size,
        num_iterations=p.iterations, temperature=p.temperature, top_p=p.top_p,
        max_completion_length=max_completion_length, beta=p.kl_beta, epsilon=p.clip_low,
        epsilon_high=p.clip_high, loss_type="dapo", scale_rewards="group",
        mask_truncated_completions=False, disable_dropout=True, shuffle_dataset=False,
        logging_steps=1, save_strategy="steps", save_steps=p.save_steps, save_total_limit=2,
        report_to="none", bf16=p.dtype == "bfloat16", gradient_checkpointing=False,
        use_cpu=not torch.cuda.is_available(), seed=p.seed, data_seed=p.seed,
        dataloader_num_workers=0, log_completions=False, remove_unused_columns=False,
        **vllm_config(p))


def build_trainer(trainer_cls, model, tokenizer, p: AgentRLParams, user: FrozenUser,
                  ckpt_dir: Path, callbacks: list, peft_config=None, simulator=None,
                  **kwargs: Any):
    """A :class:`~mimesis.rl.grpo.TurnCreditGRPOTrainer` (or subclass) over the scenarios of ``p``.

    Args:
        user: The frozen simulator: the user of the rollouts unless ``simulator`` is given, and
            always watched by :class:`FrozenGuard`.
        simulator: The training user (:func:`mimesis.users.factory.make_user`:
            the frozen simulator, the prompted base model or an OpenAI-compatible endpoint);
            default ``user.simulator``.
        kwargs: Go to the trainer class.

    Under ``accelerate launch`` the dataset holds every process's scenarios (``WORLD_SIZE`` ×
    ``steps × scenarios_per_step``), so each process plays ``scenarios_per_step`` per step.

    The trainer gets ``scenario_stream`` (a :class:`ScenarioStream`), whose ``drawn`` counts
    the scenarios played including dynamic sampling's replacements.
    """
    from mimesis.rl.generators import require_generator
    from mimesis.rl.ranks import world_size
    from mimesis.rl.trl_rollout import env_reward, scenario_dataset

    require_generator(p.generator)
    rollout = rollout_params(p)
    stream = ScenarioStream(p)
    ds = p.dynamic_sampling
    func = make_rollout_func(simulator or user.simulator, rollout, progress=True,
                             fresh=stream.fresh if ds.enabled else None,
                             max_rounds=ds.max_rounds if ds.enabled else 0,
                             generator=p.generator)
    model.train()
    with warnings.catch_warnings():  # known: TRL marks rollout_func experimental
        warnings.filterwarnings("ignore", message="You are using 'rollout_func'")
        trainer = trainer_cls(model=model, reward_funcs=[env_reward],
                              args=grpo_config(p, ckpt_dir, rollout.max_completion_tokens),
                              train_dataset=scenario_dataset(scenario_specs(
                                  p, p.steps * p.scenarios_per_step * world_size())),
                              processing_class=tokenizer, peft_config=peft_config,
                              rollout_func=func, callbacks=[FrozenGuard(user), *callbacks],
                              gamma=p.gamma, **kwargs)
    trainer.scenario_stream = stream
    return trainer


def train(trainer, resume: str | None) -> dict[str, Any]:
    """Run (or resume) training; returns timing figures. A resumed run gets the reward history
    saved in its checkpoint."""
    if resume and (Path(resume) / HISTORY).exists():
        trainer.history = json.loads((Path(resume) / HISTORY).read_text())
        stream = getattr(trainer, "scenario_stream", None)
        drawn = [row["scenarios_drawn"] for row in trainer.history if "scenarios_drawn" in row]
        if stream is not None and drawn:  # replacements continue where the run stopped
            stream.drawn = int(drawn[-1])
    started = time.perf_counter()
    result = trainer.train(resume_from_checkpoint=resume)
    stream = getattr(trainer, "scenario_stream", None)
    return {"train_seconds": round(time.perf_counter() - started, 1),
            "train_loss": result.training_loss, "steps": trainer.state.global_step,
            "resumed_from": Path(resume).name if resume else None,
            "scenarios_drawn": stream.drawn if stream is not None else None,
            **signal_summary(trainer.history)}


def signal_summary(history: list[dict[str, float]]) -> dict[str, float]:
    """Over the run: the share of groups with reward variance before dynamic sampling (raw) and
    in the trained batches (kept), and the share of agent turns in the tagged action format."""
    played = sum(row.get("groups/played", 0) for row in history)
    first = sum(row.get("groups/first_round", 0) for row in history)
    out: dict[str, float] = {}
    if first:
        out["raw_signal_frac"] = sum(row.get("groups/raw_signal", 0) for row in history) / first
        out["kept_signal_frac"] = (sum(row.get("groups/kept_signal", 0) for row in history)
                                   / first)
        out["groups_played"] = played
    turns = [row["format_compliance"] for row in history if "format_compliance" in row]
    if turns:
        out["format_compliance"] = sum(turns) / len(turns)
    return out


def reward_summary(history: list[dict[str, float]]) -> dict[str, float]:
    """First- and last-step mean reward, overall and per environment."""
    if not history:
        return {}
    out: dict[str, float] = {}
    for key in sorted({k for row in history for k in row if k.startswith("reward")}):
        values = [row[key] for row in history if key in row]
        out[f"{key}/first"], out[f"{key}/last"] = values[0], values[-1]
    return out


def load_start_policy(stage_dir: Path | None, user: FrozenUser, p):
    """The trainable policy an RL stage starts from.

    Args:
        stage_dir: An agent stage output (``model/`` LoRA adapter + ``meta.json``, e.g.
            ``data/sft_agent``): its adapter on its base model, trainable. ``None``: the base
            model ``p.base_model`` with a fresh adapter (``p.lora``, built by TRL).
        user: The frozen simulator; the start adapter must have been made against it.
        p: The stage's params (``dtype``; ``base_model`` and ``lora`` without a start).

    Returns:
        ``(model, tokenizer, start)``; ``start`` has ``name`` (the stage it came from, or
        ``base``), ``base_model`` and ``peft_config`` (for the trainer; ``None`` when the
        model already carries the adapter).

    Raises:
        mimesis.models.merge.StaleTrainingError: the adapter files differ from ``meta.json``,
            it was made against another simulator, or its base resolves to another folder.
    """
    from mimesis.models.base import base_dir, load_base
    from mimesis.models.merge import StaleTrainingError, adapter_sha256

    if stage_dir is None:
        model, tokenizer = load_base(p.base_model, dtype=p.dtype)
        return model, tokenizer, {"name": "base", "base_model": p.base_model,
                                  "peft_config": p.lora.peft_config()}
    from peft import PeftModel

    meta = json.loads((Path(stage_dir) / "meta.json").read_text())
    model_dir = Path(stage_dir) / "model"
    if adapter_sha256(model_dir) != meta.get("weights"):
        raise StaleTrainingError(f"{model_dir} does not match {Path(stage_dir) / 'meta.json'}")
    recorded = (meta.get("simulator") or {}).get("weights_fingerprint")
    if recorded != user.fingerprint:
        raise StaleTrainingError(f"{stage_dir} was made against another simulator: re-run it")
    found = base_dir(meta["base_model"]).name
    if found != meta.get("base_model_dir"):
        raise StaleTrainingError(f"base model {meta['base_model']!r} resolves to {found}, "
                                 f"{stage_dir} used {meta.get('base_model_dir')}")
    base, tokenizer = load_base(meta["base_model"], dtype=p.dtype)
    model = PeftModel.from_pretrained(base, str(model_dir), is_trainable=True)
    return model, tokenizer, {"name": meta.get("stage", Path(stage_dir).name),
                              "base_model": meta["base_model"], "peft_config": None}
