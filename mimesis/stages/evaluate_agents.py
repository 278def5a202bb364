"""Stage ``evaluate_agents``: the trained agents under the frozen and unseen users, and whether
each user states its hidden facts when asked.

Agents (:mod:`mimesis.eval.agents.run`, params ``evaluate_agents.agents``): the base, SFT
(``sft_agent``), GRPO (``train_agent/<arm>``: ``grpo-prompted``, ``grpo``) and CSD
(``distill_agent``) agents play the same held-out scenarios of every listed env, with the same
seeds, under the frozen training simulator (``freeze_user``) and under unseen users (registry of
:mod:`mimesis.users.unseen`; the ``replay`` user replays ``<label>/test.jsonl``; the training
simulator is refused there); ``comparisons`` get paired differences with paired bootstrap CIs.
The arms are checked before anything loads: a missing arm folder, another base model or another
per-turn budget than training's is refused.

Fact reveal (:mod:`mimesis.eval.agents.fact_reveal`, params ``evaluate_agents.fact_reveal``): does each
user state its hidden facts when an agent asks for them directly, on the agents' held-out tasks
and on training-part tasks, and how often it ends the episode instead of answering.

The simulator's realism is the ``evaluate_user`` stage (it needs no agent).

Writes to ``<out>``: ``metrics.json`` (agent results under ``agents``, paired differences under
``agents.diff``, rates under ``fact_reveal.<user>.<split>``), ``headline.json`` (what ``dvc
metrics show`` prints: :mod:`mimesis.eval.headline`), ``agents.md``,
``agents.json``, ``agent_episodes.jsonl``, ``plots/{agents,agent_diffs}.png``,
``fact_reveal.md`` and ``fact_reveal.json``. Everything is also logged to the MLflow run ``evaluate_agents``, and the
episodes (up to ``mlflow_traces``) as MLflow traces: a session per episode, a trace per turn of
its conversation (what the user said, the agent's reply), never the simulator's reasoning or its
scenario (:mod:`mimesis.traces`).

Run: ``python -m mimesis.stages.evaluate_agents --freeze-user data/freeze_user --label data/label
--sft-agent data/sft_agent --train-agent data/train_agent --distill-agent data/distill_agent
--out data/evaluate_agents`` (or ``dvc repro evaluate_agents``).
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from mimesis.eval.agents.fact_reveal import FactRevealParams
from mimesis.eval.agents.run import AgentComparisonParams
from mimesis.eval.headline import agents_headline, write_headline
from mimesis.io import write_json, write_jsonl
from mimesis.params import build, stage_params
from mimesis.runtime_env import configure_environment
from mimesis.tracking import flatten, stage_run

ARTIFACTS = ("metrics.json", "headline.json", "agents.md", "agents.json", "agent_episodes.jsonl",
             "fact_reveal.md", "fact_reveal.json")


@dataclass(frozen=True)
class EvaluateAgentsParams:
    """Parameters of the ``evaluate_agents`` section of params.yaml (active profile applied).

    Attributes:
        agents: The agent evaluation (:class:`~mimesis.eval.agents.run.AgentComparisonParams`).
        fact_reveal: The fact-reveal check (:class:`~mimesis.eval.agents.fact_reveal.FactRevealParams`).
        mlflow_traces: Evaluation episodes logged as MLflow traces, one per turn of the
            conversation, a session per episode (:mod:`mimesis.traces`); spread evenly over the
            agent × user runs when there are more; 0 = none.
    """

    agents: AgentComparisonParams = field(default_factory=AgentComparisonParams)
    fact_reveal: FactRevealParams = field(default_factory=FactRevealParams)
    mlflow_traces: int = 120
    seed: int = 13
    profile: str = "default"

    def __post_init__(self) -> None:
        # the fact-reveal "heldout" split must ask about the scenarios the agents are scored on
        if self.fact_reveal.heldout_seed_offset != self.agents.seed_offset:
            raise ValueError(
                f"evaluate_agents: fact_reveal.heldout_seed_offset "
                f"({self.fact_reveal.heldout_seed_offset}) must equal agents.seed_offset "
                f"({self.agents.seed_offset}): the held-out probes are the agents' held-out tasks")


def run(freeze_user_dir: Path, label_dir: Path, out_dir: Path, params: EvaluateAgentsParams,
        train_agent_dir: Path | None = None, distill_agent_dir: Path | None = None,
        sft_agent_dir: Path | None = None) -> Path:
    """Evaluate the agents (when ``params.agents.enabled``) and the users' fact reveal (when
    ``params.fact_reveal.enabled``); returns ``out_dir``. A disabled part leaves a note in its
    files, which dvc.yaml declares.

    Raises:
        FileNotFoundError: the frozen simulator is missing, or an agent arm's folder (named in
            the message) is missing or incomplete.
        FrozenSimulatorError: a frozen file's sha256 does not match its meta.json.
        ValueError: an unseen user is the training simulator; an arm trained with another
            per-turn budget or base model, or on a held-out scenario.
    """
    import mlflow

    from mimesis.eval.agents.arms import agent_sources, check_arms, with_trained_difficulty

    agents = None
    if params.agents.enabled:  # the level train_agent selected, then refuse unfair arms
        chosen = with_trained_difficulty(params.agents, train_agent_dir)
        if chosen != params.agents:
            print(f"evaluate_agents: env settings of {train_agent_dir}/difficulty.json: "
                  f"{chosen.env_kwargs}")
            params = dataclasses.replace(params, agents=chosen)
        agents = agent_sources(train_agent_dir, distill_agent_dir, sft_agent_dir, params.agents)
        check_arms(agents, params.agents)
    metrics: dict = {}
    out_dir.mkdir(parents=True, exist_ok=True)
    with stage_run("evaluate_agents", dataclasses.asdict(params)):
        if agents is not None:
            from mimesis.eval.agents.run import run_agent_evaluation

            metrics["agents"] = run_agent_evaluation(
                freeze_user_dir, agents, label_dir / "test.jsonl", out_dir, params.agents,
                params.mlflow_traces)
        else:
            (out_dir / "agents.md").write_text("Agent evaluation disabled "
                                               "(evaluate_agents.agents.enabled: false).\n")
            (out_dir / "agents.json").write_text('{"rows": [], "comparisons": []}\n')
            write_jsonl(out_dir / "agent_episodes.jsonl", [])
            (out_dir / "plots").mkdir(exist_ok=True)
        if params.fact_reveal.enabled:
            from mimesis.eval.agents.fact_reveal import run_fact_reveal

            metrics["fact_reveal"] = run_fact_reveal(freeze_user_dir, out_dir, params.fact_reveal)
        else:
            (out_dir / "fact_reveal.md").write_text("Fact-reveal check disabled.\n")
            (out_dir / "fact_reveal.json").write_text("{}\n")
        write_json(out_dir / "metrics.json", metrics)
        write_headline(out_dir, agents_headline(metrics))
        numeric = {k: float(v) for k, v in flatten(metrics).items() if isinstance(v, int | float)}
        mlflow.log_metrics({k.replace(":", "_"): v for k, v in numeric.items()})
        for path in ARTIFACTS:
            mlflow.log_artifact(str(out_dir / path))
        if any((out_dir / "plots").iterdir()):
            mlflow.log_artifacts(str(out_dir / "plots"), "plots")
    print_summary(metrics, out_dir)
    return out_dir


def print_summary(metrics: dict, out_dir: Path) -> None:
    """Mean reward per agent and user, paired differences, fact-reveal rates."""
    print("evaluate_agents:")
    for agent, users in metrics.get("agents", {}).get("by_agent", {}).items():
        print(f"  agent {agent:13s} mean reward (all envs): " + "  ".join(
            f"{user}={envs['ALL']['mean_reward']:.3f}" for user, envs in users.items()))
    for pair, users in metrics.get("agents", {}).get("diff", {}).items():
        print(f"  diff  {pair:18s} mean reward (all envs): " + "  ".join(
            f"{user}={_signed(envs['ALL'])}" for user, envs in users.items()))
    for user, splits in metrics.get("fact_reveal", {}).items():
        for split, envs in (splits.items() if isinstance(splits, dict) else ()):
            mean, end = envs["mean"], envs["mean"]["false_end"]
            print(f"  fact reveal {user} ({split}, mean over envs, n={mean['n']}): "
                  f"{mean['mean']:.0%} [{mean['ci_low']:.0%}, {mean['ci_high']:.0%}], false end "
                  f"{end['mean']:.0%} [{end['ci_low']:.0%}, {end['ci_high']:.0%}]; " + "  ".join(
                      f"{env}={c['rate']:.0%}" for env, c in envs.items() if env != "mean"))
    print(f"  -> {out_dir}/metrics.json, agents.md, fact_reveal.md, plots/")


def _signed(d: dict) -> str:
    """``+0.125 [-0.010, +0.250]`` (CI omitted when there is none)."""
    ci = "" if d.get("mean_reward_ci_low") is None else (
        f" [{d['mean_reward_ci_low']:+.3f}, {d['mean_reward_ci_high']:+.3f}]")
    return f"{d['mean_reward']:+.3f}{ci}"


def load_params(params_path: Path = Path("params.yaml")) -> EvaluateAgentsParams:
    """This stage's params from ``params_path`` (active profile applied).

    Raises:
        mimesis.params.ParamsError: a missing section, an unknown key or an invalid value.
    """
    return build(EvaluateAgentsParams, stage_params("evaluate_agents", params_path),
                 "evaluate_agents")


def main(argv: list[str] | None = None) -> None:
    configure_environment()
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--freeze-user", type=Path, default=Path("data/freeze_user"))
    parser.add_argument("--label", type=Path, default=Path("data/label"),
                        help="its test.jsonl feeds the replay user")
    parser.add_argument("--sft-agent", type=Path, default=Path("data/sft_agent"))
    parser.add_argument("--train-agent", type=Path, default=Path("data/train_agent"),
                        help="its arms are subfolders (evaluate_agents.agents.train_agent_arms)")
    parser.add_argument("--distill-agent", type=Path, default=Path("data/distill_agent"))
    parser.add_argument("--out", type=Path, default=Path("data/evaluate_agents"))
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    args = parser.parse_args(argv)
    params = load_params(Path(args.params))
    run(args.freeze_user, args.label, args.out, params, args.train_agent, args.distill_agent,
        args.sft_agent)


if __name__ == "__main__":
    main()
