"""Where a UserRL gym's data files are: the one locator every ``load_userrl_tasks`` uses.

UserRL (SalesforceAIResearch/UserRL, Apache-2.0) ships each gym's data as JSON files in
``<gym>/`` (``FunctionGym/functions.json``, ``TauGym/tau_{train,test}.json``, …) or as parquet
tables under ``parquet/<table>/``. A loader may be given the file itself, the gym's folder, or
the folder above it; :func:`userrl_files` resolves all three the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def userrl_files(path: Path | str, gym: str, names: Sequence[str] = (), *, pattern: str = "",
                 folders: Sequence[str] | None = None) -> list[Path]:
    """The data files of UserRL's ``gym`` at ``path``.

    ``path`` itself when it is a file; otherwise the first of ``folders`` (relative to ``path``;
    ``""`` is ``path`` itself; default ``("", gym)``) that holds any of ``names`` (in the order
    given) or, with ``pattern``, any file matching that glob (sorted by name).

    Args:
        path: A data file, or a folder to search.
        gym: The gym's name (``FunctionGym``), for the default folders and the error.
        names: File names to look for.
        pattern: A glob (``*.parquet``) instead of ``names``.
        folders: Sub-folders of ``path`` to search, in order.

    Returns:
        The files, never empty.

    Raises:
        FileNotFoundError: nothing matches at ``path``.

    Examples:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp())
        >>> (root / "FunctionGym").mkdir()
        >>> _ = (root / "FunctionGym" / "functions.json").write_text("[]")
        >>> [p.name for p in userrl_files(root, "FunctionGym", ["functions.json"])]
        ['functions.json']
    """
    path = Path(path)
    if path.is_file():
        return [path]
    for sub in ("", gym) if folders is None else folders:
        folder = path / sub if sub else path
        if pattern:
            files = sorted(folder.glob(pattern)) if folder.is_dir() else []
        else:
            files = [folder / n for n in names if (folder / n).is_file()]
        if files:
            return files
    wanted = pattern or " or ".join(names)
    raise FileNotFoundError(f"no {gym} {wanted} at {path}")
