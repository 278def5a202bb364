"""Stage ``train_user``: supervised fine-tuning of the user simulator on role-flipped conversations.

Reads ``<label_dir>/{train,val}.jsonl`` (``LabeledConversation``), flips roles
(``mimesis.simulator.roles.flip_roles``: real user turns become the assistant role, with their
``<think>`` reasoning and the end signal), and trains the base model with TRL's ``SFTTrainer``
(``assistant_only_loss``: loss on the simulator's turns only), LoRA by default. The training
rows also get scripted grounding dialogues on training-env tasks
(:mod:`mimesis.train.grounding`), so the simulator states its scenario's facts when asked.

Writes to ``<out_dir>``: ``model/`` (LoRA adapter, or full model, + tokenizer), ``meta.json``,
``train_log.json`` (Trainer log history), ``rejects.jsonl``; ``checkpoints/`` while training (a
re-run with the same params, data and base resumes from the last one; removed on success unless
``keep_checkpoints``). MLflow: loss curves, ``loss.png``, ``train_example.txt`` (mask shown).

Run: ``python -m mimesis.stages.train_user --label data/label --out data/train_user``
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from mimesis.io import clear_outputs, sha256_file, write_json, write_jsonl
from mimesis.models.lora import LoraParams
from mimesis.params import build, stage_params
from mimesis.runtime_env import configure_environment
from mimesis.tracking import git_commit, stage_run
from mimesis.train.grounding import GroundingParams

STAGE = "train_user"
# Params that do not change what training computes: changing them keeps checkpoints resumable.
_NO_RESUME = ("eval_at_start", "keep_checkpoints")


@dataclass(frozen=True)
class TrainUserParams:
    """Parameters of ``train_user`` (params.yaml section ``train_user``)."""

    base_model: str = "smollm2-135m"  # smollm2-135m | tiny-llama | local HF folder path
    finetune: str = "lora"  # lora (peft adapter) | full (every weight)
    dtype: str = "float32"  # float32 on CPU (bf16 is 5-8x slower there); bfloat16 on GPU
    loss: str = "plain"  # plain (model's own masked NLL) | trl (fused head + entropy/accuracy logs)
    max_train_conversations: int = 24  # first N usable of train.jsonl; 0 = all
    max_val_conversations: int = 8  # first N usable of val.jsonl; 0 = all
    max_user_chars: int = 600  # clip each real user turn (chars; 0 = no clip)
    max_agent_chars: int = 400  # clip each agent reply (chars; 0 = no clip)
    max_length: int = 448  # tokens per training sequence (conversations are fitted to it)
    epochs: float = 1.0
    batch_size: int = 4
    grad_accum: int = 1
    learning_rate: float = 3e-3
    warmup_ratio: float = 0.0  # fraction of steps with linear warm-up (cosine decay after)
    save_steps: int = 8  # checkpoint every N optimizer steps (resume granularity)
    eval_at_start: bool = True  # eval loss of the untrained base too (baseline for the curve)
    keep_checkpoints: bool = False  # keep checkpoints/ after success (large for full FT)
    lora: LoraParams = field(default_factory=LoraParams)
    # scripted env dialogues mixed into the training rows: the simulator states its facts
    grounding: GroundingParams = field(default_factory=GroundingParams)
    seed: int = 13
    profile: str = "default"

    def __post_init__(self) -> None:
        choices = {"finetune": ("lora", "full"), "loss": ("plain", "trl"),
                   "dtype": ("float32", "bfloat16", "float16")}
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"train_user.{name} must be one of {allowed}")
        positive = ("max_length", "batch_size", "grad_accum", "save_steps")
        if any(getattr(self, name) <= 0 for name in positive) or self.epochs <= 0:
            raise ValueError(f"train_user: {positive} and epochs must be > 0")
        if self.learning_rate <= 0 or not 0 <= self.warmup_ratio < 1:
            raise ValueError("train_user: learning_rate > 0 and 0 <= warmup_ratio < 1")


def run(label_dir: Path, out_dir: Path, params: TrainUserParams) -> Path:
    """Train the user simulator on ``label_dir`` data; write model and metadata to ``out_dir``.

    Raises:
        FileNotFoundError: ``train.jsonl`` or ``val.jsonl`` missing.
        ValueError: no usable training conversation.
    """
    from mimesis.models.base import base_dir, load_base
    from mimesis.train import stage_helpers as helpers
    from mimesis.train.sft import build_trainer, fingerprint, prepare_checkpoints

    inputs = {f"{s}.jsonl": sha256_file(label_dir / f"{s}.jsonl") for s in ("train", "val")}
    clear_outputs(out_dir, helpers.OUTPUTS)
    with stage_run(STAGE, dataclasses.asdict(params)) as mlflow_run:
        model, tokenizer = load_base(params.base_model, dtype=params.dtype)
        data = helpers.load_splits(label_dir, tokenizer, params)
        decisive = {k: v for k, v in dataclasses.asdict(params).items() if k not in _NO_RESUME}
        key = fingerprint(decisive, inputs, base_dir(params.base_model).name)
        resume = prepare_checkpoints(out_dir / "checkpoints", key)
        trainer = build_trainer(model, tokenizer, data.train, data.val, params,
                                out_dir / "checkpoints", [helpers.MlflowMetricsCallback()])
        has_val = data.val is not None
        eval_start = trainer.evaluate() if has_val and params.eval_at_start and not resume else {}
        started = time.perf_counter()
        result = trainer.train(resume_from_checkpoint=resume)
        train_seconds = time.perf_counter() - started
        eval_end = trainer.evaluate() if has_val else {}
        trainer.save_model(str(out_dir / "model"))
        summary = helpers.summarise(trainer, data, result, train_seconds, eval_start, eval_end,
                                    resumed_from=resume, epochs=params.epochs)
        write_jsonl(out_dir / "rejects.jsonl", data.rejects)
        write_json(out_dir / "train_log.json", {"log_history": trainer.state.log_history})
        write_json(out_dir / "meta.json", {
            "stage": STAGE, "params": dataclasses.asdict(params), "git_commit": git_commit(),
            "inputs": inputs, "mlflow_run_id": mlflow_run.info.run_id,
            "base_model": params.base_model,
            "base_model_dir": base_dir(params.base_model).name, "finetune": params.finetune,
            **summary})
        helpers.report(trainer, tokenizer, summary)
    if not params.keep_checkpoints:
        shutil.rmtree(out_dir / "checkpoints", ignore_errors=True)
    helpers.print_summary(out_dir, summary)
    return out_dir


def load_params(params_path: Path = Path("params.yaml")) -> TrainUserParams:
    """This stage's params from ``params_path`` (active profile applied).

    Raises:
        mimesis.params.ParamsError: a missing section, an unknown key or an invalid value.
    """
    return build(TrainUserParams, stage_params(STAGE, params_path), STAGE)


def main(argv: list[str] | None = None) -> None:
    configure_environment()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--label", default="data/label", help="label stage output folder")
    parser.add_argument("--out", default="data/train_user", help="output folder")
    parser.add_argument("--params", default="params.yaml")
    args = parser.parse_args(argv)
    params = load_params(Path(args.params))
    run(Path(args.label), Path(args.out), params)


if __name__ == "__main__":
    main()
