"""tau2's reward for a TauGym trajectory, with tau2's database loads cut where the result is
known.

tau2's ``evaluate_simulation`` imports litellm, so its ``ALL`` branch is re-implemented here with
tau2's own evaluators (``EnvironmentEvaluator``'s rule, ``CommunicateEvaluator``,
``ActionEvaluator``); the LLM-judged NL assertions are refused at task load time. The caches:
gold hashes per task (replayed once, and not at all when no gold action writes), initial-state
hashes per task, pristine hashes and write tools per domain (docs/environments.md).
tests/envs/test_envs_tau.py checks every path against tau2's evaluator.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache

# First: its loguru guard must run before any tau2 import below.
from mimesis.envs.tau.adapter import (
    TauTask,
    count_tool_calls,
    initial_history,
    make_environment,
    start_environment,
)

# isort: split
from tau2.data_model.message import Message
from tau2.data_model.tasks import RewardType
from tau2.environment.environment import Environment
from tau2.environment.toolkit import ToolType
from tau2.evaluator.evaluator_action import ActionEvaluator
from tau2.evaluator.evaluator_communicate import CommunicateEvaluator

# Reward components that need an LLM judge; tasks scored on them are refused at load time.
LLM_JUDGED = {RewardType.NL_ASSERTION}


def tau_reward_breakdown(task: TauTask, messages: Sequence[Message],
                         environment: Environment | None = None) -> dict[str, float]:
    """tau2's reward components for a trajectory that ended by agent or user stop.

    Mirrors the ``ALL`` branch of ``tau2.evaluator.evaluator.evaluate_simulation`` (not
    importable without litellm) using tau2's own evaluators: ``DB`` — the database hash after
    replaying the trajectory equals the hash after replaying the gold actions
    (``EnvironmentEvaluator``'s rule, which also covers ``ENV_ASSERTION``, with its database
    loads cached: :func:`_environment_reward`); ``COMMUNICATE`` — every
    ``communicate_info`` string occurs in some agent text message (``CommunicateEvaluator``);
    ``ACTION`` — every gold tool call was made (``ActionEvaluator``).

    Args:
        task: The task.
        messages: The full tau2 trajectory (initial history, tool calls and responses, agent and
            user text).
        environment: The environment the trajectory's tool calls ran in, when the caller has
            it (the episode's own): its database is the one tau2 would rebuild by replaying
            them, so the replay is skipped. ``None``: replayed on a fresh database, as tau2 does.

    Returns:
        Reward type name → 0.0 or 1.0, for the types in the task's ``reward_basis``.

    Raises:
        ValueError: the basis holds an LLM-judged type (``NL_ASSERTION``).
    """
    criteria = task.task.evaluation_criteria
    if criteria is None:
        return {}
    basis = set(criteria.reward_basis)
    if basis & LLM_JUDGED:
        raise ValueError(f"task {task.id}: NL_ASSERTION rewards need an LLM judge")
    trajectory = list(messages)
    parts: dict[str, float] = {}
    if basis & {RewardType.DB, RewardType.ENV_ASSERTION}:
        parts.update(_environment_reward(task, trajectory, environment))
    if RewardType.ACTION in basis:
        info = ActionEvaluator.calculate_reward(task=task.task, full_trajectory=trajectory)
        parts[RewardType.ACTION.value] = float(info.reward)
    if RewardType.COMMUNICATE in basis:
        info = CommunicateEvaluator.calculate_reward(task=task.task, full_trajectory=trajectory)
        parts[RewardType.COMMUNICATE.value] = float(info.reward)
    return parts


def tau_reward(task: TauTask, messages: Sequence[Message], stopped: bool) -> float:
    """The episode reward as tau2 defines it: 1.0 or 0.0.

    Args:
        task: The task.
        messages: The full tau2 trajectory.
        stopped: True when the episode ended by agent stop (``[answer]``/``[finish]``) or user
            stop; any other ending (truncation) scores 0, as in tau2.

    Returns:
        The product of :func:`tau_reward_breakdown` (1.0 when the task has no criteria).
    """
    if not stopped:
        return 0.0
    return math.prod(tau_reward_breakdown(task, messages).values())


def _db_hashes(env: Environment) -> tuple[str | None, str | None]:
    return env.get_db_hash(), env.get_user_db_hash()


@cache
def _pristine(domain: str) -> tuple[tuple[str | None, str | None], frozenset[tuple[str, str]]]:
    """The pristine database hashes of ``domain``, and its write tools as ``(requestor, name)``
    (tau2 types every tool: only a write tool changes a database)."""
    env = make_environment(domain)
    writes = {(requestor, name) for requestor, kit in (("assistant", env.tools),
                                                       ("user", env.user_tools))
              if kit is not None for name in kit.tools if kit.tool_type(name) == ToolType.WRITE}
    return _db_hashes(env), frozenset(writes)


@cache
def _gold_hashes(task: TauTask) -> tuple[str | None, str | None]:
    """Database hashes after the task's gold actions (tau2's gold environment); one replay per
    task, since they depend on the task alone, and none when no gold action writes."""
    writes = _pristine(task.domain)[1]
    gold = task.task.evaluation_criteria.actions or []
    if not any((action.requestor, action.name) in writes for action in gold):
        return _initial_hashes(task)
    env, _ = start_environment(task)
    for action in gold:
        try:
            env.make_tool_call(tool_name=action.name, requestor=action.requestor,
                               **action.arguments)
        except Exception:  # noqa: BLE001, S110 (tau2 logs and goes on: a failing gold action changes nothing)
            pass
    return _db_hashes(env)


@cache
def _initial_hashes(task: TauTask) -> tuple[str | None, str | None]:
    """Database hashes of the task's initial state: a trajectory without tool calls ends there.
    A task without an initial state starts from the pristine database (start_environment sets
    nothing then)."""
    if task.task.initial_state is None:
        return _pristine(task.domain)[0]
    return _db_hashes(start_environment(task)[0])


def _environment_reward(task: TauTask, trajectory: list[Message],
                        environment: Environment | None) -> dict[str, float]:
    """tau2's ``EnvironmentEvaluator.calculate_reward`` (tau2 26.3), its DB and ENV_ASSERTION
    components, with the two database loads it makes per call cut where the result is known:
    the gold hashes are cached per task; the predicted database is ``environment`` when given,
    the initial state's (cached) when the trajectory holds no tool call beyond the task's own
    history, else tau2's replay of the trajectory on a fresh database.
    tests/envs/test_envs_tau.py checks every path against tau2's evaluator."""
    criteria = task.task.evaluation_criteria
    if criteria.actions is None and criteria.env_assertions is None:
        return {}  # tau2 returns no breakdown then (reward 1.0 without components)
    if environment is None and (count_tool_calls(trajectory) > count_tool_calls(initial_history(task))
                                or criteria.env_assertions):
        environment = start_environment(task, trajectory)[0]
    predicted = _db_hashes(environment) if environment is not None else _initial_hashes(task)
    db = float(predicted == _gold_hashes(task))
    assertion = 1.0
    for check in criteria.env_assertions or []:
        assertion *= float(environment.run_env_assertion(check, raise_assertion_error=False))
    parts: dict[str, float] = {}
    if RewardType.DB in criteria.reward_basis:
        parts[RewardType.DB.value] = db
    if RewardType.ENV_ASSERTION in criteria.reward_basis:
        parts[RewardType.ENV_ASSERTION.value] = assertion
    return parts
