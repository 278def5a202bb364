"""Run pipeline stages in-process, exactly when DVC says they are stale.

``dvc.yaml`` is the single source of truth: a stage's command (``python -m
mimesis.stages.<name> ...``) is parsed and its ``main(argv)`` called in this process — the same
``run()`` that ``dvc repro`` reaches — only when ``dvc status`` reports a changed dependency,
parameter or output. Afterwards ``dvc commit`` records the new state in ``dvc.lock``, so a later
``dvc repro`` has nothing to do and vice versa. Used by the Prefect tasks and ``mimesis stage``.
"""

from __future__ import annotations

import importlib
import os
import shlex
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml

STAGES: tuple[str, ...] = (
    "curate", "label", "train_user", "freeze_user", "evaluate_user", "sft_agent", "train_agent",
    "distill_agent", "evaluate_agents",
)


class PipelineError(RuntimeError):
    """dvc.yaml and the stage registry disagree, or a stage is unknown."""


@dataclass(frozen=True)
class StageResult:
    """Outcome of one stage: whether it ran (False = up to date) and its wall time in seconds."""

    name: str
    ran: bool
    seconds: float
    reason: str


@contextmanager
def working_dir(path: Path) -> Iterator[None]:
    previous = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(previous)


def dvc_stage(root: Path, name: str) -> dict:
    """The ``stages.<name>`` entry of ``root/dvc.yaml``.

    Raises:
        PipelineError: no such stage.
    """
    stages = (yaml.safe_load((root / "dvc.yaml").read_text()) or {}).get("stages", {})
    if name not in stages:
        raise PipelineError(f"unknown stage {name!r}; dvc.yaml has {sorted(stages)}")
    return stages[name]


def stage_command(root: Path, name: str) -> tuple[str, list[str]]:
    """(module, argv) parsed from the stage's ``cmd: python -m <module> <args>``."""
    argv = shlex.split(dvc_stage(root, name)["cmd"])
    if argv[:2] != ["python", "-m"] or len(argv) < 3:
        raise PipelineError(f"stage {name}: cmd must be 'python -m <module> ...', got {argv}")
    return argv[2], argv[3:]


def _outs(stage: dict) -> list[tuple[str, bool]]:
    """(path, persist) of every out and metric of a dvc stage entry."""
    out = []
    for entry in list(stage.get("outs", [])) + list(stage.get("metrics", [])):
        if isinstance(entry, dict):
            (path, opts), = entry.items()
            out.append((path, bool((opts or {}).get("persist", False))))
        else:
            out.append((entry, False))
    return out


def stale_reason(root: Path, name: str) -> str:
    """Why ``dvc status`` considers the stage stale, or ``""`` when it is up to date."""
    from dvc.repo import Repo

    with Repo(str(root)) as repo:
        status = repo.status(targets=[name])
    if not status:
        return ""
    parts = []
    for entries in status.values():
        for entry in entries:
            if isinstance(entry, dict):
                for kind, changes in entry.items():
                    parts.append(f"{kind}: {changes}")
            else:
                parts.append(str(entry))
    return "; ".join(parts)[:500] or "changed"


def check_params(root: Path, name: str) -> None:
    """Build stage ``name``'s params from ``<root>/params.yaml`` (its module's ``load_params``)
    without running anything.

    Raises:
        mimesis.params.ParamsError: the stage would refuse its params.
    """
    module_name, _ = stage_command(root, name)
    importlib.import_module(module_name).load_params(Path(root) / "params.yaml")


def run_stage(root: Path, name: str, force: bool = False, launcher: str = "") -> StageResult:
    """Run stage ``name`` of the project at ``root`` if it is stale (or ``force``).

    The stage's params are checked first (:func:`check_params`), so a bad value costs no
    outputs; then non-persistent outputs are removed, as ``dvc repro`` does, the stage's
    ``main(argv)`` runs with ``root`` as working directory, and ``dvc commit`` updates dvc.lock.
    With ``launcher`` (e.g. ``accelerate launch --config_file configs/accelerate/ddp.yaml``) the
    stage runs instead as ``<launcher> -m <module> <argv>`` in a subprocess (multi-GPU stages).

    Returns:
        StageResult with ``ran`` False when the stage was up to date.

    Raises:
        mimesis.params.ParamsError: invalid params (nothing was removed).
    """
    root = root.resolve()
    reason = "forced" if force else stale_reason(root, name)
    if not reason:
        return StageResult(name, ran=False, seconds=0.0, reason="up to date")
    module_name, argv = stage_command(root, name)
    check_params(root, name)
    stage = dvc_stage(root, name)
    start = time.perf_counter()
    with working_dir(root):
        for path, persist in _outs(stage):
            target = Path(path)
            if not persist and target.is_dir():
                shutil.rmtree(target)
            elif not persist and target.exists():
                target.unlink()
        if launcher:
            import subprocess

            subprocess.run([*shlex.split(launcher), "-m", module_name, *argv], check=True)
        else:
            importlib.import_module(module_name).main(argv)
        from dvc.repo import Repo

        with Repo(str(root)) as repo:
            repo.commit(target=name, force=True)
    return StageResult(name, ran=True, seconds=time.perf_counter() - start, reason=reason)


def results_table(results: list[StageResult], total: float):
    """A rich ``Table`` of the stages a run went through: ran or skipped, seconds, and why."""
    from rich.table import Table

    table = Table(title=f"mimesis pipeline — {total:.0f} s")
    for col in ("stage", "ran", "seconds", "why"):
        table.add_column(col)
    for r in results:
        table.add_row(r.name, "yes" if r.ran else "skipped", f"{r.seconds:.1f}", r.reason[:60])
    return table


def closing_line(root: Path, results: list[StageResult], total_seconds: float, profile: str) -> str:
    """The run's last log line: profile, total and per-stage minutes, and what the agent
    comparisons can say (the ``note`` that ``evaluate_agents`` wrote to its metrics.json: their
    n, the smallest detectable effect, and whether they are a smoke test or the claim).

    >>> closing_line(Path("/nonexistent"), [StageResult("curate", True, 63.0, "")], 63.0, "smoke")
    'mimesis run (profile smoke): 1.1 min | curate 1.1 min'
    """
    import json

    stages = ", ".join(f"{r.name} {r.seconds / 60:.1f} min" if r.ran else f"{r.name} up to date"
                       for r in results)
    line = f"mimesis run (profile {profile}): {total_seconds / 60:.1f} min | {stages}"
    metrics = Path(root) / "data" / "evaluate_agents" / "metrics.json"
    if any(r.name == "evaluate_agents" for r in results) and metrics.is_file():
        note = (json.loads(metrics.read_text()).get("agents") or {}).get("note")
        if note:
            line += f" | agents: {note}"
    return line
