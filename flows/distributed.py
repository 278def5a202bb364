"""The MIMESIS pipeline dispatched to work pools: each stage is a deployment run.

Same stages, order and MLflow parent run as ``flows/pipeline.py`` (which stays the local,
single-process flow), but each stage runs as the ``mimesis-stage/<stage>`` deployment
(``prefect.yaml``), so a worker of its pool runs it: ``gpu`` for training and generation-heavy
evaluation, ``cpu`` for the rest (``flows/stage_flows.py``).

Run (a Prefect server, the pools, the deployments and workers set up as in
docs/serving_and_scaling.md)::

    python -m flows.distributed --profile gpu              # every stage
    python -m flows.distributed --stages curate --dvc-sync # workers on other machines
"""

from __future__ import annotations

import argparse
from pathlib import Path

from prefect import flow
from prefect.deployments import run_deployment

from flows.stage_flows import deployment_name
from mimesis.params import PROFILES, read_params
from mimesis.pipeline import STAGES, StageResult, working_dir
from mimesis.runtime_env import configure_environment
from mimesis.tracking import log_stage_times, pipeline_run


class StageDispatchError(RuntimeError):
    """A stage's deployment run did not complete (failed, crashed, cancelled or timed out)."""


@flow(name="mimesis-distributed")
def distributed_pipeline(profile: str | None = None, stages: list[str] | None = None,
                         force: bool = False, dvc_sync: bool = False, root: str = ".",
                         poll_interval_s: float = 5.0,
                         stage_timeout_s: float | None = None) -> list[StageResult]:
    """Run ``stages`` (default: all, in pipeline order), each on its deployment's work pool.

    Args:
        profile: params.yaml profile the workers set (``None``: keep each checkout's).
        stages: Subset of ``STAGES``.
        force: Run stages even when DVC says up to date.
        dvc_sync: Hand ``dvc.lock`` to each worker and back; workers pull/push DVC outputs.
        root: This (the dispatcher's) checkout: MLflow database, ``dvc.lock`` kept here.
        poll_interval_s: How often to poll a running stage.
        stage_timeout_s: Give up on a stage after this long (``None``: wait).

    Raises:
        StageDispatchError: a stage's run did not complete.
    """
    configure_environment()
    root_path = Path(root).resolve()
    selected = [s for s in STAGES if s in (stages or STAGES)]
    active = profile or read_params(root_path / "params.yaml").get("profile", "default")
    results = []
    with working_dir(root_path), pipeline_run(active, selected) as run:
        for name in selected:
            results.append(dispatch(name, root_path, run.info.run_id, profile, force, dvc_sync,
                                    poll_interval_s, stage_timeout_s))
        log_stage_times(results)
    return results


def dispatch(name: str, root: Path, parent_run_id: str, profile: str | None, force: bool,
             dvc_sync: bool, poll_interval_s: float, timeout_s: float | None) -> StageResult:
    """Run stage ``name``'s deployment and wait for it; returns its :class:`StageResult`."""
    lock = root / "dvc.lock"
    parameters = {"stage": name, "profile": profile, "force": force,
                  "parent_run_id": parent_run_id, "dvc_sync": dvc_sync,
                  "dvc_lock": lock.read_text() if dvc_sync and lock.exists() else None}
    flow_run = run_deployment(deployment_name(name), parameters=parameters, timeout=timeout_s,
                              poll_interval=poll_interval_s)
    state = flow_run.state
    if state is None or not state.is_completed():
        kind = state.type.value if state else "no state"
        raise StageDispatchError(f"stage {name}: flow run {flow_run.name} ended {kind}: "
                                 f"{state.message if state else ''}")
    out = state.result()
    if dvc_sync and out.get("dvc_lock"):
        lock.write_text(out["dvc_lock"])
    print(f"{name}: deployment {deployment_name(name)} on pool {flow_run.work_pool_name} "
          f"(host {out['host']}) -> {'ran' if out['ran'] else 'up to date'} "
          f"in {out['seconds']:.1f} s")
    return StageResult(out["name"], out["ran"], out["seconds"], out["reason"])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default=None, help=" | ".join(PROFILES))
    parser.add_argument("--stages", default="", help="comma-separated subset")
    parser.add_argument("--force", action="store_true")
    parser.add_argument("--dvc-sync", action="store_true", help="workers pull/push via DVC")
    parser.add_argument("--root", default=".")
    parser.add_argument("--poll-interval", type=float, default=5.0)
    parser.add_argument("--stage-timeout", type=float, default=None)
    args = parser.parse_args(argv)
    stages = [s.strip() for s in args.stages.split(",") if s.strip()] or None
    unknown = sorted(set(stages or []) - set(STAGES))
    if unknown:
        parser.error(f"unknown stage(s) {unknown}; choose from {list(STAGES)}")
    distributed_pipeline(profile=args.profile, stages=stages, force=args.force,
                         dvc_sync=args.dvc_sync, root=args.root,
                         poll_interval_s=args.poll_interval, stage_timeout_s=args.stage_timeout)


if __name__ == "__main__":
    main()
