"""The agents of the ``evaluate_agents`` stage: base, SFT, GRPO and CSD agents, paired, under
seen and unseen users.

Agents (docs/metrics.md, agent side; built from the stage's folders by
:func:`~mimesis.eval.agents.arms.agent_sources`):

- ``base`` — the base model the arms started from (``<sft_agent>/meta.json`` ``base_model``);
- ``sft`` — the SFT warm-up agent, ``<sft_agent>/model``;
- one agent per ``train_agent_arms`` entry, ``<train_agent>/<arm>/model``: ``grpo-prompted``
  (GRPO against the base model prompted as the user: the control) and ``grpo`` (GRPO against
  the frozen simulator);
- ``csd`` — ``<distill_agent>/model``.

Before anything loads (:func:`~mimesis.eval.agents.arms.check_arms`): every arm folder must hold ``meta.json`` and
``model/`` (a missing one is named), every arm must share the base model, every arm must have
trained with the evaluation's per-turn budget (``max_new_tokens``; an agent cut at fewer tokens
than it learned to use would be scored on a task it never had), and no held-out scenario may be
one an arm trained on (:func:`~mimesis.eval.agents.arms.trained_specs`). Each adapter's sha256 is checked against its
``meta.json`` when it loads. Users: ``frozen`` — the training simulator
(``<freeze_user>/simulator``, hash-verified) — and every entry of ``unseen_users``
(:mod:`mimesis.users.unseen`; the training simulator is refused there).

Pairing: every (agent, user) run plays the same held-out scenarios
(:func:`mimesis.eval.agents.evaluate.heldout_specs`) with a fresh agent sampler and the user restarted
from the same seed (:mod:`mimesis.users.reseed`, caveat there); ``comparisons`` are reported as
paired differences with paired bootstrap CIs (:mod:`mimesis.eval.agents.pairs`).

Besides each user, every comparison is also made under the ``unseen mean``: per scenario, the
mean over the unseen users that no evaluated agent trained against
(:func:`~mimesis.eval.agents.pairs.unseen_mean_rows`). The mechanism — elicitation per agent ×
user (:mod:`mimesis.eval.agents.elicitation`) and each RL arm's training-reward trend (its
``meta.json`` ``reward_trend``) — is reported with them (:mod:`mimesis.eval.agents.claim`).

Writes ``agents.md`` (per-agent table, the paired differences, the claim section: first when
``purpose`` is ``claim``), ``agents.json`` (``{"rows", "comparisons", "success_thresholds",
"trained_against", "users_in_mean", "elicitation", "reward_trends"}``), the MLflow text
artifact ``claim.md``, ``plots/agents.png``,
``plots/agent_diffs.png``, ``agent_episodes.jsonl`` (every episode, private user reasoning
included, no token lists) and returns the metrics that go to ``metrics.json`` under ``agents``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mimesis.eval.agents.arms import BASE_AGENT, check_arms, read_meta, seen_users
from mimesis.eval.agents.evaluate import EvalRolloutParams
from mimesis.users.spec import UserSamplingParams

TRAINING_USER = "frozen"


def _default_unseen() -> list[dict[str, Any]]:
    return [{"name": "replay", "kind": "replay"}, {"name": "agenda", "kind": "agenda"}]


def _default_comparisons() -> list[list[str]]:
    return [["grpo", "sft"], ["grpo", "grpo-prompted"], ["csd", "grpo"]]


PURPOSES = ("smoke", "claim")


@dataclass(frozen=True)
class AgentComparisonParams(EvalRolloutParams):
    """params.yaml ``evaluate_agents.agents``: which agents are compared, under which users, and
    which paired differences are reported; how each is played and scored is the inherited
    :class:`~mimesis.eval.agents.evaluate.EvalRolloutParams`.

    Attributes:
        enabled: Run the agent half at all.
        dtype: Weights of the agents and of the frozen simulator (float32 on CPU).
        user: Sampling of the frozen training simulator.
        unseen_users: :class:`~mimesis.users.spec.UserSpec` entries
            (:func:`~mimesis.users.spec.parse_unseen`).
        train_agent_arms: Subfolders of ``<train_agent>``, one agent each (same name).
        csd: Evaluate ``<distill_agent>`` as the ``csd`` agent (a profile without that stage's
            arm sets it false).
        base: Evaluate the base model as the ``base`` agent (off in the CPU default, on in the
            smoke, full and gpu profiles: its episodes are the costliest, full-length every time).
        frozen_user: Evaluate under the frozen training simulator (a profile that scores the
            agents under unseen users only sets it false: no simulator is loaded then).
        comparisons: ``[a, b]`` pairs of agent names: paired differences ``a − b``.
        purpose: ``smoke`` (the report says its comparisons test the machinery: sized to run,
            not to resolve an effect) or ``claim`` (they are the experiment).
    """

    enabled: bool = True
    purpose: str = "smoke"
    dtype: str = "float32"
    user: UserSamplingParams = field(default_factory=UserSamplingParams)
    unseen_users: list[dict[str, Any]] = field(default_factory=_default_unseen)
    train_agent_arms: list[str] = field(default_factory=lambda: ["grpo-prompted", "grpo"])
    csd: bool = True  # evaluate the distill_agent arm (false where a profile disables that stage)
    base: bool = False  # evaluate the base model (false: only trained arms are compared)
    frozen_user: bool = True  # evaluate under the frozen simulator (false: unseen users only)
    comparisons: list[list[str]] = field(default_factory=_default_comparisons)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.purpose not in PURPOSES:
            raise ValueError(f"purpose must be one of {PURPOSES}, got {self.purpose!r}")
        if not self.frozen_user and not self.unseen_users:
            raise ValueError("no user to evaluate under: frozen_user is false and unseen_users "
                             "is empty")
        names = self.agent_names()
        if len(set(names)) != len(names):
            raise ValueError(f"agent names must be unique: {names}")
        for pair in self.comparisons:
            if len(pair) != 2 or pair[0] == pair[1] or not set(pair) <= set(names):
                raise ValueError(f"comparison {pair}: need [a, b], two different agents of "
                                 f"{names}")

    def agent_names(self) -> list[str]:
        """The agents, in evaluation order: base (when ``base``), sft, the train_agent arms, csd
        (when ``csd``)."""
        return [*([BASE_AGENT] if self.base else []), "sft", *self.train_agent_arms,
                *(["csd"] if self.csd else [])]

    def core(self) -> EvalRolloutParams:
        """The :class:`EvalRolloutParams` part (what :func:`evaluate_agents` takes)."""
        names = EvalRolloutParams.__dataclass_fields__
        return EvalRolloutParams(**{k: getattr(self, k) for k in names})


# ----------------------------------------------------------------------------- run
def run_agent_evaluation(freeze_user_dir: Path, agents: Mapping[str, str | Path], corpus: Path,
                         out_dir: Path, p: AgentComparisonParams, mlflow_traces: int = 0
                         ) -> dict[str, Any]:
    """Evaluate ``agents`` under the frozen and the unseen users; write the report.

    Args:
        freeze_user_dir: The ``freeze_user`` output (``simulator/`` + its ``meta.json``).
        agents: Agent name → source, in evaluation order (:func:`~mimesis.eval.agents.arms.agent_sources`): ``base`` → a
            base model name, every other name → an agent stage folder (``model/`` +
            ``meta.json``).
        corpus: Held-out conversations of the ``replay`` user (``<label>/test.jsonl``).
        out_dir: Where the report goes.
        p: The params.
        mlflow_traces: Episodes logged as MLflow traces (:mod:`mimesis.traces`), spread evenly
            over the agent × user runs (each run's share evenly over its episodes); 0 = none.

    Returns:
        ``{"by_agent": {agent: {user: {env: {success_rate, mean_reward, n, format_compliance,
        mean_turns}}}}, "diff": {"<a>-<b>": {user: {env: {...}}}}, "mechanism": {...},
        "mlflow_traces": traces logged, "tracing_seconds": s spent logging and flushing them,
        "seconds": s}`` (:func:`~mimesis.eval.agents.pairs.diff_metrics`, its users plus the
        ``unseen mean`` of the users no agent trained against;
        :func:`~mimesis.eval.agents.claim.claim_metrics`; NaN as ``None``); the full rows go
        to ``agents.json``.

    Raises:
        FrozenSimulatorError: the frozen simulator's files differ from its meta.json.
        StaleTrainingError: an agent adapter differs from its meta.json.
        ValueError: see :func:`~mimesis.eval.agents.arms.check_arms`; an unseen user is the training simulator.
    """
    import time

    from mimesis.envs.registry import success_thresholds
    from mimesis.eval.agents.claim import CLAIM_TITLES, claim_markdown, claim_metrics
    from mimesis.eval.agents.elicitation import cells_from_records, elicitation_table
    from mimesis.eval.agents.evaluate import evaluate_agents, load_agent
    from mimesis.eval.agents.pairs import (
        diff_metrics,
        outcome_rows,
        paired_differences,
        unseen_mean_rows,
    )
    from mimesis.eval.agents.tables import (
        agent_plot,
        agent_table_markdown,
        comparison_table_markdown,
        detectability_note,
        diff_plot,
    )
    from mimesis.io import write_jsonl
    from mimesis.traces import flush as flush_traces
    from mimesis.traces import log_episode_traces, sample_evenly
    from mimesis.users.factory import make_user
    from mimesis.users.spec import UserSpec
    from mimesis.users.unseen import build_unseen, release

    started = time.perf_counter()
    check_arms(agents, p)
    sim_dir = freeze_user_dir / "simulator"
    unseen = build_unseen(p.unseen_users, sim_dir, corpus=corpus, max_turns=p.max_turns)
    users = {}  # the training simulator first: the table's first user column
    if p.frozen_user:
        frozen = UserSpec(TRAINING_USER, "frozen", model=str(sim_dir))
        users[TRAINING_USER] = make_user(frozen.with_sampling(p.user, dtype=p.dtype, seed=p.seed),
                                         max_turns=p.max_turns)
    users.update(unseen)
    loaders = {name: (lambda name=name: load_agent("base" if name == BASE_AGENT else "adapter",
                                                   agents[name], p.dtype))
               for name in agents}
    episodes: list[dict[str, Any]] = []
    outcomes: list[dict[str, Any]] = []

    per_run = -(-mlflow_traces // (len(loaders) * len(users)))  # ceil: every run gets a share
    traced = {"traces": 0, "seconds": 0.0}  # what tracing cost this stage (docs/tracking.md)

    def keep(agent: str, user: str, records: list) -> None:
        outcomes.extend(outcome_rows(agent, user, records))
        rows = [{"agent": agent, "user": user, **r.model_dump(
            mode="json", exclude={"prompt_ids", "completion_ids", "env_mask", "logprobs",
                                  "turn_ids"})} for r in records]
        episodes.extend(rows)
        # logged as each run ends: MLflow writes them in the background while the next run plays
        started = time.perf_counter()
        traced["traces"] += log_episode_traces(sample_evenly(rows, per_run), "evaluate_agents",
                                                thresholds=success_thresholds())
        traced["seconds"] += time.perf_counter() - started

    try:
        rows = evaluate_agents(loaders, users, p.core(), on_episodes=keep)
    finally:
        release(unseen)
        flushed = time.perf_counter()
        flush_traces()
        traced["seconds"] += time.perf_counter() - flushed
    diffs = paired_differences(outcomes, p.comparisons, p.n_bootstrap, p.ci, p.seed)
    seen = seen_users(agents, p.unseen_users)
    for d in diffs:  # a pair scored under one arm's own training user is not an unseen test
        d["trained_against_user"] = [x for x in (d["a"], d["b"]) if d["user"] in seen.get(x, ())]
    # The users' mean leaves out every user some agent trained against, for every comparison:
    # one mean, the same users, so the comparisons stay comparable with each other.
    in_mean = [u for u in users if u != TRAINING_USER
               and not any(u in own for own in seen.values())]
    if len(in_mean) >= 2:
        diffs += [{**d, "trained_against_user": [], "users_in_mean": in_mean}
                  for d in paired_differences(unseen_mean_rows(outcomes, in_mean), p.comparisons,
                                              p.n_bootstrap, p.ci, p.seed)]
    elicitation = elicitation_table(cells_from_records(episodes), n_bootstrap=p.n_bootstrap,
                                    ci=p.ci, seed=p.seed)
    trends = {name: read_meta(agents[name]).get("reward_trend") for name in p.train_agent_arms
              if name in agents}
    write_jsonl(out_dir / "agent_episodes.jsonl", episodes)
    (out_dir / "agents.json").write_text(json.dumps(_no_nan(
        {"rows": rows, "comparisons": diffs, "success_thresholds": success_thresholds(),
         "trained_against": seen, "users_in_mean": in_mean, "elicitation": elicitation,
         "reward_trends": trends}), indent=1))
    note = detectability_note(diffs, p.purpose)
    claim = claim_markdown(diffs, elicitation, trends, in_mean, TRAINING_USER,
                           title=CLAIM_TITLES[p.purpose])
    tables = (agent_table_markdown(rows, training=TRAINING_USER, trained_against=seen) + "\n"
              + comparison_table_markdown(diffs))
    # claim: the experiment's answer comes first; smoke: the machinery's tables, then the rest
    body = claim + "\n" + tables if p.purpose == "claim" else tables + "\n" + claim
    (out_dir / "agents.md").write_text(note + "\n\n" + body)
    _log_text(claim, "claim.md")
    agent_plot(rows, out_dir / "plots" / "agents.png")
    diff_plot(diffs, out_dir / "plots" / "agent_diffs.png")
    by_agent: dict[str, Any] = {}
    for row in rows:
        by_agent.setdefault(row["agent"], {}).setdefault(row["simulator"], {})[row["env"]] = {
            k: row.get(k) for k in ("success_rate", "mean_reward", "n", "format_compliance",
                                    "mean_turns")}
    return _no_nan({"by_agent": by_agent, "diff": diff_metrics(diffs), "purpose": p.purpose,
                    "mechanism": claim_metrics(elicitation, trends),
                    "note": note.replace("**", ""), "mlflow_traces": traced["traces"],
                    "tracing_seconds": round(traced["seconds"], 2),
                    "seconds": round(time.perf_counter() - started, 1)})


def _log_text(text: str, name: str) -> None:
    """``text`` as an artifact of the active MLflow run (none active: nothing)."""
    import mlflow

    if mlflow.active_run() is not None:
        mlflow.log_text(text, name)


def _no_nan(obj: Any) -> Any:
    """``obj`` with every float NaN replaced by ``None`` (strict JSON; MLflow skips it)."""
    if isinstance(obj, float) and math.isnan(obj):
        return None
    if isinstance(obj, dict):
        return {k: _no_nan(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_no_nan(v) for v in obj]
    return obj
