"""The frozen user simulator: a plain HF folder whose every file is pinned by sha256.

``freeze_user`` writes ``simulator/`` with ``meta.json`` listing the sha256 of every other file in
the folder (weights, config, tokenizer, chat template). Everything that trains or evaluates
against the simulator loads it through :func:`load_frozen`, which re-hashes the folder first and
refuses a changed, missing or extra file, so an environment can never silently run a different
user model than the one evaluated.

Outside records: ``meta.json`` is self-attested (edit a weight and re-hash it in the same
folder, and the folder agrees with itself). :func:`check_frozen` (called by :func:`load_frozen`)
therefore checks the folder against what was recorded outside it, in this order:

1. ``meta.json``: every file's sha256, no file missing or extra (:func:`verify`).
2. The registry: ``freeze_user`` records the fingerprint of the file list
   (:func:`files_fingerprint`) as the tag :data:`FILES_TAG` of the MLflow model version (and in
   its description); ``registry.json`` next to the folder names that version and keeps a copy
   of the fingerprint (:func:`recorded_fingerprint`). Where ``MLFLOW_TRACKING_URI`` does not
   reach that registry (another machine, no server), the copy in ``registry.json`` is used,
   with a warning: it sits next to the folder, so it is a weaker record.
   ``registry.json`` is ``{}`` for ``register: false``. A folder whose ``meta.json`` says
   ``freeze_user`` wrote it but that has no ``registry.json`` beside it is refused (deleting the
   record must not turn the check off) unless the caller passes ``trust_folder=True``
   (``--trust-folder`` on the command line), which logs a warning.
3. ``dvc.lock``: when the working directory's ``dvc.lock`` has a ``freeze_user`` entry whose out
   contains the folder, the out must hash to what dvc recorded
   (:mod:`mimesis.simulator.dvc_record`). No ``dvc.lock``, or no entry yet (before the first
   ``dvc commit``), or a folder outside the out: nothing to check.

:func:`load_frozen_from_registry` checks a download against the version it resolves.

Second guard: ``freeze_user`` makes the folder read-only (files 0444, folders 0555) after writing,
so an accidental write fails loudly. It does not stop root or a deliberate ``chmod``; the hash
check is the real guarantee.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import stat
from pathlib import Path

from mimesis.io import sha256_file
from mimesis.simulator.dvc_record import lock_entry, lock_mismatch

log = logging.getLogger(__name__)
META = "meta.json"
REGISTRY = "registry.json"
FILES_TAG = "mimesis.files_sha256"
FREEZE_STAGE = "freeze_user"  # meta.json "stage" of folders that must have an outside record


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


def recorded_fingerprint(sim_dir: Path, trust_folder: bool = False) -> str | None:
    """The file-list fingerprint recorded outside ``sim_dir`` (step 2 of the module docstring):
    the :data:`FILES_TAG` tag of the MLflow model version that ``<sim_dir>/../registry.json``
    names, or, where ``MLFLOW_TRACKING_URI`` does not reach that registry, the copy
    ``registry.json`` keeps (with a warning).

    Args:
        sim_dir: A frozen simulator folder.
        trust_folder: Accept a ``freeze_user`` folder without ``registry.json`` (warns).

    Returns:
        The fingerprint; ``None`` when ``registry.json`` is ``{}`` (``register: false``), or is
        missing beside a folder ``freeze_user`` did not write (or with ``trust_folder``).

    Raises:
        FrozenSimulatorError: ``registry.json`` missing beside a ``freeze_user`` folder; ``{}``
            while ``meta.json`` names a registered model; the registry holds the model but not
            the version, or the version has no such tag; the registry is unreachable and
            ``registry.json`` keeps no fingerprint.
    """
    sim_dir = Path(sim_dir)
    registry_path = sim_dir.parent / REGISTRY
    meta = _read_meta(sim_dir)
    if not registry_path.is_file():
        if meta.get("stage") != FREEZE_STAGE:
            return None  # a hand-made folder: meta.json is all there is
        if not trust_folder:
            raise FrozenSimulatorError(
                f"{registry_path} missing: {sim_dir} was written by {FREEZE_STAGE}, which "
                f"records its file list outside the folder there, so without it nothing but "
                f"the folder's own meta.json vouches for it. Restore it (dvc checkout "
                f"{sim_dir.parent}, or re-run {FREEZE_STAGE}), load the registered version "
                f"(load_frozen_from_registry), or, to trust the folder as it is, pass "
                f"trust_folder=True (--trust-folder)")
        log.warning("%s missing: trusting %s on its own meta.json (trust_folder)",
                    registry_path, sim_dir)
        return None
    registry = json.loads(registry_path.read_text())
    if not registry:
        if meta.get("registered_model"):
            raise FrozenSimulatorError(
                f"{registry_path} is empty but {sim_dir / META} names registered model "
                f"{meta['registered_model']!r}: the record was removed; re-run {FREEZE_STAGE}")
        return None
    tag = _registry_tag(registry, registry_path)
    if tag is not None:
        return tag
    if not registry.get("files_sha256"):
        raise FrozenSimulatorError(
            f"the registry {registry_path} names is unreachable and {registry_path} keeps no "
            f"fingerprint ({FREEZE_STAGE} before the copy existed): set MLFLOW_TRACKING_URI to "
            f"that registry, or re-run {FREEZE_STAGE}")
    return registry["files_sha256"]


def _read_meta(sim_dir: Path) -> dict:
    meta_path = sim_dir / META
    return json.loads(meta_path.read_text()) if meta_path.is_file() else {}


def _registry_tag(registry: dict, registry_path: Path) -> str | None:
    """:data:`FILES_TAG` of the version ``registry`` names; ``None`` (warned) when the tracking
    URI does not reach a registry that holds the model (another machine, a server down)."""
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    name, version = registry.get("name"), registry.get("version")
    if not name or version is None:
        raise FrozenSimulatorError(f"{registry_path} names no model version: {registry}")
    uri = os.environ.get("MLFLOW_TRACKING_URI")
    client = MlflowClient(tracking_uri=uri)
    try:
        record = client.get_model_version(name, str(version))
    except (MlflowException, OSError) as err:
        if _holds_model(client, name):  # the right registry, but the version is gone
            raise FrozenSimulatorError(
                f"the registry at {uri} holds {name} but not version {version}, which "
                f"{registry_path} names ({err}): re-run {FREEZE_STAGE}") from err
        log.warning("the registry at %s does not hold %s v%s (%s): checking against the "
                    "fingerprint %s keeps, a record next to the folder and weaker than the "
                    "registry's; set MLFLOW_TRACKING_URI to the registry freeze_user used",
                    uri, name, version, str(err).splitlines()[0][:200], registry_path)
        return None
    tag = record.tags.get(FILES_TAG)
    if not tag:
        raise FrozenSimulatorError(f"model version {name} v{version} has no {FILES_TAG} tag: "
                                   f"re-run {FREEZE_STAGE}")
    return tag


def _holds_model(client, name: str) -> bool:
    from mlflow.exceptions import MlflowException

    try:
        client.get_registered_model(name)
    except (MlflowException, OSError):
        return False
    return True


def check_frozen(sim_dir: Path, expected_fingerprint: str | None = None,
                 trust_folder: bool = False, root: Path | None = None) -> dict:
    """Every check of the module docstring, in its order; return the parsed ``meta.json``.

    Args:
        sim_dir: A frozen simulator folder.
        expected_fingerprint: The record outside the folder when the caller has it (a registry
            download); default: :func:`recorded_fingerprint`.
        trust_folder: Accept a ``freeze_user`` folder without ``registry.json`` (warns).
        root: Where ``dvc.lock`` is looked for (default: the working directory).

    Raises:
        FrozenSimulatorError: see :func:`verify` and :func:`recorded_fingerprint`; or the
            ``dvc.lock`` record of the folder's stage out does not match it.
    """
    sim_dir = Path(sim_dir)
    if expected_fingerprint is None:
        expected_fingerprint = recorded_fingerprint(sim_dir, trust_folder)
    meta = verify(sim_dir, expected_fingerprint)
    if (found := lock_entry(sim_dir, root)) and (why := lock_mismatch(*found)):
        out_dir = found[0]
        raise FrozenSimulatorError(
            f"{out_dir} is not what dvc.lock recorded for {FREEZE_STAGE} ({why}): the folder "
            f"changed after dvc committed it. If you re-ran {FREEZE_STAGE} by hand, record it "
            f"with `dvc commit {FREEZE_STAGE}`; otherwise restore it with `dvc checkout "
            f"{FREEZE_STAGE}` or `dvc repro {FREEZE_STAGE}`")
    return meta


def turn_prefill(meta: dict) -> str:
    """What the sampler writes in front of each of the simulator's turns, from its ``meta.json``.

    ``freeze_user`` records ``turn_prefill`` = :data:`~mimesis.format.TURN_PREFILL` (every
    target of the recipe opens with the reasoning tag, so the model starts inside its private
    channel); a folder without the key gets it too. ``""``: a simulator without the private
    channel (trained without reasoning, or untrained): its whole text is parsed as the turn.

    Raises:
        TypeError: ``turn_prefill`` is not a string.

    >>> turn_prefill({}), turn_prefill({"turn_prefill": ""})
    ('<think>', '')
    """
    from mimesis.format import TURN_PREFILL

    value = meta.get("turn_prefill", TURN_PREFILL)
    if not isinstance(value, str):
        raise TypeError(f"meta.json: turn_prefill must be a string, got {value!r}")
    return value


def load_frozen(sim_dir: Path, dtype: str = "float32", device_map: str | None = None,
                expected_fingerprint: str | None = None, trust_folder: bool = False):
    """Verify (:func:`check_frozen`), then load, a frozen simulator folder.

    Args:
        sim_dir: ``data/freeze_user/simulator`` or a downloaded copy.
        dtype: ``float32`` (CPU) or ``bfloat16``/``float16`` (GPU).
        device_map: Passed to ``from_pretrained``.
        expected_fingerprint: The file-list fingerprint recorded outside the folder (default:
            :func:`recorded_fingerprint`).
        trust_folder: Accept a ``freeze_user`` folder without ``registry.json`` (warns).

    Returns:
        ``(model, tokenizer, meta)``: eval-mode causal LM, tokenizer with its saved ChatML
        template, and the parsed ``meta.json``.

    Raises:
        FrozenSimulatorError: see :func:`check_frozen`.
    """
    from mimesis.models.base import load_pretrained

    sim_dir = Path(sim_dir)
    meta = check_frozen(sim_dir, expected_fingerprint, trust_folder)
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
    if expected is None:
        log.warning("%s v%s has no %s tag (frozen before it existed): only its meta.json "
                    "vouches for it", name, version.version, FILES_TAG)
    # a download has no registry.json beside it: the version resolved here is its record
    model, tokenizer, meta = load_frozen(sim_dir, dtype=dtype, expected_fingerprint=expected,
                                         trust_folder=True)
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
