"""The MIMESIS pipeline as one Prefect flow: the stages in order, then the run summary."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from mimesis.pipeline import STAGES, StageResult
from mimesis.run_summary import run_command, write_run_summary
from mimesis.runtime_env import configure_environment
from mimesis.tracking import log_stage_times, pipeline_run
from tasks.stages import TASKS


# log_prints stays off: it patches print(), which breaks libraries that capture stdout
# (dill disassembles functions into a captured stdout to fingerprint datasets maps).
@flow(name="mimesis-pipeline")
def pipeline(root: str = ".", profile: str = "default", stages: list[str] | None = None,
             force: bool = False) -> list[StageResult]:
    """Run ``stages`` (default: all, in pipeline order) under one MLflow parent run; then write
    ``data/report/summary.md`` and log it to that run."""
    configure_environment()
    selected = [s for s in STAGES if s in (stages or STAGES)]
    results = []
    with pipeline_run(profile, selected):
        for name in selected:
            results.append(TASKS[name](root=root, force=force))
        log_stage_times(results)
        write_run_summary(Path(root), results, profile, run_command(profile, stages, force))
    return results
