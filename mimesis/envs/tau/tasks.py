"""TauGym's tasks: tau2's shipped airline/retail tasks and UserRL's TauGym files.

Split from :mod:`mimesis.envs.tau.adapter` (domains, tools, trajectory messages, reward), on
which it builds. Here: :func:`tau2_tasks` (the installed package's task files),
:func:`is_trivial` (tasks only LLM-judged assertions check, dropped by
:class:`~mimesis.envs.tau.gym.TauGym`), and :func:`load_userrl_tasks` (UserRL's
``tau_{train,test}.json``, with :func:`gold_action_error` to reject tasks whose gold actions fail).

Import order: tau2 is imported only after :mod:`mimesis.envs.tau.adapter`, whose import guard
(tau2's loguru output disabled; see its import notes on ``dotenv``) must run before the first
tau2 import.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

# First: its loguru guard must run before any tau2 import below.
from mimesis.envs.tau.adapter import DOMAINS, TauTask, make_environment, tool_names

# isort: split
from tau2.data_model.tasks import (
    Action,
    EvaluationCriteria,
    RewardType,
    Task,
    UserScenario,
)
from tau2.domains.airline import environment as _airline
from tau2.domains.retail import environment as _retail

from mimesis.envs.userrl import userrl_files
from mimesis.schemas import Reject

_TASK_LOADERS: dict[str, Callable[..., list[Task]]] = {
    "airline": _airline.get_tasks,
    "retail": _retail.get_tasks,
}


# ----------------------------------------------------------------- tasks
@cache
def _tau2_tasks(domains: tuple[str, ...], split: str | None) -> tuple[TauTask, ...]:
    return tuple(
        TauTask(f"{domain}-{t.id}", domain, t)  # type: ignore[arg-type]
        for domain in domains
        for t in _TASK_LOADERS[domain](split)
    )


def is_trivial(task: TauTask) -> bool:
    """True when the task's gold actions write nothing and it requires no communicated info.

    tau2 checks such tasks with LLM-judged natural-language assertions only, which cannot run
    offline; under the DB + communication reward an agent that stops at once would score 1.0 on
    them (24 of the 164 airline + retail tasks), a free reward that would teach RL to give up.
    """
    criteria = task.task.evaluation_criteria
    if criteria is None:
        return True
    writes = _write_tools(task.domain)
    return not any(a.name in writes for a in criteria.actions or []) and not (
        criteria.communicate_info)


@cache
def _write_tools(domain: str) -> frozenset[str]:
    """Names of the tools of ``domain`` that tau2 marks as writing to the database."""
    from tau2.environment.toolkit import ToolType

    tools = make_environment(domain).tools
    return frozenset(name for name in tool_names(domain)
                     if tools.tool_type(name) == ToolType.WRITE)


def tau2_tasks(domains: Sequence[str] = DOMAINS, split: str | None = "base") -> list[TauTask]:
    """tau2's tasks of ``domains`` from the installed package's data files.

    Args:
        domains: Any of ``airline`` (50 tasks) and ``retail`` (114).
        split: tau2's task split: ``base`` (all), ``train`` (airline 30, retail 74), ``test``
            (20, 40), or ``None`` (the whole file, same as ``base`` here).

    Raises:
        KeyError: unknown domain. ValueError: unknown split.
    """
    return list(_tau2_tasks(tuple(domains), split))


def _userrl_domain(row: dict[str, Any], actions: list[dict[str, Any]]) -> str | None:
    prefix = str(row.get("id", "")).split("-", 1)[0]
    if prefix in DOMAINS:
        return prefix
    names = {a.get("name") for a in actions}
    fits = [d for d in DOMAINS if names and names <= tool_names(d)]
    return fits[0] if len(fits) == 1 else None


def _userrl_row(row: Any, index: int) -> TauTask | Reject:
    """One UserRL record → task, or why not."""
    rid = str(row.get("id", index)) if isinstance(row, dict) else str(index)

    def reject(reason: str, detail: str = "") -> Reject:
        return Reject(id=rid, stage="envs.TauGym", reason=reason, detail=detail)

    spec = row.get("info", {}).get("task") if isinstance(row, dict) else None
    if not isinstance(spec, dict):
        return reject("missing_task")
    instruction, actions = spec.get("instruction"), spec.get("actions")
    if not isinstance(instruction, str) or not instruction.strip():
        return reject("missing_instruction")
    if not isinstance(actions, list) or not all(
        isinstance(a, dict) and isinstance(a.get("name"), str) and isinstance(a.get("kwargs"), dict)
        for a in actions
    ):
        return reject("bad_actions")
    domain = _userrl_domain(row, actions)
    if domain is None:
        return reject("unknown_domain")
    unknown = sorted({a["name"] for a in actions} - tool_names(domain))
    if unknown:
        return reject("unknown_tool", ", ".join(unknown))
    outputs = spec.get("outputs") or []
    task = Task(
        id=rid,
        user_scenario=UserScenario(instructions=instruction.strip()),
        evaluation_criteria=EvaluationCriteria(
            actions=[
                Action(action_id=f"{rid}_{i}", name=a["name"], arguments=a["kwargs"])
                for i, a in enumerate(actions)
            ],
            communicate_info=[str(o) for o in outputs],
            reward_basis=[RewardType.DB, RewardType.COMMUNICATE],
        ),
    )
    opening = row.get("obs") if isinstance(row.get("obs"), str) else None
    return TauTask(rid, domain, task, opening)  # type: ignore[arg-type]


def gold_action_error(task: TauTask) -> str | None:
    """Replay the gold actions on a fresh database; the first error, or ``None``.

    A gold action that fails leaves the gold database unchanged, so the task would reward doing
    nothing; UserRL's tau-bench-derived tasks have ~60 such records against tau2's databases.
    Costs one database load per task (~0.1 s retail, ~0.3 s airline).
    """
    env = make_environment(task.domain)
    criteria = task.task.evaluation_criteria
    for action in (criteria.actions or []) if criteria is not None else []:
        try:
            env.make_tool_call(action.name, requestor=action.requestor, **action.arguments)
        except Exception as exc:  # noqa: BLE001 (tau2 tools raise ValueError, TypeError, …)
            return f"{action.name}: {exc}"
    return None


def load_userrl_tasks(
    path: Path, split: str | None = None, replay: bool = False
) -> tuple[list[TauTask], list[Reject]]:
    """Read UserRL's TauGym files (``tau_train.json``, ``tau_test.json``).

    Each record is ``{id, obs, info: {task: {user_id, instruction, actions: [{name, kwargs}],
    outputs}}}`` (tau-bench format): ``instruction`` becomes the user scenario, ``actions`` the
    gold actions, ``outputs`` tau2's ``communicate_info``, ``obs`` the user's opening message.
    The domain comes from the id prefix (``retail-…``, ``airline-…``), else from the tool names.

    Args:
        path: A JSON file, or a folder holding the files directly or under ``TauGym/``.
        split: With a folder: ``train`` or ``test`` reads that file only; ``None`` reads both.
        replay: Also replay each task's gold actions and reject those with a failing action
            (see :func:`gold_action_error`; ~3 minutes for UserRL's 665 tasks).

    Returns:
        ``(tasks, rejects)``; every record is in exactly one of them.

    Raises:
        FileNotFoundError: no matching file at ``path``.
    """
    names = [f"tau_{split}.json"] if split else ["tau_train.json", "tau_test.json"]
    files = userrl_files(path, "TauGym", names)
    tasks: list[TauTask] = []
    rejects: list[Reject] = []
    for file in files:
        for i, row in enumerate(json.loads(file.read_text(encoding="utf-8"))):
            got = _userrl_row(row, i)
            if isinstance(got, TauTask) and replay and (error := gold_action_error(got)):
                got = Reject(
                    id=got.id, stage="envs.TauGym", reason="gold_action_error", detail=error
                )
            (tasks if isinstance(got, TauTask) else rejects).append(got)  # type: ignore[arg-type]
    return tasks, rejects
