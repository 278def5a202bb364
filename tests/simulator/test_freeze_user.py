"""freeze_user: merged simulator folder, hash-verified loading, read-only guard, MLflow registry."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from mimesis.simulator.frozen import (
    FILES_TAG,
    FrozenSimulatorError,
    files_fingerprint,
    hash_files,
    load_frozen,
    load_frozen_from_registry,
    remove_tree,
    verify,
)
from mimesis.stages.freeze_user import FreezeUserParams
from mimesis.stages.train_user import TrainUserParams
from mimesis.train.grounding import GroundingParams

_spec = importlib.util.spec_from_file_location(
    "train_user_data", Path(__file__).with_name("test_train_user_data.py"))
_data = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_data)

TRAIN = TrainUserParams(base_model="tiny-llama", max_train_conversations=4,
                        max_val_conversations=2, max_length=512, batch_size=2,
                        learning_rate=1e-2, warmup_ratio=0.0, save_steps=10,
                        eval_at_start=False, grounding=GroundingParams(tasks_per_env=0))
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def frozen(tmp_path_factory, empty_mlflow_store):
    """label -> train_user (tiny, 2 LoRA steps) -> freeze_user, with MLflow in a temp dir."""
    from mimesis.stages.freeze_user import run as freeze
    from mimesis.stages.train_user import run as train

    root = tmp_path_factory.mktemp("freeze")
    mp = pytest.MonkeyPatch()
    mp.chdir(root)
    mp.setenv("MLFLOW_TRACKING_URI", empty_mlflow_store(root / "mlflow.db"))
    mp.setenv("MIMESIS_EXPERIMENT", "test-freeze")
    label_dir = _data.write_label_dir(root / "label", n_train=4, n_val=2)
    train(label_dir, root / "train_user", TRAIN)
    freeze(root / "train_user", label_dir, root / "freeze_user", FreezeUserParams())
    yield root
    mp.undo()


def test_frozen_folder_is_plain_hf_hashed_and_read_only(frozen):
    sim_dir = frozen / "freeze_user" / "simulator"
    meta = verify(sim_dir)
    names = set(meta["files"])
    assert {"model.safetensors", "config.json", "tokenizer.json", "chat_template.jinja"} <= names
    assert not any("adapter" in n for n in names)  # merged, not an adapter
    assert meta["stage"] == "freeze_user" and meta["base_model"] == "tiny-llama"
    assert set(meta["inputs"]) == {"label/train.jsonl", "label/val.jsonl",
                                   "train_user/meta.json"}
    assert meta["merge_max_abs_logit_diff"] < 1e-3
    assert meta["turn_prefill"] == "<think>"  # the recipe's turns open in the private channel
    assert all(not os.access(p, os.W_OK) or os.geteuid() == 0 for p in sim_dir.iterdir())
    assert all((p.stat().st_mode & 0o222) == 0 for p in [sim_dir, *sim_dir.iterdir()])


def test_load_frozen_generates_and_matches_the_adapter_model(frozen, monkeypatch):
    # the folder's outside record lives in the fixture's registry
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{frozen / 'mlflow.db'}")
    from peft import PeftModel

    from mimesis.models.base import load_base
    from mimesis.models.generation import ChatGenerator, GenerationConfig

    model, tokenizer, meta = load_frozen(frozen / "freeze_user" / "simulator")
    assert not model.training and meta["finetune"] == "lora"
    chat = [{"role": "system", "content": "You want a bus time."}]
    out = ChatGenerator(model, tokenizer, GenerationConfig(max_new_tokens=6, temperature=0)
                        ).generate([chat])
    assert len(out) == 1 and isinstance(out[0], str)
    base, _ = load_base("tiny-llama")
    adapter = PeftModel.from_pretrained(base, str(frozen / "train_user" / "model")).eval()
    ids = tokenizer.apply_chat_template(chat, add_generation_prompt=True, return_tensors="pt",
                                        return_dict=True)["input_ids"]
    with torch.no_grad():
        assert torch.allclose(model(input_ids=ids).logits, adapter(input_ids=ids).logits,
                              atol=1e-4)
        assert not torch.allclose(model(input_ids=ids).logits, base(input_ids=ids).logits)


def _copy(frozen: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "simulator"
    shutil.copytree(frozen / "freeze_user" / "simulator", copy)
    for p in [copy, *copy.iterdir()]:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    return copy


def test_one_flipped_byte_names_the_changed_file(frozen, tmp_path):
    copy = _copy(frozen, tmp_path)
    weights = copy / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0x01
    weights.write_bytes(bytes(data))
    with pytest.raises(FrozenSimulatorError, match="changed: .*model.safetensors"):
        load_frozen(copy, trust_folder=True)  # a bare copy


def test_missing_or_extra_files_are_refused(frozen, tmp_path):
    copy = _copy(frozen, tmp_path)
    (copy / "tokenizer.json").unlink()
    with pytest.raises(FrozenSimulatorError, match="missing: .*tokenizer.json"):
        load_frozen(copy, trust_folder=True)  # a bare copy
    copy = _copy(frozen, tmp_path / "b")
    (copy / "extra.safetensors").write_bytes(b"\0")
    with pytest.raises(FrozenSimulatorError, match="unlisted .*extra.safetensors"):
        load_frozen(copy, trust_folder=True)  # a bare copy


def test_registry_alias_resolves_to_the_version_and_loads_verified(frozen, tmp_path,
                                                                   monkeypatch):
    from mlflow import MlflowClient

    # the registry of the fixture's run (conftest points each test at a shared db)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{frozen / 'mlflow.db'}")
    registry = json.loads((frozen / "freeze_user" / "registry.json").read_text())
    version = MlflowClient().get_model_version_by_alias("mimesis-user-simulator", "frozen")
    assert int(version.version) == registry["version"]
    meta_path = frozen / "freeze_user" / "simulator" / "meta.json"
    assert version.run_id == json.loads(meta_path.read_text())["mlflow_run_id"]
    model, _, meta = load_frozen_from_registry(dst_dir=tmp_path / "dl")
    assert not model.training
    assert meta["registry"] == {"name": "mimesis-user-simulator", "alias": "frozen",
                                "version": registry["version"]}
    assert meta["files"] == json.loads(meta_path.read_text())["files"]
    # a tampered cached download is replaced by a fresh, verified one
    cached = next((tmp_path / "dl").rglob("config.json"))
    os.chmod(cached, 0o644)
    cached.write_text("{}")
    load_frozen_from_registry(dst_dir=tmp_path / "dl")
    assert json.loads(cached.read_text()) != {}


def test_stale_label_data_is_refused(frozen, tmp_path):
    from mimesis.models.merge import StaleTrainingError
    from mimesis.stages.freeze_user import run as freeze

    label_dir = tmp_path / "label"
    shutil.copytree(frozen / "label", label_dir)
    with (label_dir / "train.jsonl").open("a") as f:
        f.write((frozen / "label" / "val.jsonl").read_text())
    with pytest.raises(StaleTrainingError, match="train.jsonl changed"):
        freeze(frozen / "train_user", label_dir, tmp_path / "out",
               replace(FreezeUserParams(), register=False))
    remove_tree(tmp_path / "out")


def test_full_finetune_is_frozen_as_is(tmp_path, monkeypatch):
    from mimesis.stages.freeze_user import run as freeze
    from mimesis.stages.train_user import run as train

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MIMESIS_EXPERIMENT", "test-freeze-full")
    label_dir = _data.write_label_dir(tmp_path / "label", n_train=2, n_val=1)
    train(label_dir, tmp_path / "train_user", replace(TRAIN, finetune="full",
                                                       learning_rate=1e-3))
    assert (tmp_path / "train_user" / "model" / "model.safetensors").is_file()
    freeze(tmp_path / "train_user", label_dir, tmp_path / "freeze_user",
           replace(FreezeUserParams(), register=False))
    model, _, meta = load_frozen(tmp_path / "freeze_user" / "simulator")
    assert meta["finetune"] == "full" and meta["merge_max_abs_logit_diff"] == 0.0
    assert json.loads((tmp_path / "freeze_user" / "registry.json").read_text()) == {}
    trained = json.loads((tmp_path / "train_user" / "meta.json").read_text())
    assert trained["parameters"]["trainable"] == trained["parameters"]["total"]
    assert sum(p.numel() for p in model.parameters()) == trained["parameters"]["total"]
    remove_tree(tmp_path / "freeze_user")


def _rehashed_tamper(sim_dir: Path) -> None:
    """Change a weight file and re-hash meta.json in the folder (self-consistent again)."""
    for p in [sim_dir, *sim_dir.rglob("*")]:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    weights = sim_dir / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0x01
    weights.write_bytes(bytes(data))
    meta = json.loads((sim_dir / "meta.json").read_text())
    meta["files"] = hash_files(sim_dir)
    (sim_dir / "meta.json").write_text(json.dumps(meta))
    verify(sim_dir)  # the folder agrees with itself


def test_a_rehashed_tampered_folder_is_refused_by_the_outside_record(frozen, tmp_path,
                                                                     monkeypatch):
    import shutil

    from mlflow import MlflowClient

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{frozen / 'mlflow.db'}")
    registry = json.loads((frozen / "freeze_user" / "registry.json").read_text())
    client = MlflowClient(tracking_uri=f"sqlite:///{frozen / 'mlflow.db'}")
    version = client.get_model_version(registry["name"], str(registry["version"]))
    assert version.tags[FILES_TAG] == registry["files_sha256"]
    assert registry["files_sha256"] in version.description
    out_copy = tmp_path / "freeze_user"
    shutil.copytree(frozen / "freeze_user", out_copy)
    load_frozen(out_copy / "simulator")  # an untouched copy with its record loads
    _rehashed_tamper(out_copy / "simulator")
    with pytest.raises(FrozenSimulatorError, match="record outside the folder"):
        load_frozen(out_copy / "simulator")
    # deleting the record (and nulling the name it is looked up by) does not turn the check off
    (out_copy / "registry.json").unlink()
    meta = json.loads((out_copy / "simulator" / "meta.json").read_text())
    (out_copy / "simulator" / "meta.json").write_text(json.dumps({**meta,
                                                                  "registered_model": None}))
    with pytest.raises(FrozenSimulatorError, match="registry.json missing"):
        load_frozen(out_copy / "simulator")
    # the registry download: a re-hashed tampered cache is replaced by a verified download
    load_frozen_from_registry(dst_dir=tmp_path / "dl")
    cached = next((tmp_path / "dl").rglob("meta.json")).parent
    _rehashed_tamper(cached)
    load_frozen_from_registry(dst_dir=tmp_path / "dl")
    assert files_fingerprint(verify(cached)["files"]) == registry["files_sha256"]
