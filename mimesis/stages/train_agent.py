"""Stage ``train_agent``: multi-turn GRPO of the agent against the frozen user simulator.

Reads ``<freeze_user_dir>/simulator`` (every file's sha256 checked against its ``meta.json``
before anything loads; a tampered folder refuses training). The simulator only plays the user:
its weights are out of autograd and out of the optimizer, and their fingerprint is checked
again after training (:class:`mimesis.rl.agent_training.FrozenGuard`).

Recipe: TRL's ``GRPOTrainer`` with our multi-turn ``rollout_func`` (the agent talks to the user
in the training environments; ``env_mask`` keeps user/tool tokens out of the loss), LoRA on the
base model, clip 0.2/0.28, no KL, and per-turn discounted group advantages
(:mod:`mimesis.rl.grpo` documents the credit rule).

Writes to ``<out_dir>``: ``model/`` (LoRA adapter + tokenizer), ``meta.json``, ``train_log.json``
(TRL log history + per-step reward records), ``episodes.jsonl`` (every episode without token
lists); ``checkpoints/`` while training (a re-run with the same params, simulator and base resumes
from the last one; removed on success unless ``keep_checkpoints``). MLflow: ``reward/<env>`` and
``reward`` per step, TRL's metrics, ``rewards.png``, ``episodes.jsonl``.

Run: ``python -m mimesis.stages.train_agent --freeze-user data/freeze_user --out data/train_agent``
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from mimesis.io import sha256_file
from mimesis.params import build, stage_params
from mimesis.rl.agent_training import AgentRLParams, UserSamplingParams  # noqa: F401 (build)
from mimesis.stages.train_user import LoraParams
from mimesis.tracking import git_commit, stage_run

STAGE = "train_agent"
_NO_RESUME = ("keep_checkpoints",)  # params that do not change what training computes
_OUTPUTS = ("model", "meta.json", "train_log.json", "episodes.jsonl")


@dataclass(frozen=True)
class TrainAgentParams(AgentRLParams):
    """Parameters of ``train_agent`` (params.yaml section ``train_agent``); the RL fields are
    documented on :class:`~mimesis.rl.agent_training.AgentRLParams`."""

    base_model: str = "smollm2-135m"  # smollm2-135m | tiny-llama | local HF folder (ChatML)
    lora: LoraParams = field(default_factory=lambda: LoraParams(dropout=0.0))


def run(freeze_user_dir: Path, out_dir: Path, params: TrainAgentParams) -> Path:
    """Train the agent with GRPO against the frozen simulator; write it to ``out_dir``.

    Raises:
        mimesis.simulator.frozen.FrozenSimulatorError: the simulator folder does not match its
            ``meta.json``, or the simulator was touched by training.
        ValueError: an environment is unknown or held out.
    """
    from mimesis.models.base import base_dir, load_base
    from mimesis.rl import agent_report as report
    from mimesis.rl import agent_training as rl
    from mimesis.rl.grpo import TurnCreditGRPOTrainer
    from mimesis.train.reporting import MlflowMetricsCallback
    from mimesis.train.sft import fingerprint, prepare_checkpoints

    inputs = {"simulator/meta.json": sha256_file(freeze_user_dir / "simulator" / "meta.json")}
    report.clear_outputs(out_dir, _OUTPUTS)
    with stage_run(STAGE, dataclasses.asdict(params)) as mlflow_run:
        user = rl.load_user(freeze_user_dir, params)  # hash check first
        model, tokenizer = load_base(params.base_model, dtype=params.dtype)
        decisive = {k: v for k, v in dataclasses.asdict(params).items() if k not in _NO_RESUME}
        key = fingerprint(decisive, inputs, base_dir(params.base_model).name)
        resume = prepare_checkpoints(out_dir / "checkpoints", key)
        trainer = rl.build_trainer(TurnCreditGRPOTrainer, model, tokenizer, params, user,
                                   out_dir / "checkpoints", [MlflowMetricsCallback()],
                                   peft_config=rl.lora_config(params.lora))
        summary = rl.train(trainer, resume)
        trainer.save_model(str(out_dir / "model"))
        meta = {
            "stage": STAGE, "params": dataclasses.asdict(params), "git_commit": git_commit(),
            "inputs": inputs, "mlflow_run_id": mlflow_run.info.run_id,
            "base_model": params.base_model, "base_model_dir": base_dir(params.base_model).name,
            "finetune": "lora", "weights": rl.adapter_sha256(out_dir / "model"),
            "simulator": {"mlflow_run_id": user.meta.get("mlflow_run_id"),
                          "weights_fingerprint": user.fingerprint},
            "episodes": len(trainer.episodes), "rewards": rl.reward_summary(trainer.history),
            **summary}
        report.write_run(out_dir, trainer, meta, STAGE)
    if not params.keep_checkpoints:
        shutil.rmtree(out_dir / "checkpoints", ignore_errors=True)
    report.print_summary(STAGE, out_dir, meta)
    return out_dir



def load_params(params_path: Path = Path("params.yaml")) -> TrainAgentParams:
    """This stage's params from ``params_path`` (active profile applied).

    Raises:
        mimesis.params.ParamsError: a missing section, an unknown key or an invalid value.
    """
    return build(TrainAgentParams, stage_params(STAGE, params_path), STAGE)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--freeze-user", default="data/freeze_user",
                        help="freeze_user stage output folder")
    parser.add_argument("--out", default="data/train_agent", help="output folder")
    parser.add_argument("--params", default="params.yaml")
    args = parser.parse_args(argv)
    params = load_params(Path(args.params))
    run(Path(args.freeze_user), Path(args.out), params)


if __name__ == "__main__":
    main()
