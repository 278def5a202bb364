"""The agent half of the ``evaluate`` stage: base, GRPO and CSD agents under seen and unseen users.

Agents (METRICS.md, agent side): ``base`` (the base model train_agent started from, no adapter),
``grpo`` (``<train_agent>/model``) and ``csd`` (``<distill_agent>/model``); each adapter's
sha256 is checked against its ``meta.json`` before it loads. Users: ``frozen`` — the training
simulator (``<freeze_user>/simulator``, hash-verified), the one the agents were trained against —
and every entry of ``unseen_users`` (:mod:`mimesis.eval.unseen_users`; the training simulator is
refused there). Scenarios are held out (:func:`mimesis.eval.agents.heldout_specs`): procedural
envs use seeds far from the training seeds, fixed task lists their evaluation part, and the
stage checks them against the scenarios train_agent and distill_agent actually played.

Writes ``agents.md`` (table), ``agents.json`` (rows), ``plots/agents.png``,
``agent_episodes.jsonl`` (every episode,
private user reasoning included, no token lists) and returns the metrics that go to
``metrics.json`` under ``agents``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mimesis.eval.agents import AgentEvalParams
from mimesis.rl.agent_training import UserSamplingParams

TRAINING_USER = "frozen"
AGENT_KINDS = {"base": "base", "grpo": "train_agent", "csd": "distill_agent"}


def _default_unseen() -> list[dict[str, Any]]:
    return [{"name": "replay", "kind": "replay"}, {"name": "agenda", "kind": "agenda"},
            {"name": "prompted-smollm2", "kind": "hf", "model": "smollm2-135m",
             "prompt_style": "prompted_user"}]


@dataclass(frozen=True)
class AgentEvaluateParams(AgentEvalParams):
    """params.yaml ``evaluate.agents``: :class:`~mimesis.eval.agents.AgentEvalParams` plus what
    the stage needs to build the users.

    Attributes:
        enabled: Run the agent half at all.
        dtype: Weights of the agents and of the frozen simulator (float32 on CPU).
        user: Sampling of the frozen training simulator.
        unseen_users: Entries of :class:`~mimesis.eval.unseen_users.UnseenUserConfig`.
    """

    enabled: bool = True
    dtype: str = "float32"
    user: UserSamplingParams = field(default_factory=UserSamplingParams)
    unseen_users: list[dict[str, Any]] = field(default_factory=_default_unseen)

    def core(self) -> AgentEvalParams:
        """The :class:`AgentEvalParams` part (what :func:`evaluate_agents` takes)."""
        names = AgentEvalParams.__dataclass_fields__
        return AgentEvalParams(**{k: getattr(self, k) for k in names})


def trained_specs(stage_dir: Path) -> list:
    """The scenarios a finished agent stage played (from its ``meta.json`` params)."""
    from mimesis.rl.agent_training import AgentRLParams, scenario_specs

    meta = json.loads((stage_dir / "meta.json").read_text())
    names = AgentRLParams.__dataclass_fields__
    p = {k: v for k, v in meta["params"].items() if k in names and k != "user"}
    return scenario_specs(AgentRLParams(**p))


def run_agent_evaluation(freeze_user_dir: Path, train_agent_dir: Path, distill_agent_dir: Path,
                         corpus: Path, out_dir: Path, p: AgentEvaluateParams) -> dict[str, Any]:
    """Evaluate the three agents under the frozen and the unseen users; write the report.

    Returns:
        ``{"by_agent": {agent: {user: {env: {success_rate, mean_reward, n}}}}, "seconds": s}``;
        the full rows of :func:`~mimesis.eval.agents.evaluate_agents` go to ``agents.json``.

    Raises:
        FrozenSimulatorError: the frozen simulator's files differ from its meta.json.
        StaleTrainingError: an agent adapter differs from its meta.json.
        ValueError: an unseen user is the training simulator, or a held-out scenario was
            played in training.
    """
    import time

    from mimesis.eval.agent_tables import agent_plot, agent_table_markdown
    from mimesis.eval.agents import check_disjoint, evaluate_agents, heldout_specs, load_agent
    from mimesis.eval.unseen_users import build_unseen, release
    from mimesis.io import write_jsonl
    from mimesis.rl.agent_training import AgentRLParams, load_user

    started = time.perf_counter()
    eval_specs = heldout_specs(p.envs, p.n_scenarios, p.seed_offset, p.env_kwargs)
    for stage_dir in (train_agent_dir, distill_agent_dir):
        check_disjoint(eval_specs, trained_specs(stage_dir))
    sim_dir = freeze_user_dir / "simulator"
    unseen = build_unseen(p.unseen_users, sim_dir, corpus=corpus, max_turns=p.max_turns)
    frozen = load_user(freeze_user_dir, AgentRLParams(dtype=p.dtype, user=p.user,
                                                       max_turns=p.max_turns, seed=p.seed))
    users = {TRAINING_USER: frozen.simulator, **unseen}
    base_model = json.loads((train_agent_dir / "meta.json").read_text())["base_model"]
    sources = {"base": base_model, "grpo": train_agent_dir, "csd": distill_agent_dir}
    agents = {name: (lambda name=name: load_agent(AGENT_KINDS[name], sources[name], p.dtype))
              for name in AGENT_KINDS}
    episodes: list[dict[str, Any]] = []

    def keep(agent: str, user: str, records: list) -> None:
        episodes.extend({"agent": agent, "user": user,
                         **r.model_dump(mode="json", exclude={"prompt_ids", "completion_ids", "env_mask",
                                                 "logprobs", "turn_ids"})} for r in records)

    try:
        rows = evaluate_agents(agents, users, p.core(), on_episodes=keep)
    finally:
        release(unseen)
    write_jsonl(out_dir / "agent_episodes.jsonl", episodes)
    (out_dir / "agents.json").write_text(json.dumps(rows, indent=1))
    (out_dir / "agents.md").write_text(agent_table_markdown(rows, training=TRAINING_USER))
    agent_plot(rows, out_dir / "plots" / "agents.png")
    by_agent: dict[str, Any] = {}
    for row in rows:
        by_agent.setdefault(row["agent"], {}).setdefault(row["simulator"], {})[row["env"]] = {
            "success_rate": row["success_rate"], "mean_reward": row["mean_reward"],
            "n": row["n"]}
    return {"by_agent": by_agent, "seconds": round(time.perf_counter() - started, 1)}
