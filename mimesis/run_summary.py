"""The run summary: one Markdown page of what the last pipeline run produced.

``data/report/summary.md`` holds the run's date, commit, profile and command, each stage's time
(ran or up to date), the head of the realism table, of the agents report and the fact-reveal
tables (both splits, without the example replies), and links to every plot under
``data/*/plots``. The Prefect flow writes it after its stages and logs it to its MLflow parent
run (artifact ``report/summary.md``); ``mimesis report`` rewrites it from what ``data/`` holds,
running nothing. A part whose file is missing says "not run" instead of failing.

Reads (all optional): ``data/report/run.json`` (the run's record, written with the summary),
``data/evaluate_user/table.md``, ``data/evaluate_agents/agents.md``,
``data/evaluate_agents/fact_reveal.md``, ``data/**/plots/*.png``.
Writes: ``data/report/run.json`` (:func:`record_run`), ``data/report/summary.md``. Neither is a
DVC output: the summary describes a run, it is not an input of any stage.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from mimesis.pipeline import STAGES, StageResult
from mimesis.tracking import git_commit

REPORT_DIR = Path("data") / "report"
SUMMARY_NAME = "summary.md"
RUN_NAME = "run.json"
REALISM_PATH = Path("data") / "evaluate_user" / "table.md"
AGENTS_PATH = Path("data") / "evaluate_agents" / "agents.md"
FACT_REVEAL_PATH = Path("data") / "evaluate_agents" / "fact_reveal.md"
NOT_RUN = "not run"
_HEADING = re.compile(r"^(#+) ")


@dataclass(frozen=True)
class RunRecord:
    """What a pipeline run was: when, at which commit, with which profile and command, and how
    long each of its stages took.

    Attributes:
        date: Start of the summary, ISO 8601 UTC to the minute (``2026-12-03T14:05Z``).
        commit: ``git rev-parse HEAD`` of the checkout, ``+dirty`` when tracked files changed,
            ``unknown`` outside git.
        profile: The params.yaml profile the run used.
        command: The command that reproduces the run (``mimesis run --profile default``).
        stages: One :class:`~mimesis.pipeline.StageResult` per stage the run covered, in order.
    """

    date: str
    commit: str
    profile: str
    command: str
    stages: tuple[StageResult, ...]


def run_command(profile: str, stages: Sequence[str] | None = None, force: bool = False) -> str:
    """The ``mimesis run`` command line of a run (``--stages`` only for a subset).

    >>> run_command("smoke", ["curate", "label"], force=True)
    'mimesis run --profile smoke --stages curate,label --force'
    >>> run_command("default")
    'mimesis run --profile default'
    """
    chosen = [s for s in STAGES if s in (stages or STAGES)]
    subset = f" --stages {','.join(chosen)}" if chosen != list(STAGES) else ""
    return f"mimesis run --profile {profile}{subset}" + (" --force" if force else "")


def record_run(
    root: Path,
    results: Sequence[StageResult],
    profile: str,
    command: str,
    now: datetime | None = None,
) -> RunRecord:
    """Write ``<root>/data/report/run.json`` for this run and return it.

    Args:
        root: Project root (holds ``data/``).
        results: The run's stage results, in order.
        profile: The profile the run used.
        command: The command line that reproduces it (:func:`run_command`).
        now: The run's time (default: now, UTC).
    """
    date = (now or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%MZ")
    record = RunRecord(date, git_commit(Path(root)), profile, command, tuple(results))
    path = Path(root) / REPORT_DIR / RUN_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps({**asdict(record), "stages": [asdict(r) for r in results]}, indent=1)
    )
    return record


def load_run(root: Path) -> RunRecord | None:
    """The record :func:`record_run` left in ``<root>/data/report/run.json``, or None.

    Raises:
        ValueError: the file exists but is not such a record.
    """
    path = Path(root) / REPORT_DIR / RUN_NAME
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
        stages = tuple(StageResult(**s) for s in data.pop("stages"))
        return RunRecord(**data, stages=stages)
    except (json.JSONDecodeError, KeyError, TypeError) as err:
        raise ValueError(
            f"{path} is not a run record ({err}): delete it and run `mimesis report` again"
        ) from err


def build_summary(root: Path, run: RunRecord | None) -> str:
    """The summary's Markdown for the project at ``root``.

    Args:
        root: Project root (holds ``data/``).
        run: The run's record; None when no pipeline run is recorded (the stage-time part then
            says "not run").

    Returns:
        Markdown text; every missing part reads "not run" and names the file it looked for.
    """
    root = Path(root)
    lines = ["# mimesis run summary", ""]
    if run is None:
        lines += [
            (
                f"Pipeline run: {NOT_RUN} (no {REPORT_DIR / RUN_NAME}; `mimesis run` "
                "writes it). The parts below are what data/ holds now."
            ),
            "",
        ]
    else:
        total = sum(r.seconds for r in run.stages) / 60
        lines += [
            f"- date: {run.date}",
            f"- commit: {run.commit}",
            f"- profile: {run.profile}",
            f"- command: `{run.command}`",
            f"- stage time: {total:.1f} min",
            "",
        ]
    lines += ["## Stages", "", *_stage_table(run), ""]
    lines += _part(root, "Realism of the frozen simulator", REALISM_PATH, _before_sections)
    lines += _part(root, "Agents", AGENTS_PATH, _without_per_env)
    lines += _part(root, "Fact reveal", FACT_REVEAL_PATH, _without_examples)
    lines += ["## Plots", "", *_plot_links(root), ""]
    return "\n".join(lines)


def write_summary(root: Path, run: RunRecord | None = None) -> Path:
    """Write ``<root>/data/report/summary.md`` (``run``: default, the recorded run if any).

    Returns:
        The summary's path.

    Raises:
        ValueError: ``data/report/run.json`` is unreadable (see :func:`load_run`).
    """
    run = run if run is not None else load_run(root)
    path = Path(root) / REPORT_DIR / SUMMARY_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(build_summary(root, run))
    return path


def write_run_summary(
    root: Path, results: Sequence[StageResult], profile: str, command: str
) -> Path:
    """After a pipeline run: record it, write the summary and log it to the active MLflow run
    (the pipeline's parent run) as ``report/summary.md``; without an active run, only the file.

    Returns:
        The summary's path.
    """
    path = write_summary(root, record_run(root, results, profile, command))
    import mlflow

    if mlflow.active_run() is not None:
        mlflow.log_artifact(str(path), "report")
    return path


def _stage_table(run: RunRecord | None) -> list[str]:
    if run is None:
        return [f"Stage times: {NOT_RUN}."]
    rows = ["| stage | ran | seconds |", "|---|---|---:|"]
    rows += [
        f"| {r.name} | {'ran' if r.ran else 'up to date'} | {r.seconds:.1f} |" for r in run.stages
    ]
    return rows


def _part(root: Path, title: str, rel: Path, head) -> list[str]:
    """A titled section: ``head`` of the file at ``rel``, its headings one level down, and a
    link to the whole file; "not run" when the file is missing."""
    path = root / rel
    if not path.is_file():
        return [f"## {title}", "", f"{NOT_RUN} (no {rel.as_posix()})", ""]
    lines = path.read_text().splitlines()
    if lines and lines[0].startswith("# "):
        lines = lines[1:]
    body = [_demote(line) for line in head(lines)]
    link = os.path.relpath(path, root / REPORT_DIR)
    return [f"## {title}", "", *_trim(body), "", f"Full: [{rel.as_posix()}]({link})", ""]


def _before_sections(lines: list[str]) -> list[str]:
    """The lines before the first ``## `` heading (a table's lead, not its details)."""
    for i, line in enumerate(lines):
        if line.startswith("## "):
            return lines[:i]
    return lines


def _without_per_env(lines: list[str]) -> list[str]:
    """Every section except the per-environment ones (each ends at a heading of its level)."""
    return _without_sections(lines, "per environment")


def _without_examples(lines: list[str]) -> list[str]:
    """Every section except the example replies (the fact-reveal tables of both splits, their
    false ends and means over envs stay)."""
    return _without_sections(lines, "examples")


def _without_sections(lines: list[str], title: str) -> list[str]:
    """``lines`` without the sections whose heading holds ``title`` (case-insensitive); a
    section ends at the next heading of its level or above."""
    out: list[str] = []
    skip_level = 0
    for line in lines:
        if m := _HEADING.match(line):
            level = len(m.group(1))
            if skip_level and level <= skip_level:
                skip_level = 0
            if not skip_level and title in line.lower():
                skip_level = level
        if not skip_level:
            out.append(line)
    return out


def _demote(line: str) -> str:
    return "#" + line if _HEADING.match(line) else line


def _trim(lines: list[str]) -> list[str]:
    while lines and not lines[0].strip():
        lines = lines[1:]
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return lines


def _plot_links(root: Path) -> list[str]:
    data_dir = root / "data"
    plots = (
        sorted(p for p in data_dir.glob("**/plots/*.png") if (root / REPORT_DIR) not in p.parents)
        if data_dir.is_dir()
        else []
    )
    if not plots:
        return [f"{NOT_RUN} (no data/*/plots/*.png)"]
    return [
        f"- [{p.relative_to(root).as_posix()}]({os.path.relpath(p, root / REPORT_DIR)})"
        for p in plots
    ]
