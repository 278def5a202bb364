"""Fact-reveal check: does each user state its hidden facts when an agent asks for them?

Why (docs/pitfalls.md #12): a user simulator that ignores its scenario can still look human to a
style or C2ST check, but an agent trained against it can never succeed — the facts it must draw out
are never said. For each training environment, tasks of two splits are reset:

- ``heldout``: the tasks agents are evaluated on. Procedural envs: seeds
  ``heldout_seed_offset + k``, the seeds of :func:`~mimesis.eval.agents.evaluate.heldout_specs`
  (10 000 000 on: past the training streams, which lie below
  :data:`~mimesis.envs.registry.GROUNDING_SEED`, and past the grounding seeds, ``GROUNDING_SEED +
  k``; a test checks every profile); fixed task lists: a seeded sample of
  :func:`~mimesis.envs.registry.task_indices` ``"eval"`` (the evaluation-only 20 %), asked in 3
  phrasings where a list holds fewer than ``n_tasks`` such tasks, so that every env keeps ≥ 16
  probes at the defaults.
- ``train``: training-part tasks. Procedural envs: seeds ``scenario_seed + k``; fixed task lists:
  a seeded sample of :func:`~mimesis.envs.registry.fact_indices` ``"probe"``.

Neither is a task of the simulator's grounding dialogues (:mod:`mimesis.train.grounding`). One
hidden fact per task is picked and asked for directly in several phrasings
(:mod:`mimesis.envs.facts`). The user reads each probe as it would in a rollout
(``env.user_view``). Each probe is the first agent message of an episode, played through the real
runtime exactly as the rollout engine plays it (``UserSimulator.init_state(info["scenario"])``,
then ``next_messages([(probe, state), …])``, one batched call per (user, env) over both splits,
the user's sampling restarted from ``seed`` before each env; the agent speaks first in the envs,
so there is no user opening turn: measured, an opening turn first lowered the frozen simulator's
rate to 2%). A probe counts as revealed when the env's own parser (or the narrowest honest one
where it has none; see each env's ``probes.py``) extracts the right fact from the reply; a reply
the runtime did not send (the user ended) is not a reveal, it is a false end.

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
rates, with a bootstrap CI that resamples tasks within each env (numbers and report:
:mod:`mimesis.eval.agents.fact_report`).

Run alone: ``python -m mimesis.eval.agents.fact_reveal --freeze-user data/freeze_user --out DIR``
(params from ``evaluate_agents.fact_reveal`` of params.yaml).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from mimesis.envs.facts import Fact, task_fact
from mimesis.envs.registry import GROUNDING_SEED, env_names
from mimesis.eval.agents.evaluate import HELDOUT_SEED_OFFSET
from mimesis.eval.agents.fact_report import (
    SPLITS,
    markdown,
    metrics_of,
    ordered_splits,
    user_results,
)
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
        if self.heldout_seed_offset < GROUNDING_SEED:
            # below GROUNDING_SEED lie the training streams (train_agent from 0, distill_agent
            # 100 000, sft_agent 200 000, difficulty 250 000): no held-out task there
            raise ValueError(f"fact_reveal.heldout_seed_offset must be >= {GROUNDING_SEED} (the "
                             f"training streams' seeds lie below), got {self.heldout_seed_offset}")
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
        ``{user: {split: {env: {rate, n, n_tasks, ci_low, ci_high, false_end,
        false_end_ci_low, false_end_ci_high, end_reasons}, "mean": {mean, ci_low, ci_high, n,
        n_envs, false_end: {…the same keys}}}}, "seconds": s}`` (rates are shares in 0..1,
        ``n`` counts probes; for metrics.json); also logged to an active MLflow run as
        ``fact_reveal/<user>/<split>/<env>`` (the rate), ``…/<env>/false_end``,
        ``…/<split>/mean`` and ``…/<split>/mean_false_end``.
    """
    import gc

    from mimesis.users.reseed import reseed_user
    from mimesis.users.unseen import release

    started = time.time()
    # both splits of an env in one batched call: one forward pass serves ~2x the rows
    probes = {env: [pr for split in ordered_splits(p.splits) for pr in env_probes(env, p, split)]
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
        results[name] = user_results(rows, p)
        rows_out += [{"user": name, **r} for r in rows]
    bar.close()
    report = {"params": asdict(p), "results": results, "rows": rows_out,
              "seconds": round(time.time() - started, 1)}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "fact_reveal.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    (out_dir / "fact_reveal.md").write_text(markdown(results, p))
    metrics = metrics_of(results)
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
