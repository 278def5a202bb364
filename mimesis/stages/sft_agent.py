"""Stage ``sft_agent``: supervised warm-up of the agent on successful expert traces.

Reads ``<freeze_user_dir>/simulator`` (every file's sha256 checked against its ``meta.json``
before anything loads). Scripted experts (:mod:`mimesis.rl.experts`: they see only what an agent
sees) play ``episodes_per_scenario`` episodes of ``scenarios_per_env`` training scenarios of each
env against the frozen simulator, through the rollout engine that RL uses; the episodes that
reach their env's success threshold (or ``min_reward``; the CPU default keeps every complete
episode, because its 135M simulator lets no expert succeed) are kept, the others rejected with a
reason (:mod:`mimesis.rl.expert_sft`). The agent's base model is then fine-tuned on them (TRL
``SFTTrainer``, LoRA), the loss on the agent's tokens only (``env_mask``, the mask RL trains).
Without this warm-up a small agent never emits a tagged action and every GRPO reward is 0
(docs/pitfalls.md #11).

Writes to ``<out_dir>``: ``model/`` (LoRA adapter + tokenizer; ``train_agent`` and
``distill_agent`` start from it), ``meta.json`` (the keys of ``train_agent``'s, plus trace
counts), ``traces.jsonl`` (kept episodes, no token lists), ``rejects.jsonl`` (every other
episode with its reason), ``train_log.json``; ``checkpoints/`` while training (a re-run with the
same params, simulator, traces and base resumes from the last one; removed on success unless
``keep_checkpoints``). MLflow: ``traces/{played,kept}/<env>``, the loss curve, ``loss.png``,
``train_example.txt`` (mask shown), ``traces.jsonl``, ``rejects.jsonl``; ``mlflow_traces``
played episodes as MLflow traces (a session each, :mod:`mimesis.traces`).

Run: ``python -m mimesis.stages.sft_agent --freeze-user data/freeze_user --out data/sft_agent``
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from mimesis.envs.registry import env_names, small_agent_env_kwargs, success_thresholds
from mimesis.io import sha256_file, write_json
from mimesis.models.lora import LoraParams
from mimesis.params import build, stage_params
from mimesis.runtime_env import configure_environment
from mimesis.tracking import git_commit, stage_run
from mimesis.users.spec import UserSamplingParams

STAGE = "sft_agent"
# do not change what training computes
_NO_RESUME = ("keep_checkpoints", "max_concurrent", "mlflow_traces")
_OUTPUTS = ("model", "meta.json", "train_log.json", "traces.jsonl", "rejects.jsonl")


@dataclass(frozen=True)
class SftAgentParams:
    """Parameters of ``sft_agent`` (params.yaml section ``sft_agent``)."""

    base_model: str = "smollm2-135m"  # smollm2-135m | tiny-llama | local HF folder (ChatML)
    dtype: str = "float32"  # agent + simulator weights: float32 on CPU, bfloat16 on GPU
    envs: list[str] = field(default_factory=lambda: env_names("train"))  # training envs only
    env_kwargs: dict[str, dict] = field(default_factory=small_agent_env_kwargs)  # env -> args
    scenarios_per_env: int = 2  # training scenarios per env (seeds from scenario_seed, in turn)
    episodes_per_scenario: int = 2  # expert episodes per scenario (the user samples differ)
    scenario_seed: int = 200000  # first scenario seed: other tasks than train/distill_agent's
    max_turns: int = 3  # agent messages per episode (the RL episode shape: keep train_agent's)
    max_new_tokens: int = 48  # per agent turn; a longer expert turn is cut and rejected
    max_completion_tokens: int = 640  # per episode, agent + injected tokens
    max_concurrent: int = 16  # episodes in flight (one simulator call serves them all)
    min_reward: float | None = 0.0  # keep episodes at >= this; None: the env's success threshold
    user: UserSamplingParams = field(default_factory=UserSamplingParams)  # frozen simulator
    epochs: float = 4.0
    max_steps: int = 8  # cap on optimizer steps (bounds CPU time with many traces); 0 = none
    batch_size: int = 1  # traces per forward (long TauGym traces: memory)
    grad_accum: int = 4
    learning_rate: float = 1.0e-3  # LoRA on few traces and steps
    save_steps: int = 8  # checkpoint every N optimizer steps (resume granularity)
    keep_checkpoints: bool = False
    lora: LoraParams = field(default_factory=lambda: LoraParams(dropout=0.0))  # as train_agent
    mlflow_traces: int = 8  # expert episodes logged as MLflow traces (a sample); 0 = none
    seed: int = 13
    profile: str = "default"

    def __post_init__(self) -> None:
        positive = ("scenarios_per_env", "episodes_per_scenario", "max_turns", "max_new_tokens",
                    "max_completion_tokens", "max_concurrent", "batch_size", "grad_accum",
                    "save_steps")
        bad = [n for n in positive if getattr(self, n) < 1]
        if bad or self.epochs <= 0 or self.learning_rate <= 0 or self.max_steps < 0:
            raise ValueError(f"must be > 0: {bad or ['epochs', 'learning_rate']} "
                             "(max_steps >= 0)")
        if self.dtype not in ("float32", "bfloat16", "float16"):
            raise ValueError("dtype must be float32, bfloat16 or float16")
        from mimesis.envs.registry import check_envs

        check_envs(self.envs, "train", self.env_kwargs)  # before any output is cleared


def run(freeze_user_dir: Path, out_dir: Path, params: SftAgentParams) -> Path:
    """Play expert episodes against the frozen simulator, keep the successful ones, fine-tune
    the agent on them; write everything to ``out_dir``.

    Raises:
        mimesis.simulator.frozen.FrozenSimulatorError: the simulator folder does not match its
            ``meta.json``, or its weights changed.
        ValueError: no expert episode reached its env's success threshold (``traces.jsonl`` and
            ``rejects.jsonl`` are written first).
    """
    from mimesis.io import clear_outputs
    from mimesis.models.base import base_dir, load_base
    from mimesis.rl import expert_sft as sft
    from mimesis.rl.frozen_guard import FrozenGuard
    from mimesis.traces import flush as flush_traces
    from mimesis.traces import log_episode_traces, sample_evenly
    from mimesis.train.reporting import MlflowMetricsCallback
    from mimesis.train.sft import fingerprint, prepare_checkpoints
    from mimesis.users.frozen import load_user

    inputs = {"simulator/meta.json": sha256_file(freeze_user_dir / "simulator" / "meta.json")}
    clear_outputs(out_dir, _OUTPUTS)
    with stage_run(STAGE, dataclasses.asdict(params)) as mlflow_run:
        user = load_user(freeze_user_dir, sft.rl_params(params))  # hash check first
        model, tokenizer = load_base(params.base_model, dtype=params.dtype)
        started = time.perf_counter()
        traces = sft.triage(sft.play_experts(user, tokenizer, params), tokenizer.eos_token_id,
                            params.min_reward)
        timing = {"rollout_seconds": round(time.perf_counter() - started, 1)}
        log_episode_traces(sample_evenly(traces.kept + [e for e, _ in traces.rejected],
                                         params.mlflow_traces), STAGE, agent="expert",
                           user="frozen", thresholds=success_thresholds())
        flush_traces()  # written before training logs its metrics to the same database
        inputs["traces.jsonl"] = sft.write_traces(out_dir, traces)
        counts = sft.report_traces(traces)  # raises when nothing was kept
        decisive = {k: v for k, v in dataclasses.asdict(params).items() if k not in _NO_RESUME}
        key = fingerprint(decisive, inputs, base_dir(params.base_model).name)
        resume = prepare_checkpoints(out_dir / "checkpoints", key)
        trainer = sft.build_trainer(model, tokenizer, traces.kept, params, out_dir / "checkpoints",
                                    [FrozenGuard(user), MlflowMetricsCallback()])
        started = time.perf_counter()
        result = trainer.train(resume_from_checkpoint=resume)
        timing["train_seconds"] = round(time.perf_counter() - started, 1)
        trainer.save_model(str(out_dir / "model"))
        meta = _meta(params, inputs, mlflow_run.info.run_id, user, out_dir, counts, {
            "train_loss": result.training_loss, "steps": trainer.state.global_step, **timing,
            "resumed_from": Path(resume).name if resume else None})
        write_json(out_dir / "meta.json", meta)
        write_json(out_dir / "train_log.json", {"log_history": trainer.state.log_history})
        sft.report_training(trainer, tokenizer)
    if not params.keep_checkpoints:
        shutil.rmtree(out_dir / "checkpoints", ignore_errors=True)
    print(f"{STAGE}: kept {counts['kept']}/{counts['played']} expert episodes ("
          + ", ".join(f"{e} {c['kept']}/{c['played']}" for e, c in counts["by_env"].items())
          + f"); {meta['steps']} SFT steps, loss {meta['train_loss']:.3f}; model -> "
          f"{out_dir / 'model'}")
    return out_dir


def _meta(params: SftAgentParams, inputs: dict[str, str], run_id: str, user, out_dir: Path,
          counts: dict, summary: dict) -> dict:
    """``meta.json``: the keys of ``train_agent``'s (so agent loaders and RL starts read it),
    plus the trace counts."""
    from mimesis.models.base import base_dir
    from mimesis.models.merge import adapter_sha256

    return {"stage": STAGE, "params": dataclasses.asdict(params), "git_commit": git_commit(),
            "inputs": inputs, "mlflow_run_id": run_id, "base_model": params.base_model,
            "base_model_dir": base_dir(params.base_model).name, "finetune": "lora",
            "weights": adapter_sha256(out_dir / "model"),
            "simulator": {"mlflow_run_id": user.meta.get("mlflow_run_id"),
                          "weights_fingerprint": user.fingerprint},
            "traces": counts, **summary}


def load_params(params_path: Path = Path("params.yaml")) -> SftAgentParams:
    """This stage's params from ``params_path`` (active profile applied).

    Raises:
        mimesis.params.ParamsError: a missing section, an unknown key or an invalid value.
    """
    return build(SftAgentParams, stage_params(STAGE, params_path), STAGE)


def main(argv: list[str] | None = None) -> None:
    configure_environment()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--freeze-user", default="data/freeze_user",
                        help="freeze_user stage output folder")
    parser.add_argument("--out", default="data/sft_agent", help="output folder")
    parser.add_argument("--params", default="params.yaml")
    args = parser.parse_args(argv)
    params = load_params(Path(args.params))
    run(Path(args.freeze_user), Path(args.out), params)


if __name__ == "__main__":
    main()
