"""The frozen user simulator: a plain HF folder whose every file is pinned by sha256.

``freeze_user`` writes ``simulator/`` with ``meta.json`` listing the sha256 of every other file in
the folder (weights, config, tokenizer, chat template). Everything that trains or evaluates
against the simulator loads it through :func:`load_frozen`, which re-hashes the folder first and
refuses a changed, missing or extra file, so an environment can never silently run a different
user model than the one evaluated.

Outside record: ``meta.json`` is self-attested (edit a weight and re-hash it in the same folder,
and the folder agrees with itself). ``freeze_user`` therefore also records the fingerprint of
the file list (:func:`files_fingerprint`) outside the folder, as the tag
:data:`FILES_TAG` of the MLflow model version (and in its description); ``registry.json`` next to
the folder names that version. :func:`load_frozen` checks the folder against that record
(:func:`recorded_fingerprint`) and :func:`load_frozen_from_registry` against the version it
resolves. A folder without ``registry.json`` beside it (a copy, ``register: false``) has only
its own ``meta.json`` to go by.

Second guard: ``freeze_user`` makes the folder read-only (files 0444, folders 0555) after writing,
so an accidental write fails loudly. It does not stop root or a deliberate ``chmod``; the hash
check is the real guarantee.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from pathlib import Path

from mimesis.io import sha256_file

META = "meta.json"
REGISTRY = "registry.json"
FILES_TAG = "mimesis.files_sha256"


class FrozenSimulatorError(RuntimeError):
    """The frozen simulator folder does not match its ``meta.json`` (names the file)."""


def hash_files(sim_dir: Path) -> dict[str, str]:
    """sha256 of every file of ``sim_dir`` except ``meta.json``, by relative POSIX path."""
    return {p.relative_to(sim_dir).as_posix(): sha256_file(p)
            for p in sorted(sim_dir.rglob("*")) if p.is_file() and p.name != META}


def files_fingerprint(files: dict[str, str]) -> str:
    """sha256 of a ``meta.json`` file list (canonical JSON): one value pins every file."""
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()


def verify(sim_dir: Path, expected_fingerprint: str | None = None) -> dict:
    """Check every file of ``sim_dir`` against ``meta.json``, and ``meta.json`` against the
    record kept outside the folder when one is given; return the metadata.

    Raises:
        FrozenSimulatorError: ``meta.json`` missing or without ``files``; its file list not the
            one recorded outside (``expected_fingerprint``); a listed file missing or with
            another sha256; a file present that ``meta.json`` does not list.
    """
    meta_path = sim_dir / META
    if not meta_path.is_file():
        raise FrozenSimulatorError(f"{meta_path} missing: not a frozen simulator folder")
    meta = json.loads(meta_path.read_text())
    expected: dict[str, str] = meta.get("files") or {}
    if not expected:
        raise FrozenSimulatorError(f"{meta_path} lists no files")
    if expected_fingerprint is not None and files_fingerprint(expected) != expected_fingerprint:
        raise FrozenSimulatorError(
            f"{meta_path} does not match the record outside the folder (registry tag "
            f"{FILES_TAG} = {expected_fingerprint[:12]}…, meta.json's files hash to "
            f"{files_fingerprint(expected)[:12]}…): the folder was changed and re-hashed")
    for rel, digest in sorted(expected.items()):
        path = sim_dir / rel
        if not path.is_file():
            raise FrozenSimulatorError(f"frozen simulator file missing: {path}")
        actual = sha256_file(path)
        if actual != digest:
            raise FrozenSimulatorError(f"frozen simulator file changed: {path} (sha256 "
                                       f"{actual[:12]}…, meta.json says {digest[:12]}…)")
    extra = sorted(set(_file_names(sim_dir)) - set(expected))
    if extra:
        raise FrozenSimulatorError(f"unlisted file(s) in frozen simulator {sim_dir}: {extra}")
    return meta


def _file_names(sim_dir: Path) -> list[str]:
    """Relative paths of the files :func:`hash_files` would hash (without hashing them)."""
    return [p.relative_to(sim_dir).as_posix() for p in sorted(sim_dir.rglob("*"))
            if p.is_file() and p.name != META]


def recorded_fingerprint(sim_dir: Path) -> str | None:
    """The file-list fingerprint recorded outside ``sim_dir``: the :data:`FILES_TAG` tag of the
    MLflow model version that ``<sim_dir>/../registry.json`` names; ``None`` without a
    ``registry.json`` or when it is empty (not registered).

    Raises:
        FrozenSimulatorError: the version cannot be read or has no such tag.
    """
    registry_path = Path(sim_dir).parent / REGISTRY
    if not registry_path.is_file():
        return None
    registry = json.loads(registry_path.read_text())
    if not registry:
        return None
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    try:
        version = MlflowClient(tracking_uri=os.environ.get("MLFLOW_TRACKING_URI")) \
            .get_model_version(registry["name"], str(registry["version"]))
    except (MlflowException, KeyError) as err:
        raise FrozenSimulatorError(f"cannot read the registry record {registry_path} names "
                                   f"({err}); set MLFLOW_TRACKING_URI") from err
    tag = version.tags.get(FILES_TAG)
    if not tag:
        raise FrozenSimulatorError(f"model version {registry['name']} v{registry['version']} "
                                   f"has no {FILES_TAG} tag: re-run freeze_user")
    return tag


def load_frozen(sim_dir: Path, dtype: str = "float32", device_map: str | None = None,
                expected_fingerprint: str | None = None):
    """Verify, then load, a frozen simulator folder.

    Args:
        sim_dir: ``data/freeze_user/simulator`` or a downloaded copy.
        dtype: ``float32`` (CPU) or ``bfloat16``/``float16`` (GPU).
        device_map: Passed to ``from_pretrained``.
        expected_fingerprint: The file-list fingerprint recorded outside the folder (default:
            :func:`recorded_fingerprint`).

    Returns:
        ``(model, tokenizer, meta)``: eval-mode causal LM, tokenizer with its saved ChatML
        template, and the parsed ``meta.json``.

    Raises:
        FrozenSimulatorError: see :func:`verify`.
    """
    from mimesis.models.base import load_pretrained

    sim_dir = Path(sim_dir)
    meta = verify(sim_dir, expected_fingerprint or recorded_fingerprint(sim_dir))
    model, tokenizer = load_pretrained(sim_dir, dtype=dtype, device_map=device_map)
    return model, tokenizer, meta


def load_frozen_from_registry(name: str = "mimesis-user-simulator", alias: str = "frozen",
                              dst_dir: Path | None = None, dtype: str = "float32"):
    """Resolve ``name@alias`` in the MLflow model registry, download it, verify and load it.

    The download is cached in ``dst_dir`` (default ``$MIMESIS_CACHE_DIR/registry/<name>-v<N>``);
    a cached copy that fails verification is downloaded again once, then must verify.

    Returns:
        ``(model, tokenizer, meta)`` as :func:`load_frozen`; ``meta["registry"]`` gets the
        resolved ``{"name", "alias", "version"}``.

    Raises:
        mlflow.exceptions.MlflowException: unknown model or alias.
        FrozenSimulatorError: the registered artifacts do not match their ``meta.json``.
    """
    import mlflow
    from mlflow import MlflowClient

    from mimesis.models.base import cache_root

    client = MlflowClient(tracking_uri=os.environ.get("MLFLOW_TRACKING_URI"))
    version = client.get_model_version_by_alias(name, alias)
    expected = version.tags.get(FILES_TAG)  # None for versions frozen before the tag existed
    dst = Path(dst_dir or cache_root() / "registry" / f"{name}-v{version.version}")
    sim_dir = _find_sim_dir(dst)
    try:
        if sim_dir is None:
            raise FrozenSimulatorError("not downloaded yet")
        verify(sim_dir, expected)
    except FrozenSimulatorError:
        remove_tree(dst)
        dst.mkdir(parents=True)
        mlflow.artifacts.download_artifacts(artifact_uri=version.source, dst_path=str(dst))
        sim_dir = _find_sim_dir(dst)
        if sim_dir is None:
            raise FrozenSimulatorError(f"{version.source} holds no {META}") from None
    model, tokenizer, meta = load_frozen(sim_dir, dtype=dtype, expected_fingerprint=expected)
    meta["registry"] = {"name": name, "alias": alias, "version": int(version.version)}
    return model, tokenizer, meta


def _find_sim_dir(root: Path) -> Path | None:
    hits = sorted(root.rglob(META)) if root.exists() else []
    return hits[0].parent if hits else None


def make_read_only(path: Path) -> None:
    """Files 0444, folders 0555, under ``path`` (second guard against accidental writes)."""
    for p in sorted(path.rglob("*"), reverse=True):
        os.chmod(p, 0o555 if p.is_dir() else 0o444)
    os.chmod(path, 0o555)


def remove_tree(path: Path) -> None:
    """Delete ``path`` even when made read-only by :func:`make_read_only`."""
    if not path.exists():
        return
    for p in [path, *path.rglob("*")]:
        if p.is_dir():
            os.chmod(p, stat.S_IRWXU)
    shutil.rmtree(path)
