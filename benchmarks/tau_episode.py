"""Cost of a TauGym episode: the env as shipped against tau2's own way, in one process.

Baseline (``tau2``): what the env did before its database was loaded lazily: a fresh tau2
environment at reset and tau2's ``EnvironmentEvaluator`` at the end (two more database loads and
a replay of the gold actions per episode). Ours (``mimesis``): :class:`~mimesis.envs.tau.gym.TauGym`
as it is (the database loads at the first tool call; the gold and initial-state hashes are cached
per task; the episode's own database is scored). Each episode kind is played under both, the
rewards must agree, and the table gives seconds per episode and the ratio.

Episode kinds, as a weak agent plays them: ``talk`` (no tool call, then ``[finish]``), ``read``
(one read call), ``gold`` (the task's gold calls). Tasks: the first ``--tasks`` of each domain
(``--domains``: airline, retail).

    python benchmarks/tau_episode.py                   # 3 tasks per domain, 2 repeats
    python benchmarks/tau_episode.py --tasks 5 --out tau.json
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

from mimesis.envs.tau import adapter
from mimesis.envs.tau.gym import TauGym, TauTask

KINDS = ("talk", "read", "gold")
_READ = {"airline": '[search] get_user_details {"user_id": "mia_li_3668"}',
         "retail": '[search] get_order_details {"order_id": "#W2378156"}'}


def episode(task: TauTask, kind: str) -> list[str]:
    """The agent's messages of one episode of ``kind`` on ``task``."""
    calls = [f"[search] {a.name} {json.dumps(a.arguments)}"
             for a in (task.task.evaluation_criteria.actions or [])]
    body = {"talk": ["[action] How can I help?"], "read": [_READ[task.domain]],
            "gold": calls}[kind]
    return [*body, "[finish]"]


def tau2_reward(task: TauTask, messages: list) -> float:
    """tau2's three evaluators on the trajectory, the DB check on fresh databases (two loads)."""
    from tau2.data_model.tasks import RewardType
    from tau2.evaluator.evaluator_action import ActionEvaluator
    from tau2.evaluator.evaluator_communicate import CommunicateEvaluator
    from tau2.evaluator.evaluator_env import EnvironmentEvaluator

    basis = set(task.task.evaluation_criteria.reward_basis)
    info = EnvironmentEvaluator.calculate_reward(
        environment_constructor=adapter._ENV_CONSTRUCTORS[task.domain], task=task.task,
        full_trajectory=messages)
    parts = [float(v) for v in (info.reward_breakdown or {}).values()]
    if RewardType.ACTION in basis:
        parts.append(ActionEvaluator.calculate_reward(task=task.task,
                                                      full_trajectory=messages).reward)
    if RewardType.COMMUNICATE in basis:
        parts.append(CommunicateEvaluator.calculate_reward(task=task.task,
                                                           full_trajectory=messages).reward)
    return math.prod(parts)


class _Unscored(TauGym):
    """The env with its own reward turned off: the baseline scores with tau2 instead."""

    def score(self) -> float:
        return 0.0


def play(task: TauTask, kind: str, baseline: bool) -> float:
    """One episode; returns its reward."""
    env = (_Unscored if baseline else TauGym)(tasks=[task])
    env.reset()
    if baseline:
        env.environment  # noqa: B018 (the load at reset, as before)
    reward = 0.0
    for message in episode(task, kind):
        _, reward, term, _, info = env.step(message)
        if info["to_user"] is not None and not term:
            _, reward, term, _, _ = env.observe_user("ok")
        if term:
            break
    return tau2_reward(task, env.messages) if baseline else reward


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=3, help="tasks per domain")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--domains", default=",".join(adapter.DOMAINS),
                        help="comma-separated tau2 domains (default: all shipped)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    tasks = [t for d in args.domains.split(",") for t in
             [x for x in TauGym.default_tasks() if x.domain == d][:args.tasks]]
    for task in tasks:  # warm the per-task caches and tau2's imports outside the timing
        play(task, "talk", baseline=False)
    rows = {}
    for kind in KINDS:
        seconds = {"tau2": 0.0, "mimesis": 0.0}
        for repeat in range(args.repeats):
            for task in tasks:
                rewards = {}
                for arm in ("tau2", "mimesis") if repeat % 2 == 0 else ("mimesis", "tau2"):
                    start = time.perf_counter()
                    rewards[arm] = play(task, kind, baseline=arm == "tau2")
                    seconds[arm] += time.perf_counter() - start
                if rewards["tau2"] != rewards["mimesis"]:
                    raise AssertionError(f"{task.id} {kind}: rewards differ {rewards}")
        n = args.repeats * len(tasks)
        rows[kind] = {"episodes": n, **{f"{a}_s": s / n for a, s in seconds.items()},
                      "speedup": seconds["tau2"] / max(seconds["mimesis"], 1e-9)}
    lines = ["| episode | n | tau2 s/episode | mimesis s/episode | speedup |", "|---|---|---|---|---|"]
    lines += [f"| {k} | {r['episodes']} | {r['tau2_s']:.3f} | {r['mimesis_s']:.3f} | "
              f"{r['speedup']:.1f}x |" for k, r in rows.items()]
    figures = {"kinds": rows, "tasks": [t.id for t in tasks], "markdown": "\n".join(lines)}
    print(figures["markdown"])
    if args.out:
        args.out.write_text(json.dumps(figures, indent=2))
    return figures


if __name__ == "__main__":
    main()
