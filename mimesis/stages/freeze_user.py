"""Stage ``freeze_user``: merge the trained user simulator into one pinned, registered model.

Reads ``<train_user_dir>/model`` (LoRA adapter or full model) and ``meta.json``, and the label
data it was trained on (``<label_dir>/{train,val}.jsonl``, hashed to catch a stale train_user).
Writes ``<out_dir>/simulator/``: a plain HF folder (safetensors, config, tokenizer, chat template)
with ``meta.json`` holding the sha256 of every other file, then makes it read-only (see
``mimesis.simulator.frozen``); ``<out_dir>/registry.json`` names the MLflow registry version.
MLflow: the folder as run artifacts, registered as ``registered_model`` with alias ``alias``.

Run: ``python -m mimesis.stages.freeze_user --train-user data/train_user --label data/label
--out data/freeze_user``
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path

from mimesis.format import TURN_PREFILL
from mimesis.io import sha256_file, write_json
from mimesis.params import build, stage_params
from mimesis.runtime_env import configure_environment
from mimesis.simulator.frozen import (
    FILES_TAG,
    files_fingerprint,
    hash_files,
    make_read_only,
    remove_tree,
)
from mimesis.tracking import git_commit, stage_run

STAGE = "freeze_user"


@dataclass(frozen=True)
class FreezeUserParams:
    """Parameters of ``freeze_user`` (params.yaml section ``freeze_user``)."""

    registered_model: str = "mimesis-user-simulator"  # MLflow registry name
    alias: str = "frozen"  # registry alias pointing at the new version
    register: bool = True  # False: write the folder only (no registry entry)
    dtype: str = "float32"  # dtype of the saved weights (bfloat16 halves a GPU-profile model)
    seed: int = 13
    profile: str = "default"

    def __post_init__(self) -> None:
        if self.dtype not in ("float32", "bfloat16", "float16"):
            raise ValueError("freeze_user.dtype must be float32, bfloat16 or float16")
        if self.register and not (self.registered_model and self.alias):
            raise ValueError("freeze_user: registered_model and alias are required to register")


def run(train_user_dir: Path, label_dir: Path, out_dir: Path, params: FreezeUserParams) -> Path:
    """Merge, save, hash, register and lock the user simulator.

    Raises:
        FileNotFoundError: train_user output or label data missing.
        mimesis.models.merge.StaleTrainingError: the label data or base model changed since
            train_user ran.
    """
    from mimesis.models.merge import merged_model

    started = time.perf_counter()
    train_meta = json.loads((train_user_dir / "meta.json").read_text())
    inputs = _input_hashes(train_user_dir, label_dir, train_meta)
    sim_dir = out_dir / "simulator"
    remove_tree(out_dir)
    with stage_run(STAGE, dataclasses.asdict(params)) as mlflow_run:
        model, tokenizer, merge_diff = merged_model(train_user_dir / "model", train_meta,
                                                    dtype=params.dtype)
        model.save_pretrained(sim_dir)
        tokenizer.save_pretrained(sim_dir)
        meta = {
            "stage": STAGE, "params": dataclasses.asdict(params), "git_commit": git_commit(),
            "inputs": inputs, "mlflow_run_id": mlflow_run.info.run_id,
            "train_user_mlflow_run_id": train_meta.get("mlflow_run_id"),
            "base_model": train_meta["base_model"], "finetune": train_meta["finetune"],
            "registered_model": params.registered_model if params.register else None,
            "merge_max_abs_logit_diff": merge_diff, "turn_prefill": TURN_PREFILL,
            "files": hash_files(sim_dir),
        }
        write_json(sim_dir / "meta.json", meta)
        registry = (_register(sim_dir, params, mlflow_run.info.run_id,
                              files_fingerprint(meta["files"])) if params.register else {})
        write_json(out_dir / "registry.json", registry)
    make_read_only(sim_dir)
    size_mb = sum(p.stat().st_size for p in sim_dir.iterdir()) / 2**20
    print(f"freeze_user: {train_meta['base_model']} ({train_meta['finetune']}) -> {sim_dir} "
          f"({len(meta['files'])} files, {size_mb:.0f} MB, merge diff {merge_diff:.2e}); "
          f"registry {registry or 'skipped'}; {time.perf_counter() - started:.0f} s")
    return out_dir


def _input_hashes(train_user_dir: Path, label_dir: Path, train_meta: dict) -> dict[str, str]:
    """Hashes of the label data and train_user meta; refuses label data train_user did not see."""
    from mimesis.models.merge import StaleTrainingError

    inputs = {}
    for split in ("train", "val"):
        digest = sha256_file(label_dir / f"{split}.jsonl")
        if train_meta["inputs"].get(f"{split}.jsonl") != digest:
            raise StaleTrainingError(f"{label_dir}/{split}.jsonl changed since train_user ran: "
                                     "re-run train_user")
        inputs[f"label/{split}.jsonl"] = digest
    inputs["train_user/meta.json"] = sha256_file(train_user_dir / "meta.json")
    return inputs


def _register(sim_dir: Path, params: FreezeUserParams, run_id: str, fingerprint: str) -> dict:
    """Log ``sim_dir`` as run artifacts and point ``name@alias`` at a new registry version,
    tagged with the file-list ``fingerprint`` (the record outside the folder, checked on load).

    ``log_artifacts`` + ``create_model_version`` (seconds) instead of ``mlflow.pytorch.log_model``
    (which infers pip requirements for ~15 s and pickles the model).
    """
    import mlflow
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    mlflow.log_artifacts(str(sim_dir), artifact_path="simulator")
    client = MlflowClient()
    try:
        client.get_registered_model(params.registered_model)
    except MlflowException:
        client.create_registered_model(params.registered_model,
                                       description="MIMESIS user simulator (frozen)")
    version = client.create_model_version(
        params.registered_model, source=mlflow.get_artifact_uri("simulator"), run_id=run_id,
        tags={FILES_TAG: fingerprint},
        description=f"sha256 of meta.json's file list: {fingerprint}")
    client.set_registered_model_alias(params.registered_model, params.alias, version.version)
    return {"name": params.registered_model, "alias": params.alias,
            "version": int(version.version), "source": version.source,
            "files_sha256": fingerprint}


def load_params(params_path: Path = Path("params.yaml")) -> FreezeUserParams:
    """This stage's params from ``params_path`` (active profile applied).

    Raises:
        mimesis.params.ParamsError: a missing section, an unknown key or an invalid value.
    """
    return build(FreezeUserParams, stage_params(STAGE, params_path), STAGE)


def main(argv: list[str] | None = None) -> None:
    configure_environment()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train-user", default="data/train_user", help="train_user output")
    parser.add_argument("--label", default="data/label", help="label stage output folder")
    parser.add_argument("--out", default="data/freeze_user", help="output folder")
    parser.add_argument("--params", default="params.yaml")
    args = parser.parse_args(argv)
    params = load_params(Path(args.params))
    run(Path(args.train_user), Path(args.label), Path(args.out), params)


if __name__ == "__main__":
    main()
