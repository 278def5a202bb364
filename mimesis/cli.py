"""Command line: ``mimesis run``, ``mimesis stage``, ``mimesis status``.

The library never imports Prefect; ``mimesis run`` loads the flow lazily.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from mimesis.params import PROFILES, set_profile
from mimesis.pipeline import STAGES, StageResult, run_stage, stale_reason

app = typer.Typer(help="MIMESIS: learn user simulators from real conversations.",
                  no_args_is_help=True, add_completion=False)
console = Console()

ProfileOpt = Annotated[str | None, typer.Option(
    "--profile", "-p", help=f"One of {', '.join(PROFILES)}; written to params.yaml "
                            "(like `dvc exp run -S profile=...`). Default: keep params.yaml's.")]
RootOpt = Annotated[Path, typer.Option("--root", help="Project root (holds dvc.yaml).")]


def _check_root(root: Path) -> Path:
    if not (root / "dvc.yaml").exists():
        console.print(f"[red]{root.resolve()} has no dvc.yaml: run from the project root "
                      "or pass --root[/red]")
        raise typer.Exit(2)
    return root


def _apply_profile(root: Path, profile: str | None) -> None:
    if profile and set_profile(root / "params.yaml", profile):
        console.print(f"params.yaml: profile set to [bold]{profile}[/bold]")


def _table(results: list[StageResult], total: float) -> Table:
    table = Table(title=f"mimesis pipeline — {total:.0f} s")
    for col in ("stage", "ran", "seconds", "why"):
        table.add_column(col)
    for r in results:
        table.add_row(r.name, "yes" if r.ran else "skipped", f"{r.seconds:.1f}", r.reason[:60])
    return table


@app.command()
def run(
    profile: ProfileOpt = None,
    stages: Annotated[str | None, typer.Option(
        help="Comma-separated subset, e.g. 'label,train_user'. Default: all.")] = None,
    force: Annotated[bool, typer.Option(help="Run even if DVC says up to date.")] = False,
    root: RootOpt = Path("."),
) -> None:
    """Run the pipeline as a Prefect flow; each stage runs only if its code, inputs or params
    changed (per dvc.yaml), and every run is tracked in MLflow."""
    root = _check_root(root)
    selected = _parse_stages(stages)
    _apply_profile(root, profile)
    from flows.pipeline import pipeline  # Prefect stays out of the library import path

    start = time.perf_counter()
    active = profile or _active_profile(root)
    results = pipeline(root=str(root), profile=active, stages=selected, force=force)
    console.print(_table(results, time.perf_counter() - start))


@app.command()
def stage(
    name: Annotated[str, typer.Argument(help=f"One of {', '.join(STAGES)}.")],
    force: Annotated[bool, typer.Option(help="Run even if DVC says up to date.")] = False,
    root: RootOpt = Path("."),
) -> None:
    """Run one stage without Prefect (same code path, same dvc.lock bookkeeping)."""
    root = _check_root(root)
    _parse_stages(name)
    start = time.perf_counter()
    result = run_stage(root, name, force=force)
    console.print(_table([result], time.perf_counter() - start))


@app.command()
def status(root: RootOpt = Path(".")) -> None:
    """Which stages are stale and why (``dvc status`` per stage)."""
    root = _check_root(root)
    for name in STAGES:
        reason = stale_reason(root, name)
        console.print(f"{name:12s} {'[yellow]stale[/yellow]: ' + reason if reason else '[green]up to date[/green]'}")


def _parse_stages(spec: str | None) -> list[str]:
    if not spec:
        return list(STAGES)
    chosen = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in STAGES]
    if unknown:
        console.print(f"[red]unknown stage(s) {unknown}; choose from {list(STAGES)}[/red]")
        raise typer.Exit(2)
    return chosen


def _active_profile(root: Path) -> str:
    from mimesis.params import read_params

    return read_params(root / "params.yaml").get("profile", "default")


if __name__ == "__main__":
    app()
