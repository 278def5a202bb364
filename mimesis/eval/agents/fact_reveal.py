"""Fact-reveal check: does each user state its hidden facts when an agent asks for them?

Why (docs/pitfalls.md #12): a user simulator that ignores its scenario can still look human to a
style or C2ST check, but an agent trained against it can never succeed — the facts it must draw out
are never said. For each training environment, tasks of two splits are reset: ``heldout`` — the
tasks agents are evaluated on (procedural envs: seeds ``heldout_seed_offset + k``, as
:func:`~mimesis.eval.agents.evaluate.heldout_specs`; fixed task lists: a seeded sample of
:func:`~mimesis.envs.registry.task_indices` ``"eval"``, with ``3`` phrasings where a list holds
fewer than ``n_tasks`` such tasks, so that every env keeps ≥ 16 probes) — and ``train`` —
training-part tasks (procedural envs: seeds ``scenario_seed + k``; fixed task lists: a seeded
sample of :func:`~mimesis.envs.registry.fact_indices` ``"probe"``). Neither is a task of the
simulator's grounding dialogues (:mod:`mimesis.train.grounding`). One hidden fact per task is
picked and
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

Report per (user, split, env): ``rate`` (share of probes revealed), ``n`` (probes),
``n_tasks``, a seeded percentile bootstrap 95% CI over tasks
(:func:`~mimesis.eval.agents.stats.bootstrap_ci` of the per-task rates), ``false_end`` (share
of probes after which the user ended the episode instead of answering: a direct question about
a fact it has not stated yet, so no real user would leave) with its CI and its end reasons,
rates per fact kind, and example replies; per (user, split) the ``mean`` over envs of both
rates, with a bootstrap CI that resamples tasks within each env (:func:`mean_over_envs`).

Run alone: ``python -m mimesis.eval.agents.fact_reveal --freeze-user data/freeze_user --out DIR``
(params from ``evaluate_agents.fact_reveal`` of params.yaml).
"""

from __future__ import annotations

import argparse
import json
import math
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
from mimesis.eval.agents.evaluate import HELDOUT_SEED_OFFSET
from mimesis.eval.agents.stats import bootstrap_ci
from mimesis.schemas import Scenario
from mimesis.users.spec import UserSamplingParams

FROZEN = "frozen"
SPLITS = ("heldout", "train")


def _default_users() -> list[Any]:
    return [FROZEN, {"name": "prompted-smollm2", "kind": "prompted", "model": "smollm2-135m",
                     "prompt_style": "prompted_user", "max_new_tokens": 48, "batch_size": 40},
            {"name": "agenda", "kind": "agenda"}]


@dataclass(frozen=True)
class FactRevealParams:
    """params.yaml ``evaluate_agents.fact_reveal`` (one field per key)."""

    enabled: bool = True  # run the check in the evaluate_agents stage
    envs: list[str] = field(default_factory=lambda: env_names("train"))  # training envs probed
    n_tasks: int = 8  # tasks per env and split (one fact each)
    phrasings: int = 2  # phrasings asked per fact (1-3)
    # "frozen" (the training simulator) and/or unseen-user UserSpec entries (dicts)
    users: list[Any] = field(default_factory=_default_users)
    # frozen simulator sampling: train_agent's (batch_size only sets speed)
    user: UserSamplingParams = field(default_factory=lambda: UserSamplingParams(batch_size=40))
    dtype: str = "float32"  # frozen simulator weights
    env_kwargs: dict[str, dict[str, Any]] = field(default_factory=dict)  # env -> constructor args
    scenario_seed: int = 0  # procedural seeds scenario_seed + k; seed of the fixed-list sample
    splits: list[str] = field(default_factory=lambda: list(SPLITS))  # heldout and/or train
    heldout_seed_offset: int = HELDOUT_SEED_OFFSET  # first held-out procedural seed
    n_bootstrap: int = 1000
    examples: int = 3  # example replies per (user, env) in the report
    seed: int = 13  # sampling seed of the model users, restarted per env

    def __post_init__(self) -> None:
        from mimesis.envs.registry import check_envs
        from mimesis.users.spec import parse_unseen

        if self.n_tasks < 1 or not 1 <= self.phrasings <= 3 or self.n_bootstrap < 1:
            raise ValueError("fact_reveal: need n_tasks >= 1, phrasings in 1-3, n_bootstrap >= 1")
        if not self.splits or set(self.splits) - set(SPLITS):
            raise ValueError(f"fact_reveal.splits: a non-empty subset of {list(SPLITS)}, "
                             f"got {self.splits}")
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
    split: str
    phrasing: int
    question: str
    scenario: Scenario
    to_user: str  # what the user reads: ``env.user_view(question)``, as in a rollout


def env_probes(env_name: str, p: FactRevealParams, split: str = "train") -> list[Probe]:
    """``n_tasks × phrasings`` probes of one env on the tasks of ``split`` (module docstring).

    Raises:
        ValueError: an unknown ``split``.
    """
    from mimesis.envs import make
    from mimesis.envs.registry import fact_indices, task_indices

    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    env = make(env_name, **p.env_kwargs.get(env_name, {}))
    first = p.heldout_seed_offset if split == "heldout" else p.scenario_seed
    phrasings = p.phrasings
    if env.tasks is None:
        resets = [{"seed": first + k} for k in range(p.n_tasks)]
    else:
        allowed = (task_indices(len(env.tasks), "eval") if split == "heldout"
                   else fact_indices(len(env.tasks), "probe"))
        rng = np.random.default_rng(p.scenario_seed)
        picked = rng.choice(allowed, size=min(p.n_tasks, len(allowed)), replace=False)
        resets = [{"seed": first, "options": {"index": int(i)}} for i in picked]
        if len(picked) < p.n_tasks:  # a short held-out list: more wordings, not fewer probes
            phrasings = 3
    probes = []
    for position, kwargs in enumerate(resets):
        _, info = env.reset(**kwargs)
        fact = task_fact(env, position)
        probes += [Probe(fact, split, k, q, info["scenario"], env.user_view(q))
                   for k, q in enumerate(fact.questions[:phrasings])]
    return probes


def play(simulator, probes: Sequence[Probe]) -> list[dict[str, Any]]:
    """Ask every probe (one batched ``next_messages`` call); one record per probe."""
    states = [simulator.init_state(pr.scenario) for pr in probes]
    replies = simulator.next_messages([(pr.to_user, s) for pr, s in zip(probes, states,
                                                                         strict=True)])
    rows = []
    for pr, (reply, state) in zip(probes, replies, strict=True):
        f = pr.fact
        rows.append({"env": f.env, "split": pr.split, "task_id": f.task_id, "kind": f.kind,
                     "truth": f.truth, "ended": state.ended,
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
    ends_by_task: dict[str, list[float]] = defaultdict(list)
    by_kind: dict[str, list[float]] = defaultdict(list)
    reasons: dict[str, int] = defaultdict(int)
    for r in rows:
        by_task[r["task_id"]].append(float(r["revealed"]))
        ends_by_task[r["task_id"]].append(float(r.get("ended", not r["reply"])))
        by_kind[r["kind"]].append(float(r["revealed"]))
        if r.get("ended", not r["reply"]):
            reasons[str(r.get("end_reason"))] += 1
    lo, hi = bootstrap_ci([float(np.mean(v)) for v in by_task.values()], n_bootstrap, seed=seed)
    end_lo, end_hi = bootstrap_ci([float(np.mean(v)) for v in ends_by_task.values()],
                                  n_bootstrap, seed=seed)
    ended = [float(r.get("ended", not r["reply"])) for r in rows]
    hits = [r for r in rows if r["revealed"]][: (n_examples + 1) // 2]
    misses = [r for r in rows if not r["revealed"]][: n_examples - len(hits)]
    return {"rate": float(np.mean([r["revealed"] for r in rows])) if rows else float("nan"),
            "n": len(rows), "n_tasks": len(by_task), "ci_low": lo, "ci_high": hi,
            "false_end": float(np.mean(ended)) if rows else float("nan"),
            "false_end_ci_low": end_lo, "false_end_ci_high": end_hi,
            "end_reasons": dict(reasons),
            "by_kind": {k: float(np.mean(v)) for k, v in by_kind.items()},
            "ended": sum(not r["reply"] for r in rows),
            "examples": [{k: r.get(k, "") for k in ("question", "truth", "reply", "revealed")}
                         for r in hits + misses]}


def mean_over_envs(rows: Sequence[Mapping[str, Any]], key: str = "revealed",
                   n_bootstrap: int = 1000, seed: int = 0) -> dict[str, float]:
    """Mean over envs of one user's per-env rates of ``key`` (``revealed`` or ``ended``), with a
    percentile bootstrap 95% CI that resamples tasks within each env (envs are fixed: the
    five training envs are the population, their tasks the sample).

    Returns:
        ``{"mean", "ci_low", "ci_high", "n", "n_envs"}`` (``n``: probes).

    >>> rows = [{"env": "a", "task_id": "1", "revealed": True},
    ...         {"env": "b", "task_id": "2", "revealed": False}]
    >>> mean_over_envs(rows, n_bootstrap=10)["mean"]
    0.5
    """
    per_env: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        value = r.get(key, not r.get("reply")) if key == "ended" else r[key]
        per_env[r["env"]][r["task_id"]].append(float(value))
    tasks = {e: np.array([np.mean(v) for v in t.values()]) for e, t in per_env.items()}
    if not tasks:
        return {"mean": float("nan"), "ci_low": float("nan"), "ci_high": float("nan"),
                "n": 0, "n_envs": 0}
    mean = float(np.mean([t.mean() for t in tasks.values()]))
    rng = np.random.default_rng(seed)
    draws = np.mean([[rng.choice(t, size=len(t)).mean() for _ in range(n_bootstrap)]
                     for t in tasks.values()], axis=0)
    lo, hi = np.percentile(draws, [2.5, 97.5])
    return {"mean": mean, "ci_low": float(lo), "ci_high": float(hi), "n": len(rows),
            "n_envs": len(tasks)}


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
    probes = {env: [pr for split in p.splits for pr in env_probes(env, p, split)]
              for env in p.envs}
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
        results[name] = {}
        for split in p.splits:
            mine = [r for r in rows if r["split"] == split]
            results[name][split] = {env: summarize([r for r in mine if r["env"] == env],
                                                   p.n_bootstrap, p.examples) for env in p.envs}
            results[name][split]["mean"] = {
                **mean_over_envs(mine, "revealed", p.n_bootstrap),
                "false_end": mean_over_envs(mine, "ended", p.n_bootstrap)}
        rows_out += [{"user": name, **r} for r in rows]
    bar.close()
    report = {"params": asdict(p), "results": results, "rows": rows_out,
              "seconds": round(time.time() - started, 1)}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "fact_reveal.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    (out_dir / "fact_reveal.md").write_text(markdown(results, p))
    keys = ("rate", "n", "n_tasks", "ci_low", "ci_high", "false_end", "false_end_ci_low",
            "false_end_ci_high")
    metrics = {u: {split: {e: (c if e == "mean" else {k: c[k] for k in keys})
                           for e, c in envs.items()} for split, envs in splits.items()}
               for u, splits in results.items()}
    _log_mlflow(metrics)
    return {**metrics, "seconds": report["seconds"]}


def _log_mlflow(metrics: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> None:
    import mlflow

    if mlflow.active_run() is None:
        return
    flat = {}
    for u, splits in metrics.items():
        for split, envs in splits.items():
            for e, c in envs.items():
                if e == "mean":
                    flat[f"fact_reveal/{u}/{split}/mean"] = c["mean"]
                    flat[f"fact_reveal/{u}/{split}/mean_false_end"] = c["false_end"]["mean"]
                else:
                    flat[f"fact_reveal/{u}/{split}/{e}"] = c["rate"]
                    flat[f"fact_reveal/{u}/{split}/{e}/false_end"] = c["false_end"]
    mlflow.log_metrics({k: v for k, v in flat.items() if not math.isnan(v)})


def markdown(results: Mapping[str, Mapping[str, Mapping[str, Any]]], p: FactRevealParams) -> str:
    """Per split (held-out first): the env × user reveal table (rate, 95% CI over tasks, n), the
    mean over envs, the false-end table, and example replies."""
    users = list(results)
    titles = {"heldout": "Held-out tasks (the tasks agents are evaluated on)",
              "train": "Training-part tasks (never in the grounding dialogues)"}
    lines = ["# Fact reveal: does the user state its hidden fact when asked?", "",
             (f"Up to {p.n_tasks} tasks per env and split, one fact each, {p.phrasings} "
              "phrasings (3 where a held-out list is shorter); revealed = the env's parser "
              "extracts the right fact from the reply. False end = the user ended the episode "
              "right after the question instead of answering. Cells: rate [95% bootstrap CI "
              "over tasks] (n probes); mean: over the envs, tasks resampled within each env."),
             ""]

    def cell(rate: float, lo: float, hi: float, n: int) -> str:
        return f"{rate:.0%} [{lo:.0%}, {hi:.0%}] ({n})"

    for split in p.splits:
        for what, key in (("revealed", "rate"), ("false end", "false_end")):
            lines += [f"## {titles[split]}: {what}", "",
                      "| env | " + " | ".join(users) + " |", "|---|" + "---|" * len(users)]
            for env in p.envs:
                cells = [results[u][split][env] for u in users]
                lines.append(f"| {env} | " + " | ".join(
                    cell(c[key], c[f"{key}_ci_low" if key != "rate" else "ci_low"],
                         c[f"{key}_ci_high" if key != "rate" else "ci_high"], c["n"])
                    for c in cells) + " |")
            means = [results[u][split]["mean"] for u in users]
            means = [m if key == "rate" else m["false_end"] for m in means]
            lines.append("| **mean over envs** | " + " | ".join(
                cell(m["mean"], m["ci_low"], m["ci_high"], m["n"]) for m in means) + " |")
            lines.append("")
    lines += [("TurtleGym asks one yes and one no question in turn: a user that always says "
               "yes scores about 50% there."), "", "## Examples", ""]
    for u in users:
        for split in p.splits:
            for env in p.envs:
                for ex in results[u][split][env]["examples"]:
                    reply = " ".join(ex["reply"].split())[:160] or "(no reply: the user ended)"
                    lines.append(f"- **{u} / {split} / {env}** {'✓' if ex['revealed'] else '✗'} "
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
    print(json.dumps({u: {split: {e: round(c["mean"] if e == "mean" else c["rate"], 3)
                                  for e, c in envs.items()} for split, envs in splits.items()}
                      for u, splits in metrics.items() if isinstance(splits, dict)}, indent=1))
    print(f"-> {args.out}/fact_reveal.md, fact_reveal.json ({metrics['seconds']} s)")


if __name__ == "__main__":
    main()
