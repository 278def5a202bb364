"""Command line: ``mimesis run``, ``stage``, ``status``, ``report``, ``deps``, ``envs list``,
``serve``, ``chat``, ``evaluate-simulator``.

The library never imports Prefect or ``flows``; ``mimesis run`` starts the checkout's flow as a
process (``python -m flows``).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from mimesis.cli_simulator import chat, evaluate_simulator, serve
from mimesis.params import PROFILES, ParamsError, set_profile
from mimesis.pipeline import (
    STAGES,
    check_params,
    results_table,
    run_stage,
    stale_reason,
)

app = typer.Typer(help="MIMESIS: learn user simulators from real conversations.",
                  no_args_is_help=True, add_completion=False)
console = Console()

ProfileOpt = Annotated[str | None, typer.Option(
    "--profile", "-p", help=f"One of {', '.join(PROFILES)}; written to params.yaml "
                            "(like `dvc exp run -S profile=...`). Default: keep params.yaml's.")]
RootOpt = Annotated[Path, typer.Option("--root", help="Project root (holds dvc.yaml).")]


@app.callback()
def _entry() -> None:
    """Before any command: the offline, no-telemetry environment defaults (and OpenMP's passive
    wait policy, read once when torch loads), never at ``import mimesis``."""
    from mimesis.runtime_env import configure_environment

    configure_environment()


def _check_root(root: Path) -> Path:
    if not (root / "dvc.yaml").exists():
        console.print(f"[red]{root.resolve()} has no dvc.yaml: run from the project root "
                      "or pass --root[/red]")
        raise typer.Exit(2)
    return root


def _apply_profile(root: Path, profile: str | None) -> None:
    try:
        changed = bool(profile) and set_profile(root / "params.yaml", profile)
    except ParamsError as err:
        console.print(f"[red]{err}[/red]", highlight=False)
        raise typer.Exit(2) from err
    if changed:
        console.print(f"params.yaml: profile set to [bold]{profile}[/bold]")


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
    flow_command(root, "", selected, force)  # not a checkout: say so before touching params.yaml
    _apply_profile(root, profile)
    # The flow process checks every selected stage's params before Prefect starts: it imports
    # the stage modules to run them anyway, so checking here would import them twice.
    command = flow_command(root, profile or _active_profile(root), selected, force)
    raise typer.Exit(subprocess.run(command, check=False, cwd=root.resolve()).returncode)


def flow_command(root: Path, profile: str, stages: list[str], force: bool) -> list[str]:
    """The ``python -m flows`` command that runs the checkout's Prefect flow.

    The library never imports ``flows`` and the wheel does not install it (orchestration lives
    in the project checkout, next to dvc.yaml), so ``mimesis run`` starts it as a process there.

    Raises:
        typer.Exit: (code 2) ``root`` has no ``flows/__main__.py``: not a project checkout.
    """
    if not (root / "flows" / "__main__.py").is_file():
        console.print(f"[red]{root.resolve()} has no flows/__main__.py: `mimesis run` needs the "
                      "project checkout (use `mimesis stage` or `dvc repro` otherwise)[/red]")
        raise typer.Exit(2)
    command = [sys.executable, "-m", "flows", "--root", ".", "--profile", profile]
    if list(stages) != list(STAGES):
        command += ["--stages", ",".join(stages)]
    return command + (["--force"] if force else [])


@app.command()
def stage(
    name: Annotated[str, typer.Argument(help=f"One of {', '.join(STAGES)}.")],
    force: Annotated[bool, typer.Option(help="Run even if DVC says up to date.")] = False,
    root: RootOpt = Path("."),
) -> None:
    """Run one stage without Prefect (same code path, same dvc.lock bookkeeping)."""
    root = _check_root(root)
    _parse_stages(name)
    _check_params(root, [name])
    start = time.perf_counter()
    result = run_stage(root, name, force=force)
    console.print(results_table([result], time.perf_counter() - start))


@app.command()
def status(root: RootOpt = Path(".")) -> None:
    """Which stages are stale and why (``dvc status`` per stage)."""
    root = _check_root(root)
    width = max(map(len, STAGES))
    for name in STAGES:
        reason = stale_reason(root, name)
        state = f"[yellow]stale[/yellow]: {reason}" if reason else "[green]up to date[/green]"
        console.print(f"{name:<{width}} {state}")


@app.command()
def report(root: RootOpt = Path(".")) -> None:
    """(Re)write data/report/summary.md from what data/ holds (the last run's stage times,
    realism, agents, fact reveal, plots); runs nothing."""
    from mimesis.run_summary import write_summary

    root = _check_root(root)
    try:
        path = write_summary(root)
    except ValueError as err:
        console.print(f"[red]{err}[/red]", highlight=False)
        raise typer.Exit(2) from err
    console.print(f"run summary: {path}")


@app.command()
def deps(
    write: Annotated[bool, typer.Option(
        "--write", help="Rewrite the code deps in dvc.yaml (default: only check).")] = False,
    root: RootOpt = Path("."),
) -> None:
    """Check (or, with --write, rewrite) each stage's code deps in dvc.yaml against the modules
    its entry module imports; exits 1 when a check finds a difference."""
    from mimesis.deps import check
    from mimesis.deps import write as write_deps

    root = _check_root(root)
    if write:
        changed = write_deps(root)
        console.print(f"dvc.yaml: code deps rewritten for {', '.join(changed)}" if changed
                      else "dvc.yaml: code deps already derived from the imports")
        return
    bad = [r for r in check(root) if not r.ok]
    for r in bad:
        extra = sorted(set(r.listed) - set(r.derived))
        missing = sorted(set(r.derived) - set(r.listed))
        console.print(f"[yellow]{r.stage}[/yellow]: {len(r.uncovered)} needed files not "
                      f"covered {list(r.uncovered)[:8]}; to add {missing}; to drop {extra}",
                      highlight=False)
    if bad:
        console.print("run [bold]mimesis deps --write[/bold] to fix dvc.yaml")
        raise typer.Exit(1)
    console.print("dvc.yaml: every stage's code deps match its imports")


envs_app = typer.Typer(help="Agent environments (gymnasium API).", no_args_is_help=True)
app.add_typer(envs_app, name="envs")


@envs_app.command("list")
def envs_list() -> None:
    """Every registered environment with its split, scenario count and data source."""
    from mimesis.envs import list_envs

    table = Table(title="mimesis agent environments")
    for col in ("env", "split", "scenarios", "source"):
        table.add_column(col)
    for spec in list_envs():
        count = "procedural (one per seed)" if spec.n_scenarios is None else str(spec.n_scenarios)
        table.add_row(spec.name, spec.split, count, spec.source)
    console.print(table)


def _parse_stages(spec: str | None) -> list[str]:
    if not spec:
        return list(STAGES)
    chosen = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in STAGES]
    if unknown:
        console.print(f"[red]unknown stage(s) {unknown}; choose from {list(STAGES)}[/red]")
        raise typer.Exit(2)
    return chosen


def _check_params(root: Path, names: list[str]) -> None:
    """Every named stage's params, built before anything runs: a typo in the last stage's
    section fails in a second, not after the earlier stages ran."""
    for name in names:
        try:
            check_params(root, name)
        except ParamsError as e:
            console.print(f"[red]{e}[/red]", highlight=False)
            raise typer.Exit(2) from None


def _active_profile(root: Path) -> str:
    from mimesis.params import read_params

    return read_params(root / "params.yaml").get("profile", "default")


# The simulator's own commands (serve, chat, evaluate-simulator) live in their module.
app.command()(serve)
app.command()(chat)
app.command("evaluate-simulator")(evaluate_simulator)


if __name__ == "__main__":
    app()
