"""The second record outside a frozen simulator folder: the `dvc.lock` entry of `freeze_user`.

``dvc commit`` (after every ``freeze_user`` run, by ``dvc repro`` or
:func:`mimesis.pipeline.run_stage`) records the stage's out ``data/freeze_user`` in ``dvc.lock``
as a directory hash::

    outs:
    - path: data/freeze_user
      hash: md5
      md5: ffcfc49493b2b08ef6156a4bf81663e2.dir
      size: 541617351
      nfiles: 8

:func:`lock_mismatch` recomputes that entry from the folder;
:func:`mimesis.simulator.frozen.check_frozen` refuses a difference. The
``.dir`` hash is recomputed here with :mod:`hashlib` instead of through dvc's API: importing and
opening a dvc repo costs seconds in every process that loads the simulator, and the format is
small and fixed (dvc-data ``Tree.as_bytes``): the md5 of ``json.dumps(sorted([{"md5": <file
md5>, "relpath": <posix path>}, ...], by relpath), sort_keys=True)``, plus ``.dir``. A test
checks it against ``dvc commit`` itself. Entries without ``hash: md5`` (dvc 2, whose text files
are hashed after CRLF→LF conversion) are checked by ``nfiles`` and ``size`` only.

``dvc.lock`` is written by dvc outside the folder (each checkout's run writes its own; a fork
that pins a run commits it), so re-hashing a tampered folder's ``meta.json`` is not enough to
pass: the lock entry would have to be edited too.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import yaml

STAGE = "freeze_user"
LOCK = "dvc.lock"


def lock_entry(sim_dir: Path, root: Path | None = None) -> tuple[Path, dict] | None:
    """The ``freeze_user`` out of ``<root>/dvc.lock`` that contains ``sim_dir``.

    Args:
        sim_dir: A frozen simulator folder.
        root: The dvc project (default: the working directory, where dvc runs stages).

    Returns:
        ``(out_dir, entry)`` — the out's folder and its ``dvc.lock`` record — or ``None`` when
        there is no ``dvc.lock``, it has no ``freeze_user`` entry yet (before the first
        ``dvc commit``) or ``sim_dir`` lies outside that stage's outs (a copy elsewhere).
    """
    root = Path(root or Path.cwd())
    lock_path = root / LOCK
    if not lock_path.is_file():
        return None
    stage = ((yaml.safe_load(lock_path.read_text()) or {}).get("stages") or {}).get(STAGE)
    sim_dir = Path(sim_dir).resolve()
    for entry in (stage or {}).get("outs") or []:
        out_dir = (root / entry["path"]).resolve()
        if sim_dir == out_dir or out_dir in sim_dir.parents:
            return out_dir, entry
    return None


def dir_md5(out_dir: Path) -> tuple[str, int, int]:
    """dvc's record of a directory: ``(md5 + ".dir", size in bytes, number of files)``.

    Source: dvc-data ``dvc_data/hashfile/tree.py`` (``Tree.as_list`` / ``as_bytes``).
    """
    entries, size = [], 0
    files = sorted(p for p in out_dir.rglob("*") if p.is_file())
    for path in files:
        h = hashlib.md5()
        with path.open("rb") as f:
            while block := f.read(1 << 20):
                h.update(block)
        entries.append({"md5": h.hexdigest(), "relpath": path.relative_to(out_dir).as_posix()})
        size += path.stat().st_size
    entries.sort(key=lambda e: e["relpath"])
    digest = hashlib.md5(json.dumps(entries, sort_keys=True).encode("utf-8")).hexdigest()
    return f"{digest}.dir", size, len(files)


def lock_mismatch(out_dir: Path, entry: dict) -> str | None:
    """Why ``out_dir`` differs from its ``dvc.lock`` ``entry``, or ``None`` when it matches.

    ``nfiles`` and ``size`` are compared first (a stat per file); the md5 of every file only
    when they agree and the entry is a dvc 3 ``hash: md5`` record.
    """
    files = [p for p in out_dir.rglob("*") if p.is_file()]
    nfiles, size = len(files), sum(p.stat().st_size for p in files)
    if "nfiles" in entry and int(entry["nfiles"]) != nfiles:
        return f"{nfiles} files, dvc.lock says {entry['nfiles']}"
    if "size" in entry and int(entry["size"]) != size:
        return f"{size} bytes, dvc.lock says {entry['size']}"
    if entry.get("hash") != "md5" or not str(entry.get("md5", "")).endswith(".dir"):
        return None
    md5 = dir_md5(out_dir)[0]
    return None if md5 == entry["md5"] else f"md5 {md5}, dvc.lock says {entry['md5']}"
