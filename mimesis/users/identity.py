"""What identifies the training simulator, so it can be refused as an "unseen" user.

Names (its registered model name, alias and ``name@alias`` forms) and weights (the sha256 of
every weight file, from its ``meta.json``). Used by :mod:`mimesis.users.unseen`.
:func:`trained_against` finds the unseen users an agent did meet in training (the prompted
control arm's user), so the agent table keeps them out of that agent's unseen mean.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mimesis.io import sha256_file

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")


def training_meta(training_simulator_dir: Path) -> dict:
    """The frozen simulator's ``meta.json`` (file hashes, registered name, alias).

    Raises:
        ValueError: no ``meta.json`` in the folder.
    """
    meta_path = Path(training_simulator_dir) / "meta.json"
    if not meta_path.is_file():
        raise ValueError(f"{meta_path} missing: the training simulator folder is needed to refuse "
                         "it as an unseen user")
    return json.loads(meta_path.read_text())


def forbidden_model_names(meta: Mapping[str, Any]) -> set[str]:
    """Lower-cased model names that denote the training simulator on an API.

    >>> sorted(forbidden_model_names({"registered_model": "sim", "params": {"alias": "frozen"}}))
    ['frozen', 'models:/sim@frozen', 'sim', 'sim@frozen']
    """
    reg = (meta.get("registered_model") or "").strip()
    alias = ((meta.get("params") or {}).get("alias") or "frozen").strip()
    names = {alias, "frozen"}
    if reg:
        names |= {reg, f"{reg}@{alias}", f"models:/{reg}@{alias}"}
    return {n.lower() for n in names if n}


def _is_weight(path: Path | str) -> bool:
    return str(path).endswith(WEIGHT_SUFFIXES)


def hf_refusal(model_dir: Path, training_simulator_dir: Path, meta: Mapping[str, Any]
               ) -> str | None:
    """Why the HF folder ``model_dir`` IS the training simulator, or ``None``.

    Only weight files of the same size as one of the simulator's are hashed (hashing every
    multi-GB file of an unrelated model would cost minutes for nothing).
    """
    model_dir, train_dir = Path(model_dir).resolve(), Path(training_simulator_dir).resolve()
    if model_dir == train_dir:
        return f"{model_dir} is the training simulator folder"
    files: dict[str, str] = dict(meta.get("files") or {})
    weights = {digest for rel, digest in files.items() if _is_weight(rel)}
    own_meta = model_dir / "meta.json"
    if own_meta.is_file():
        own = json.loads(own_meta.read_text()).get("files") or {}
        if own and (own == files or weights & {d for r, d in own.items() if _is_weight(r)}):
            return f"{own_meta} lists the training simulator's files (a copy of it)"
    sizes = {(train_dir / rel).stat().st_size for rel in files
             if _is_weight(rel) and (train_dir / rel).is_file()}
    for path in sorted(model_dir.rglob("*")):
        if not (path.is_file() and _is_weight(path)):
            continue
        if sizes and path.stat().st_size not in sizes:
            continue
        if sha256_file(path) in weights:
            return f"{path} has the sha256 of a training simulator weight file"
    return None


def trained_against(training_user: Mapping[str, Any] | None, configs: Sequence[Any]) -> list[str]:
    """Names of the unseen-user ``configs`` that are the user an agent trained against.

    An agent trained against the prompted base model (the ``grpo-prompted`` control) has met
    a ``prompted`` entry with the same model and prompt style; scored under it, that user is not
    unseen for this agent, and averaging it into the agent's "unseen" mean hands the control a
    home advantage. Same for an ``openai`` entry with the training arm's model and endpoint.

    Args:
        training_user: The ``user`` entry of the agent stage's ``meta.json``
            (:func:`mimesis.users.factory.describe`: ``kind``, ``model``, ``prompt_style``,
            ``base_url``); ``None`` for an agent that trained against no user (the base model).
        configs: :class:`~mimesis.users.spec.UserSpec` entries.

    >>> from types import SimpleNamespace as C
    >>> users = [C(name="agenda", kind="agenda", model="", prompt_style="prompted_user",
    ...            base_url=""),
    ...          C(name="p", kind="prompted", model="smollm2-135m", prompt_style="prompted_user",
    ...            base_url="")]
    >>> trained_against({"kind": "prompted", "model": "smollm2-135m",
    ...                  "prompt_style": "prompted_user"}, users)
    ['p']
    >>> trained_against({"kind": "frozen", "weights_fingerprint": "ab"}, users)
    []
    """
    if not training_user:
        return []
    kind = training_user.get("kind")
    model = str(training_user.get("model") or "").rstrip("/")
    if kind == "prompted":
        style = training_user.get("prompt_style") or "prompted_user"
        return [c.name for c in configs if c.kind == "prompted" and c.model.rstrip("/") == model
                and c.prompt_style == style]
    if kind in ("openai", "served"):
        url = str(training_user.get("base_url") or "").rstrip("/")
        return [c.name for c in configs if c.kind == "openai" and c.model.rstrip("/") == model
                and (c.base_url or "").rstrip("/") == url]
    return []
