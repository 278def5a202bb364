"""Small file helpers: JSON Lines, JSON, content hashes."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)


def write_jsonl(path: Path, records: Iterable[BaseModel | dict]) -> int:
    """Write records (pydantic models or dicts) one per line; return the count written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with path.open("w", encoding="utf-8") as f:
        for r in records:
            row = r.model_dump(mode="json") if isinstance(r, BaseModel) else r
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    return n


def read_jsonl(path: Path, model: type[M] | None = None) -> Iterator:
    """Yield records from a JSON Lines file, validated into ``model`` when given."""
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                row = json.loads(line)
                yield model.model_validate(row) if model else row


def write_json(path: Path, obj: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=True) + "\n")


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file's bytes."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def sha256_dir(dir_path: Path) -> dict[str, str]:
    """sha256 of every file under ``dir_path``, keyed by POSIX relative path (sorted)."""
    return {
        p.relative_to(dir_path).as_posix(): sha256_file(p)
        for p in sorted(dir_path.rglob("*"))
        if p.is_file()
    }


def clear_outputs(out_dir: Path, names: Iterable[str]) -> None:
    """Remove a previous run's outputs ``names`` (files or folders) from ``out_dir`` and make sure
    ``out_dir`` exists. Callers never list ``checkpoints/``: a re-run with the same params may
    resume from them."""
    for name in names:
        path = out_dir / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    out_dir.mkdir(parents=True, exist_ok=True)
