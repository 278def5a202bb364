"""Stage ``distill_agent``: the ``csd`` arm — GRPO + coached self-distillation (CSD).

Reads ``<sft_agent_dir>/model`` (the SFT warm-up adapter, the start of every agent arm; its
files' sha256 are checked against ``meta.json``) and ``<freeze_user_dir>/simulator``
(hash-verified, and it must be the simulator the SFT traces were played with). Trains the SFT
adapter with ``L = L_GRPO + α·L_CSD`` (:mod:`mimesis.rl.csd`) against the frozen simulator, in
parallel with train_agent's ``grpo`` arm, not after it: the same start, scenarios, seeds and step
budget (params.yaml keeps these keys equal to train_agent's, and ``evaluate_agents`` refuses arms
whose budgets differ), so ``csd − grpo`` measures the CSD term alone. A coach — by default the frozen simulator,
prompted; optionally any OpenAI-compatible endpoint — writes a note on what the user needs next
for each coached turn; the note must pass the leakage filter (:func:`mimesis.rl.coach.find_leaks`).
Ablations by params: ``csd.alpha: 0`` (GRPO only, diagnostics kept), ``csd.note: placebo``.

Writes to ``<out_dir>``: ``model/`` (adapter + tokenizer), ``meta.json``, ``train_log.json``,
``episodes.jsonl``, ``notes.jsonl`` (every note request with its status: kept, none, empty or
leak with reasons); ``checkpoints/`` while training (resumable, as train_agent). MLflow:
``reward/<env>``, ``csd/delta_real_{mean,std}``, ``csd/delta_placebo_{mean,std}``,
``csd/delta_gap``, ``notes/<status>`` per step, ``rewards.png``, the coach prompts, and
``mlflow_traces`` trained episodes as MLflow traces; ``plots/`` holds the curves for dvc plots.

Run: ``python -m mimesis.stages.distill_agent --freeze-user data/freeze_user
--sft-agent data/sft_agent --out data/distill_agent``
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from mimesis.io import clear_outputs, sha256_file, write_jsonl
from mimesis.models.lora import LoraParams
from mimesis.params import build, stage_params
from mimesis.rl.agent_training import AgentRLParams
from mimesis.rl.coach import CoachParams
from mimesis.runtime_env import configure_environment
from mimesis.tracking import git_commit, stage_run

STAGE = "distill_agent"
_NO_RESUME = ("keep_checkpoints", "mlflow_traces")
_OUTPUTS = ("model", "meta.json", "train_log.json", "episodes.jsonl", "notes.jsonl", "plots")


@dataclass(frozen=True)
class CSDParams:
    """The CSD term (params.yaml ``distill_agent.csd``)."""

    alpha: float = 0.01  # weight of L_CSD; 0 = ablation (GRPO only, Δ still logged)
    beta: float = 5.0  # gate sharpness: g = sigmoid(beta * Δ)
    note: str = "real"  # real (coach note) | placebo (content-free note) in the loss
    score_batch_size: int = 4  # teacher sequences per forward

    def __post_init__(self) -> None:
        if self.alpha < 0 or self.beta <= 0 or self.note not in ("real", "placebo"):
            raise ValueError("csd: alpha >= 0, beta > 0, note real|placebo")


@dataclass(frozen=True)
class DistillAgentParams(AgentRLParams):
    """Parameters of ``distill_agent`` (params.yaml section ``distill_agent``); the RL fields are
    documented on :class:`~mimesis.rl.agent_training.AgentRLParams`."""

    enabled: bool = True  # false: no csd arm (meta.json says so; evaluate_agents agents.csd false)
    base_model: str = "smollm2-135m"  # without an SFT start: smollm2-135m | tiny-llama | folder
    lora: LoraParams = field(default_factory=lambda: LoraParams(dropout=0.0))  # no SFT start
    csd: CSDParams = field(default_factory=CSDParams)
    coach: CoachParams = field(default_factory=CoachParams)


def run(freeze_user_dir: Path, sft_agent_dir: Path | None, out_dir: Path,
        params: DistillAgentParams) -> Path:
    """Train the SFT policy with GRPO + CSD; write it to ``out_dir``.

    Args:
        sft_agent_dir: The ``sft_agent`` output to start from (``None``: the base model
            ``params.base_model`` with a fresh LoRA adapter).

    Raises:
        mimesis.simulator.frozen.FrozenSimulatorError: tampered or touched simulator.
        mimesis.models.merge.StaleTrainingError: sft_agent's output, base model or simulator
            differ from what its ``meta.json`` records.
    """
    from mimesis.models.base import base_dir
    from mimesis.models.merge import adapter_sha256
    from mimesis.prompts import load_prompt
    from mimesis.rl import agent_report as report
    from mimesis.rl import agent_training as rl
    from mimesis.rl.coach import make_coach
    from mimesis.rl.csd import CSDTrainer
    from mimesis.rl.generators import require_generator
    from mimesis.rl.ranks import is_main_process, main_first, main_run
    from mimesis.train.reporting import MlflowMetricsCallback
    from mimesis.train.sft import fingerprint, prepare_checkpoints
    from mimesis.users.frozen import load_user

    if not params.enabled:  # a profile without the csd arm (claim): say so, train nothing
        clear_outputs(out_dir, _OUTPUTS)
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "meta.json").write_text(json.dumps(
            {"stage": STAGE, "enabled": False, "params": dataclasses.asdict(params)}, indent=2))
        print(f"{STAGE}: disabled (distill_agent.enabled: false); no csd arm")
        return out_dir
    require_generator(params.generator)  # a vLLM generator without vLLM fails before any load
    main = is_main_process()  # under accelerate launch only rank 0 writes (mimesis.rl.ranks)
    inputs = {"simulator/meta.json": sha256_file(freeze_user_dir / "simulator" / "meta.json")}
    start_meta: dict = {}
    if sft_agent_dir is not None:
        inputs["sft_agent/meta.json"] = sha256_file(sft_agent_dir / "meta.json")
        start_meta = json.loads((sft_agent_dir / "meta.json").read_text())
    if main:
        clear_outputs(out_dir, _OUTPUTS)
    with main_run(lambda: stage_run(STAGE, dataclasses.asdict(params))) as mlflow_run:
        user = load_user(freeze_user_dir, params)  # hash check first
        model, tokenizer, start = rl.load_start_policy(sft_agent_dir, user, params)
        decisive = {k: v for k, v in dataclasses.asdict(params).items() if k not in _NO_RESUME}
        with main_first():
            resume = prepare_checkpoints(out_dir / "checkpoints", fingerprint(
                decisive, inputs, base_dir(start["base_model"]).name))
        sim_name = f"{user.meta.get('base_model', '?')}:{user.fingerprint[:12]}"
        coach = make_coach(params.coach, user.model, user.tokenizer, sim_name, params.seed)
        trainer = rl.build_trainer(
            CSDTrainer, model, tokenizer, params, user, out_dir / "checkpoints",
            [MlflowMetricsCallback()], peft_config=start["peft_config"], coach=coach,
            alpha=params.csd.alpha, beta=params.csd.beta, note_kind=params.csd.note, placebo=load_prompt("coach_placebo"),
            score_batch_size=params.csd.score_batch_size)
        summary = rl.train(trainer, resume)
        trainer.save_model(str(out_dir / "model"))  # every process (ZeRO-3 gathers); rank 0 writes
        if not main:
            return out_dir
        write_jsonl(out_dir / "notes.jsonl", trainer.notes)
        meta = {
            "stage": STAGE, "params": dataclasses.asdict(params), "git_commit": git_commit(),
            "inputs": inputs, "mlflow_run_id": mlflow_run.info.run_id,
            "arm": "csd", "start": start["name"],
            "start_mlflow_run_id": start_meta.get("mlflow_run_id"),
            "base_model": start["base_model"], "base_model_dir": base_dir(start["base_model"]).name,
            "finetune": "lora", "weights": adapter_sha256(out_dir / "model"),
            "simulator": {"mlflow_run_id": user.meta.get("mlflow_run_id"),
                          "weights_fingerprint": user.fingerprint}, "coach": coach.name,
            "notes": {s: sum(n.status == s for n in trainer.notes)
                      for s in ("kept", "none", "empty", "leak")},
            "episodes": len(trainer.episodes), "rewards": rl.reward_summary(trainer.history),
            **summary}
        report.write_run(out_dir, trainer, meta, STAGE)
        _log_coach(out_dir)
    if not params.keep_checkpoints:
        shutil.rmtree(out_dir / "checkpoints", ignore_errors=True)
    report.print_summary(STAGE, out_dir, meta)
    print(f"  notes: {meta['notes']} (coach {coach.name})")
    return out_dir


def _log_coach(out_dir: Path) -> None:
    import mlflow

    from mimesis.prompts import load_prompt

    for name in ("coach", "coach_request", "coach_placebo"):
        mlflow.log_text(load_prompt(name), f"prompts/{name}.md")
    mlflow.log_artifact(str(out_dir / "notes.jsonl"))



def load_params(params_path: Path = Path("params.yaml")) -> DistillAgentParams:
    """This stage's params from ``params_path`` (active profile applied).

    Raises:
        mimesis.params.ParamsError: a missing section, an unknown key or an invalid value.
    """
    return build(DistillAgentParams, stage_params(STAGE, params_path), STAGE)


def main(argv: list[str] | None = None) -> None:
    configure_environment()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--freeze-user", default="data/freeze_user",
                        help="freeze_user stage output folder")
    parser.add_argument("--sft-agent", default="data/sft_agent",
                        help="sft_agent stage output folder (the adapter CSD starts from)")
    parser.add_argument("--out", default="data/distill_agent", help="output folder")
    parser.add_argument("--params", default="params.yaml")
    args = parser.parse_args(argv)
    params = load_params(Path(args.params))
    run(Path(args.freeze_user), Path(args.sft_agent), Path(args.out), params)


if __name__ == "__main__":
    main()
