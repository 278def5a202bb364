"""The records outside a frozen simulator folder: registry.json, the registry and dvc.lock.

Fast: a folder of small files stands in for the weights (``load_pretrained`` is stubbed), so
only the checks of :mod:`mimesis.simulator.frozen` run.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import yaml

from mimesis.simulator import frozen
from mimesis.simulator.dvc_record import dir_md5
from mimesis.simulator.frozen import (
    FrozenSimulatorError,
    files_fingerprint,
    hash_files,
    load_frozen,
)


@pytest.fixture(autouse=True)
def _no_weights(monkeypatch):
    from mimesis.models import base

    monkeypatch.setattr(base, "load_pretrained", lambda *a, **k: ("model", "tokenizer"))


def _freeze(out_dir: Path, registry: dict | None, registered: str | None = "sim") -> Path:
    """A ``freeze_user``-style out: ``simulator/`` with meta.json, and ``registry.json``."""
    sim_dir = out_dir / "simulator"
    sim_dir.mkdir(parents=True)
    (sim_dir / "model.safetensors").write_bytes(bytes(range(256)) * 64)
    (sim_dir / "config.json").write_text('{"model_type": "llama"}\n')
    meta = {"stage": "freeze_user", "registered_model": registered, "files": hash_files(sim_dir)}
    (sim_dir / "meta.json").write_text(json.dumps(meta))
    if registry is not None:
        if registry:
            registry = {**registry, "files_sha256": files_fingerprint(meta["files"])}
        (out_dir / "registry.json").write_text(json.dumps(registry))
    return sim_dir


def _tamper(sim_dir: Path, registered: str | None = "sim") -> None:
    """Change the weights and re-hash meta.json: the folder agrees with itself again."""
    weights = sim_dir / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[100] ^= 1
    weights.write_bytes(bytes(data))
    meta = json.loads((sim_dir / "meta.json").read_text())
    meta["files"], meta["registered_model"] = hash_files(sim_dir), registered
    (sim_dir / "meta.json").write_text(json.dumps(meta))


def test_deleting_registry_json_does_not_turn_the_check_off(tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(tmp_path)
    sim_dir = _freeze(tmp_path / "freeze_user", registry=None, registered=None)
    _tamper(sim_dir, registered=None)
    with pytest.raises(FrozenSimulatorError, match=r"registry.json missing.*trust_folder=True"):
        load_frozen(sim_dir)
    with caplog.at_level(logging.WARNING, logger="mimesis.simulator.frozen"):
        _, _, meta = load_frozen(sim_dir, trust_folder=True)  # the explicit opt-out
    assert meta["stage"] == "freeze_user" and "trusting" in caplog.text


def test_a_hand_made_folder_still_loads_on_its_meta_json(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    sim_dir = _freeze(tmp_path / "fixture", registry=None)
    meta = json.loads((sim_dir / "meta.json").read_text())
    (sim_dir / "meta.json").write_text(json.dumps({**meta, "stage": "test-fixture"}))
    assert load_frozen(sim_dir)[2]["stage"] == "test-fixture"


def test_an_emptied_registry_json_is_refused_while_meta_names_a_model(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    sim_dir = _freeze(tmp_path / "freeze_user", registry={})
    with pytest.raises(FrozenSimulatorError, match="registry.json is empty"):
        load_frozen(sim_dir)
    unregistered = _freeze(tmp_path / "unregistered" / "freeze_user", registry={},
                           registered=None)
    load_frozen(unregistered)  # register: false writes exactly this


def test_an_unreachable_registry_falls_back_to_registry_json(tmp_path, monkeypatch, caplog,
                                                             empty_mlflow_store):
    monkeypatch.chdir(tmp_path)
    # another machine: its tracking URI reaches a registry that never saw this model
    monkeypatch.setenv("MLFLOW_TRACKING_URI", empty_mlflow_store(tmp_path / "elsewhere.db"))
    sim_dir = _freeze(tmp_path / "freeze_user", registry={"name": "sim", "version": 3})
    with caplog.at_level(logging.WARNING, logger="mimesis.simulator.frozen"):
        load_frozen(sim_dir)
    assert "does not hold sim v3" in caplog.text
    _tamper(sim_dir)
    with pytest.raises(FrozenSimulatorError, match="record outside the folder"):
        load_frozen(sim_dir)
    registry_path = sim_dir.parent / "registry.json"
    registry = json.loads(registry_path.read_text())
    registry_path.write_text(json.dumps({k: v for k, v in registry.items()
                                         if k != "files_sha256"}))
    with pytest.raises(FrozenSimulatorError, match="keeps no fingerprint"):
        load_frozen(sim_dir)


def _dvc_project(root: Path) -> None:
    """A dvc project whose ``freeze_user`` stage outputs ``data/freeze_user``."""
    from dvc.repo import Repo

    Repo.init(str(root), no_scm=True).close()
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"freeze_user": {
        "cmd": "true", "outs": ["data/freeze_user"]}}}))


def _commit(root: Path) -> dict:
    from dvc.repo import Repo

    with Repo(str(root)) as repo:
        repo.commit(target="freeze_user", force=True)
    return yaml.safe_load((root / "dvc.lock").read_text())["stages"]["freeze_user"]["outs"][0]


def test_dvc_lock_is_checked_in_the_pipeline_order(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _dvc_project(tmp_path)
    out_dir = tmp_path / "data" / "freeze_user"
    # register: false and no registry to ask: without dvc.lock, meta.json is all there is
    sim_dir = _freeze(out_dir, registry={}, registered=None)
    load_frozen(sim_dir)  # first run: no dvc.lock yet
    (tmp_path / "dvc.lock").write_text("schema: '2.0'\nstages: {}\n")
    load_frozen(sim_dir)  # a dvc.lock without a freeze_user entry yet
    entry = _commit(tmp_path)  # freeze_user wrote it, dvc commit recorded it ...
    assert (entry["md5"], entry["size"], entry["nfiles"]) == dir_md5(out_dir)  # dvc's own hash
    load_frozen(Path("data/freeze_user/simulator"))  # ... later stages load it
    _tamper(sim_dir, registered=None)
    with pytest.raises(FrozenSimulatorError, match=r"not what dvc.lock recorded.*md5.*dvc "
                       r"commit freeze_user"):
        load_frozen(sim_dir, trust_folder=True)  # the opt-out is for registry.json only
    _commit(tmp_path)  # a deliberate re-run by hand, recorded as the message says
    load_frozen(sim_dir)


def test_a_dvc2_lock_entry_is_checked_by_file_count_and_size(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out_dir = tmp_path / "data" / "freeze_user"
    sim_dir = _freeze(out_dir, registry={}, registered=None)
    _, size, nfiles = dir_md5(out_dir)
    lock = {"schema": "2.0", "stages": {"freeze_user": {"outs": [
        {"path": "data/freeze_user", "md5": "0" * 32 + ".dir", "size": size,
         "nfiles": nfiles}]}}}
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump(lock))
    load_frozen(sim_dir)  # no ``hash: md5``: dvc 2 hashes text files after CRLF -> LF
    (sim_dir / "extra.bin").write_bytes(b"x")
    with pytest.raises(FrozenSimulatorError, match="unlisted file"):
        load_frozen(sim_dir)
    (sim_dir / "extra.bin").unlink()
    (out_dir / "notes.txt").write_text("left behind")
    with pytest.raises(FrozenSimulatorError, match="5 files, dvc.lock says 4"):
        load_frozen(sim_dir)
    assert frozen.lock_entry(tmp_path / "copy" / "simulator") is None  # a copy elsewhere
