"""The code deps of each ``dvc.yaml`` stage, derived from the import graph of its entry module.

A stage must re-run when any module it can import changes, and only then. Hand-kept deps drift
(a new ``from mimesis.x import y`` is not a new dvc dep), so this module computes them: starting
at the stage's ``python -m <module>``, it follows every ``import`` / ``from ... import`` in the
source (top-level and function-local alike, read with :mod:`ast`: nothing is imported, so
torch-heavy modules cost nothing), literal ``importlib.import_module("...")`` calls, and the
``pkgutil.iter_modules`` discovery of :mod:`mimesis.envs.registry` and :mod:`mimesis.rl.experts`
(a module that does both imports every module and sub-package of the named package: an env
folder ``mimesis/envs/<name>/`` is a sub-package, followed from its ``__init__.py``). Package data folders (``<package>/data``) of the
packages involved are deps too.

In ``dvc.yaml`` a stage's deps then are: upstream outputs (``data/...``, kept), the computed code
deps (a folder when every module under it is imported, else single files) and the non-Python
files listed by hand (prompt templates, kept: a prompt is named by params, not imported).
``mimesis deps --check`` reports the difference; ``mimesis deps --write`` rewrites the lists.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from mimesis.pipeline import stage_command

PACKAGE = "mimesis"
DATA_DIR = "data"


@dataclass(frozen=True)
class DepsReport:
    """One stage's code deps: what dvc.yaml lists vs. what the import graph needs.

    Attributes:
        stage: dvc stage name.
        listed: Code deps in dvc.yaml (``data/`` outputs excluded), in file order.
        derived: Code deps the import graph gives (what ``--write`` would list).
        uncovered: Needed files (modules, package data) no listed dep covers.
    """

    stage: str
    listed: tuple[str, ...]
    derived: tuple[str, ...]
    uncovered: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.uncovered and self.listed == self.derived


def module_file(root: Path, name: str) -> Path | None:
    """Source file of module ``name`` under ``root`` (``a/b.py`` or ``a/b/__init__.py``)."""
    base = root.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _imported_names(name: str, path: Path, root: Path) -> set[str]:
    """Module names ``path`` may import (some are attributes; :func:`module_file` drops them)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    names: set[str] = set()
    literal_imports: list[str] = []
    discovers = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Call) and _is_call_to(node, "import_module") and node.args \
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            literal_imports.append(node.args[0].value)
        elif isinstance(node, ast.Attribute) and node.attr == "iter_modules":
            discovers = True
    names.update(literal_imports)
    if discovers:  # iter_modules over a literally imported package: every module in it
        for pkg in literal_imports:
            init = module_file(root, pkg)
            if init is not None and init.name == "__init__.py":
                names.update(f"{pkg}.{p.stem}" for p in init.parent.glob("*.py"))
                names.update(f"{pkg}.{p.parent.name}" for p in init.parent.glob("*/__init__.py"))
    return names


def _is_call_to(node: ast.Call, func: str) -> bool:
    f = node.func
    return (isinstance(f, ast.Attribute) and f.attr == func) or \
        (isinstance(f, ast.Name) and f.id == func)


def import_closure(root: Path, entry: str) -> set[Path]:
    """Every in-repo source file (under ``root/mimesis``) that importing ``entry`` can load,
    parents' ``__init__.py`` included.

    Raises:
        FileNotFoundError: ``entry`` has no source file under ``root``.
    """
    if module_file(root, entry) is None:
        raise FileNotFoundError(f"module {entry} has no source file under {root}")
    seen: dict[str, Path] = {}
    queue = [entry]
    while queue:
        name = queue.pop()
        if name in seen or name.split(".")[0] != PACKAGE:
            continue
        path = module_file(root, name)
        if path is None:
            continue
        seen[name] = path
        parts = name.split(".")
        queue.extend(".".join(parts[:i]) for i in range(1, len(parts)))
        queue.extend(_imported_names(name, path, root))
    return set(seen.values())


def needed_files(root: Path, entry: str) -> set[str]:
    """Repo-relative posix paths of the modules of :func:`import_closure`, of the non-module
    files beside them and of every file in the ``data/`` folder of each package they belong
    to."""
    modules = import_closure(root, entry)
    files = {p.relative_to(root).as_posix() for p in modules}
    for pkg_dir in {p.parent for p in modules}:
        # package data next to the modules (e.g. mimesis/data/english_words.txt.gz)
        files.update(f.relative_to(root).as_posix() for f in pkg_dir.iterdir()
                     if f.is_file() and f.suffix not in (".py", ".pyc"))
        data = pkg_dir / DATA_DIR
        if data.is_dir() and not (data / "__init__.py").exists():
            files.update(f.relative_to(root).as_posix() for f in data.rglob("*")
                         if f.is_file() and "__pycache__" not in f.parts)
    return files


def compress(root: Path, files: set[str]) -> list[str]:
    """``files`` as dvc deps: a folder wherever every module and data file under it is needed
    (largest such folder, never the package root itself), single files elsewhere; sorted."""
    def tracked(folder: Path) -> set[str]:
        return {f.relative_to(root).as_posix() for f in folder.rglob("*")
                if f.is_file() and "__pycache__" not in f.parts
                and (f.suffix == ".py" or DATA_DIR in f.relative_to(folder).parts
                     or folder.name == DATA_DIR)}

    out: list[str] = []
    remaining = set(files)
    package_root = root / PACKAGE
    folders = sorted({(root / f).parent for f in files}, key=lambda p: len(p.parts))
    for folder in folders:
        if folder == package_root or not folder.is_relative_to(package_root):
            continue
        rel = folder.relative_to(root).as_posix()
        if any(rel.startswith(d + "/") or rel == d for d in out):
            continue
        inside = tracked(folder)
        if inside and inside <= files:
            out.append(rel)
            remaining -= {f for f in remaining if f.startswith(rel + "/")}
    return sorted(out + sorted(remaining))


def _covered(path: str, deps: list[str]) -> bool:
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in deps)


def _is_code_dep(dep: str) -> bool:
    """A dep this module derives: a .py file or a folder under the package (package data files
    beside the modules are derived too: :func:`stage_report`)."""
    return dep.startswith(PACKAGE + "/") and (dep.endswith(".py") or "." not in Path(dep).name)


def stage_report(root: Path, stage: str, entry: dict) -> DepsReport:
    module, _ = stage_command(root, stage)
    deps = [str(d) for d in entry.get("deps", [])]
    needed = needed_files(root, module)
    derived = compress(root, needed)
    listed = tuple(d for d in deps if _is_code_dep(d) or d in derived)
    uncovered = tuple(sorted(f for f in needed if not _covered(f, deps)))
    return DepsReport(stage, listed, tuple(derived), uncovered)


def check(root: Path) -> list[DepsReport]:
    """A :class:`DepsReport` per stage of ``root/dvc.yaml``, in file order."""
    stages = yaml.safe_load((root / "dvc.yaml").read_text())["stages"]
    return [stage_report(root, name, entry) for name, entry in stages.items()]


def write(root: Path) -> list[str]:
    """Rewrite every stage's code deps in ``root/dvc.yaml`` to the derived ones, in place
    (comments, ``data/`` deps and hand-listed non-Python deps kept, in their order).

    Returns:
        The stages whose deps changed.

    Raises:
        ValueError: a stage's ``deps:`` block is not a plain ``- item`` list.
    """
    path = root / "dvc.yaml"
    text = path.read_text()
    changed = []
    for report in check(root):
        if report.listed == report.derived:
            continue
        text = _replace_deps(text, report.stage, report.derived)
        changed.append(report.stage)
    if changed:
        path.write_text(text)
    return changed


def _replace_deps(text: str, stage: str, derived: tuple[str, ...]) -> str:
    block = re.compile(rf"(?m)^(  {re.escape(stage)}:\n(?:    .*\n|\s*\n)*?    deps:\n)"
                       r"((?:      - .*\n)+)")
    match = block.search(text)
    if match is None:
        raise ValueError(f"dvc.yaml stage {stage}: no '    deps:' list of '      - ' items")
    items = [line[len("      - "):].strip() for line in match.group(2).splitlines()]
    data = [d for d in items if d.startswith("data/")]
    other = [d for d in items
             if not d.startswith("data/") and not _is_code_dep(d) and d not in derived]
    lines = "".join(f"      - {d}\n" for d in [*data, *derived, *other])
    return text[:match.start(2)] + lines + text[match.end(2):]
