"""Thin Prefect tasks: one per stage, each delegating to ``mimesis.pipeline.run_stage``.

Caching is DVC's (content hashes of code, inputs and params in dvc.yaml/dvc.lock), not Prefect's:
Prefect's INPUTS policy would hash the path string, not the files behind it.
"""

from __future__ import annotations

from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE

from mimesis.params import ParamsError
from mimesis.pipeline import StageResult, run_stage


def retry_unless_params_error(task, task_run, state) -> bool:
    """Prefect ``retry_condition_fn``: invalid params fail the same way every time; retries are
    for transient failures (an annotator or coach endpoint)."""
    return not isinstance(state.result(raise_on_failure=False), ParamsError)


def _stage_task(name: str, retries: int = 0):
    @task(name=name, retries=retries, retry_delay_seconds=10, cache_policy=NO_CACHE,
          retry_condition_fn=retry_unless_params_error, tags=["mimesis", name])
    def _run(root: str = ".", force: bool = False, launcher: str = "") -> StageResult:
        return run_stage(Path(root), name, force=force, launcher=launcher)

    return _run


curate = _stage_task("curate")
# label may call an OpenAI-compatible annotator endpoint: retry transient network failures.
label = _stage_task("label", retries=2)
train_user = _stage_task("train_user")
freeze_user = _stage_task("freeze_user")
sft_agent = _stage_task("sft_agent")
train_agent = _stage_task("train_agent")
# distill_agent may call an OpenAI-compatible coach endpoint: retry transient network failures.
distill_agent = _stage_task("distill_agent", retries=1)
evaluate_user = _stage_task("evaluate_user")
evaluate_agents = _stage_task("evaluate_agents")

TASKS = {"curate": curate, "label": label, "train_user": train_user,
         "freeze_user": freeze_user, "evaluate_user": evaluate_user, "sft_agent": sft_agent,
         "train_agent": train_agent, "distill_agent": distill_agent,
         "evaluate_agents": evaluate_agents}
