"""Fact-reveal check: does each user state its hidden facts when an agent asks for them?

Why (docs/pitfalls.md #12): a user simulator that ignores its scenario can still look human to a
style or C2ST check, but an agent trained against it can never succeed — the facts it must draw out
are never said. For each training environment, tasks of the *training* part are reset (procedural
envs: seeds ``scenario_seed + k``; fixed task lists: a seeded sample of
:func:`~mimesis.envs.registry.fact_indices` ``"probe"``; neither is a task of the simulator's
grounding dialogues, :mod:`mimesis.train.grounding`), one hidden fact per task is picked and
asked for directly in several phrasings (:mod:`mimesis.envs.facts`). The user reads each
probe as it would in a rollout (``env.user_view``). Each probe is the first agent message of an episode, played through the real runtime exactly as the rollout engine
plays it (``UserSimulator.init_state(info["scenario"])``, then
``next_messages([(probe, state), …])``, one batched call per (user, env), the user's sampling
restarted from ``seed`` before each env; the agent speaks first in the envs, so there is no user
opening turn: measured, an opening turn first lowered the frozen simulator's rate to 2%). A probe counts as revealed when the env's own parser
(or the narrowest honest one where it has none; see each env's ``probes.py``) extracts the
right fact from the reply; a reply the runtime did not send (the user ended) is not a reveal.

Users (params ``users``): ``frozen`` — the training simulator (``<freeze_user>/simulator``,
built by :func:`~mimesis.users.factory.make_user`, sampled as train_agent samples it) — and
unseen-user entries, :class:`~mimesis.users.spec.UserSpec` dicts (e.g. the prompted base model,
the agenda user), built by :func:`~mimesis.users.unseen.build_unseen`.

Report per (user, env): ``rate`` (share of probes revealed), ``n`` (probes), ``n_tasks``, a
seeded percentile bootstrap 95% CI over tasks (:func:`~mimesis.eval.agents.stats.bootstrap_ci`
of the per-task rates), rates per fact kind, and example replies.

Run alone: ``python -m mimesis.eval.agents.fact_reveal --freeze-user data/freeze_user --out DIR``
(params from ``evaluate_agents.fact_reveal`` of params.yaml).
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from mimesis.envs.facts import Fact, task_fact
from mimesis.envs.registry import GROUNDING_SEED, env_names
from mimesis.eval.agents.stats import bootstrap_ci
from mimesis.schemas import Scenario
from mimesis.users.spec import UserSamplingParams

FROZEN = "frozen"


def _default_users() -> list[Any]:
    return [FROZEN, {"name": "prompted-smollm2", "kind": "prompted", "model": "smollm2-135m",
                     "prompt_style": "prompted_user", "max_new_tokens": 48, "batch_size": 40},
            {"name": "agenda", "kind": "agenda"}]


@dataclass(frozen=True)
class FactRevealParams:
    """params.yaml ``evaluate_agents.fact_reveal`` (one field per key)."""

    enabled: bool = True  # run the check in the evaluate_agents stage
    envs: list[str] = field(default_factory=lambda: env_names("train"))  # training envs probed
    n_tasks: int = 4  # training-split tasks per env (one fact each)
    phrasings: int = 2  # phrasings asked per fact (1-3)
    # "frozen" (the training simulator) and/or unseen-user UserSpec entries (dicts)
    users: list[Any] = field(default_factory=_default_users)
    # frozen simulator sampling: train_agent's (batch_size only sets speed)
    user: UserSamplingParams = field(default_factory=lambda: UserSamplingParams(batch_size=40))
    dtype: str = "float32"  # frozen simulator weights
    env_kwargs: dict[str, dict[str, Any]] = field(default_factory=dict)  # env -> constructor args
    scenario_seed: int = 0  # procedural seeds scenario_seed + k; seed of the fixed-list sample
    n_bootstrap: int = 1000
    examples: int = 3  # example replies per (user, env) in the report
    seed: int = 13  # sampling seed of the model users, restarted per env

    def __post_init__(self) -> None:
        from mimesis.envs.registry import check_envs
        from mimesis.users.spec import parse_unseen

        if self.n_tasks < 1 or not 1 <= self.phrasings <= 3 or self.n_bootstrap < 1:
            raise ValueError("fact_reveal: need n_tasks >= 1, phrasings in 1-3, n_bootstrap >= 1")
        if self.scenario_seed + self.n_tasks > GROUNDING_SEED:
            raise ValueError(f"fact_reveal: procedural probe seeds must stay below {GROUNDING_SEED} "
                             "(the simulator's grounding dialogues use the seeds from there on)")
        check_envs(self.envs, "train", self.env_kwargs)
        bad = [u for u in self.users if not (u == FROZEN or isinstance(u, Mapping))]
        if bad or not self.users:
            raise ValueError(f"fact_reveal.users: entries are '{FROZEN}' or unseen-user dicts, "
                             f"got {bad or 'none'}")
        parse_unseen([u for u in self.users if u != FROZEN])  # names, kinds, duplicates


@dataclass(frozen=True)
class Probe:
    """One question put to a user: the fact, which phrasing, and the user's scenario."""

    fact: Fact
    phrasing: int
    question: str
    scenario: Scenario
    to_user: str  # what the user reads: ``env.user_view(question)``, as in a rollout


def env_probes(env_name: str, p: FactRevealParams) -> list[Probe]:
    """``n_tasks × phrasings`` probes of one env, on training-split tasks (module docstring)."""
    from mimesis.envs import make
    from mimesis.envs.registry import fact_indices

    env = make(env_name, **p.env_kwargs.get(env_name, {}))
    if env.tasks is None:
        resets = [{"seed": p.scenario_seed + k} for k in range(p.n_tasks)]
    else:
        allowed = fact_indices(len(env.tasks), "probe")
        rng = np.random.default_rng(p.scenario_seed)
        picked = rng.choice(allowed, size=min(p.n_tasks, len(allowed)), replace=False)
        resets = [{"seed": p.scenario_seed, "options": {"index": int(i)}} for i in picked]
    probes = []
    for position, kwargs in enumerate(resets):
        _, info = env.reset(**kwargs)
        fact = task_fact(env, position)
        probes += [Probe(fact, k, q, info["scenario"], env.user_view(q))
                   for k, q in enumerate(fact.questions[:p.phrasings])]
    return probes


def play(simulator, probes: Sequence[Probe]) -> list[dict[str, Any]]:
    """Ask every probe (one batched ``next_messages`` call); one record per probe."""
    states = [simulator.init_state(pr.scenario) for pr in probes]
    replies = simulator.next_messages([(pr.to_user, s) for pr, s in zip(probes, states,
                                                                         strict=True)])
    rows = []
    for pr, (reply, state) in zip(probes, replies, strict=True):
        f = pr.fact
        rows.append({"env": f.env, "task_id": f.task_id, "kind": f.kind, "truth": f.truth,
                     "phrasing": pr.phrasing, "question": pr.question, "reply": reply,
                     "revealed": bool(reply) and f.judge(reply),
                     "end_reason": state.end_reason, "flags": list(state.flags),
                     "private": state.private[0] if state.private else state.end_reasoning})
    return rows


def summarize(rows: Sequence[Mapping[str, Any]], n_bootstrap: int = 1000, n_examples: int = 3,
              seed: int = 0) -> dict[str, Any]:
    """Rate, n, bootstrap CI over tasks, per-kind rates and examples of one user's rows of one
    env.

    >>> s = summarize([{"task_id": "a", "kind": "k", "revealed": True, "reply": "x"},
    ...                {"task_id": "b", "kind": "k", "revealed": False, "reply": "y"}])
    >>> s["rate"], s["n"], s["n_tasks"]
    (0.5, 2, 2)
    """
    by_task: dict[str, list[float]] = defaultdict(list)
    by_kind: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        by_task[r["task_id"]].append(float(r["revealed"]))
        by_kind[r["kind"]].append(float(r["revealed"]))
    lo, hi = bootstrap_ci([float(np.mean(v)) for v in by_task.values()], n_bootstrap, seed=seed)
    hits = [r for r in rows if r["revealed"]][: (n_examples + 1) // 2]
    misses = [r for r in rows if not r["revealed"]][: n_examples - len(hits)]
    return {"rate": float(np.mean([r["revealed"] for r in rows])) if rows else float("nan"),
            "n": len(rows), "n_tasks": len(by_task), "ci_low": lo, "ci_high": hi,
            "by_kind": {k: float(np.mean(v)) for k, v in by_kind.items()},
            "ended": sum(not r["reply"] for r in rows),
            "examples": [{k: r.get(k, "") for k in ("question", "truth", "reply", "revealed")}
                         for r in hits + misses]}


def build_users(freeze_user_dir: Path, p: FactRevealParams) -> dict[str, Any]:
    """User name → a zero-argument loader of its :class:`UserSimulator` (loaded one at a time)."""
    from mimesis.users.unseen import build_unseen

    sim_dir = Path(freeze_user_dir) / "simulator"
    unseen = build_unseen([u for u in p.users if u != FROZEN], sim_dir, max_turns=2)

    def frozen():
        from mimesis.users.factory import make_user
        from mimesis.users.spec import UserSpec

        spec = UserSpec(FROZEN, "frozen", model=str(sim_dir))
        return make_user(spec.with_sampling(p.user, dtype=p.dtype, seed=p.seed), max_turns=2)

    return {(FROZEN if u == FROZEN else u["name"]):
            (frozen if u == FROZEN else (lambda s=unseen[u["name"]]: s)) for u in p.users}


def run_fact_reveal(freeze_user_dir: Path, out_dir: Path, p: FactRevealParams) -> dict[str, Any]:
    """Probe every user in every env; write ``fact_reveal.json`` / ``.md`` to ``out_dir``.

    Returns:
        ``{user: {env: {rate, n, n_tasks, ci_low, ci_high}}, "seconds": s}`` (for metrics.json);
        also logged to an active MLflow run as ``fact_reveal/<user>/<env>`` (the rate).
    """
    import gc

    from mimesis.users.reseed import reseed_user
    from mimesis.users.unseen import release

    started = time.time()
    probes = {env: env_probes(env, p) for env in p.envs}
    results: dict[str, dict[str, Any]] = {}
    rows_out: list[dict[str, Any]] = []
    users = build_users(freeze_user_dir, p)
    bar = tqdm(total=len(users) * len(p.envs), desc="fact reveal", unit="env")
    for name, load in users.items():
        simulator, rows = load(), []
        for env in p.envs:  # restarted per env: an env's replies do not depend on the others'
            bar.set_postfix_str(f"{name} / {env}")
            reseed_user(simulator, p.seed)
            rows += play(simulator, probes[env])
            bar.update()
        release({name: simulator})
        del simulator
        gc.collect()
        results[name] = {env: summarize([r for r in rows if r["env"] == env], p.n_bootstrap,
                                        p.examples) for env in p.envs}
        rows_out += [{"user": name, **r} for r in rows]
    bar.close()
    report = {"params": asdict(p), "results": results, "rows": rows_out,
              "seconds": round(time.time() - started, 1)}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "fact_reveal.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    (out_dir / "fact_reveal.md").write_text(markdown(results, p))
    metrics = {u: {e: {k: c[k] for k in ("rate", "n", "n_tasks", "ci_low", "ci_high")}
                   for e, c in envs.items()} for u, envs in results.items()}
    _log_mlflow(metrics)
    return {**metrics, "seconds": report["seconds"]}


def _log_mlflow(metrics: Mapping[str, Mapping[str, Mapping[str, float]]]) -> None:
    import mlflow

    if mlflow.active_run() is None:
        return
    mlflow.log_metrics({f"fact_reveal/{u}/{e}": c["rate"] for u, envs in metrics.items()
                        for e, c in envs.items() if c["rate"] == c["rate"]})


def markdown(results: Mapping[str, Mapping[str, Mapping[str, Any]]], p: FactRevealParams) -> str:
    """The env × user table (rate, 95% CI over tasks, n) and example replies."""
    users = list(results)
    lines = ["# Fact reveal: does the user state its hidden fact when asked?", "",
             (f"{p.n_tasks} training-split tasks per env, one fact each, {p.phrasings} "
              "phrasings; revealed = the env's parser extracts the right fact from the reply. "
              "Cells: rate [95% bootstrap CI over tasks] (n probes)."), "",
             "| env | " + " | ".join(users) + " |", "|---|" + "---|" * len(users)]
    for env in p.envs:
        cells = [results[u][env] for u in users]
        lines.append(f"| {env} | " + " | ".join(
            f"{c['rate']:.0%} [{c['ci_low']:.0%}, {c['ci_high']:.0%}] ({c['n']})"
            for c in cells) + " |")
    lines += ["", ("TurtleGym asks one yes and one no question in turn: a user that always says "
                   "yes scores about 50% there."), "", "## Examples", ""]
    for u in users:
        for env in p.envs:
            for ex in results[u][env]["examples"]:
                reply = " ".join(ex["reply"].split())[:160] or "(no reply: the user ended)"
                lines.append(f"- **{u} / {env}** {'✓' if ex['revealed'] else '✗'} "
                             f"Q: {ex['question'][:100]} — truth: {ex['truth'][:60]} — "
                             f"A: {reply}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    from mimesis.runtime_env import configure_environment

    configure_environment()
    from mimesis.params import build, stage_params

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--freeze-user", type=Path, default=Path("data/freeze_user"))
    parser.add_argument("--out", type=Path, default=Path("data/evaluate_agents"))
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    args = parser.parse_args(argv)
    values = stage_params("evaluate_agents", args.params).get("fact_reveal", {})
    p = build(FactRevealParams, values, "evaluate_agents.fact_reveal")
    metrics = run_fact_reveal(args.freeze_user, args.out, p)
    print(json.dumps({u: {e: round(c["rate"], 3) for e, c in envs.items()}
                      for u, envs in metrics.items() if isinstance(envs, dict)}, indent=1))
    print(f"-> {args.out}/fact_reveal.md, fact_reveal.json ({metrics['seconds']} s)")


if __name__ == "__main__":
    main()
