"""The agents of the ``evaluate_agents`` stage: base, SFT, GRPO and CSD agents, paired, under
seen and unseen users.

Agents (docs/metrics.md, agent side; :func:`agent_sources` builds them from the stage's folders):

- ``base`` — the base model the arms started from (``<sft_agent>/meta.json`` ``base_model``);
- ``sft`` — the SFT warm-up agent, ``<sft_agent>/model``;
- one agent per ``train_agent_arms`` entry, ``<train_agent>/<arm>/model``: ``grpo-prompted``
  (GRPO against the base model prompted as the user: the control) and ``grpo`` (GRPO against
  the frozen simulator);
- ``csd`` — ``<distill_agent>/model``.

Before anything loads (:func:`check_arms`): every arm folder must hold ``meta.json`` and
``model/`` (a missing one is named), every arm must share the base model, every arm must have
trained with the evaluation's per-turn budget (``max_new_tokens``; an agent cut at fewer tokens
than it learned to use would be scored on a task it never had), and no held-out scenario may be
one an arm trained on (:func:`trained_specs`). Each adapter's sha256 is checked against its
``meta.json`` when it loads. Users: ``frozen`` — the training simulator
(``<freeze_user>/simulator``, hash-verified) — and every entry of ``unseen_users``
(:mod:`mimesis.eval.unseen_users`; the training simulator is refused there).

Pairing: every (agent, user) run plays the same held-out scenarios
(:func:`mimesis.eval.agents.heldout_specs`) with a fresh agent sampler and the user restarted
from the same seed (:mod:`mimesis.eval.reseed`, caveat there); ``comparisons`` are reported as
paired differences with paired bootstrap CIs (:mod:`mimesis.eval.agent_pairs`).

Besides each user, every comparison is also made under the ``unseen mean``: per scenario, the
mean over the unseen users that no evaluated agent trained against
(:func:`~mimesis.eval.agent_pairs.unseen_mean_rows`). The mechanism — elicitation per agent ×
user (:mod:`mimesis.eval.elicitation`) and each RL arm's training-reward trend (its
``meta.json`` ``reward_trend``) — is reported with them (:mod:`mimesis.eval.claim_report`).

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mimesis.eval.agents import AgentEvalParams
from mimesis.rl.agent_training import UserSamplingParams

TRAINING_USER = "frozen"
BASE_AGENT = "base"
SCENARIO_KEYS = ("envs", "env_kwargs", "steps", "scenarios_per_step", "scenario_seed")


def _default_unseen() -> list[dict[str, Any]]:
    return [{"name": "replay", "kind": "replay"}, {"name": "agenda", "kind": "agenda"},
            {"name": "prompted-smollm2", "kind": "hf", "model": "smollm2-135m",
             "prompt_style": "prompted_user"}]


def _default_comparisons() -> list[list[str]]:
    return [["sft", "base"], ["grpo", "sft"], ["grpo", "grpo-prompted"], ["csd", "grpo"]]


PURPOSES = ("smoke", "claim")


@dataclass(frozen=True)
class AgentEvaluateParams(AgentEvalParams):
    """params.yaml ``evaluate_agents.agents``: :class:`~mimesis.eval.agents.AgentEvalParams` plus what
    the stage needs to build the agents, the users and the comparisons.

    Attributes:
        enabled: Run the agent half at all.
        dtype: Weights of the agents and of the frozen simulator (float32 on CPU).
        user: Sampling of the frozen training simulator.
        unseen_users: Entries of :class:`~mimesis.eval.unseen_users.UnseenUserConfig`.
        train_agent_arms: Subfolders of ``<train_agent>``, one agent each (same name).
        csd: Evaluate ``<distill_agent>`` as the ``csd`` agent (a profile without that stage's
            arm sets it false).
        base: Evaluate the base model as the ``base`` agent (a profile that only compares trained
            arms sets it false: its episodes are the costliest, full-length every time).
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
    base: bool = True  # evaluate the base model (false: only trained arms are compared)
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

    def core(self) -> AgentEvalParams:
        """The :class:`AgentEvalParams` part (what :func:`evaluate_agents` takes)."""
        names = AgentEvalParams.__dataclass_fields__
        return AgentEvalParams(**{k: getattr(self, k) for k in names})


# ----------------------------------------------------------------------------- arms
def _meta(stage_dir: Path) -> dict[str, Any]:
    return json.loads((Path(stage_dir) / "meta.json").read_text())


def seen_users(agents: Mapping[str, str | Path], unseen_users: Sequence[Any]
               ) -> dict[str, list[str]]:
    """Agent → the unseen users it trained against (its stage ``meta.json`` ``user``, matched
    by :func:`~mimesis.eval.simulator_identity.trained_against`); agents that met none are
    left out. The ``grpo-prompted`` control trained against the prompted base model, so an
    ``hf`` unseen user with that model and prompt is its own training user."""
    from mimesis.eval.simulator_identity import trained_against
    from mimesis.eval.unseen_users import parse_unseen

    configs = parse_unseen(unseen_users)
    seen = {name: trained_against(_meta(src).get("user"), configs)
            for name, src in agents.items() if name != BASE_AGENT}
    return {name: users for name, users in seen.items() if users}


def agent_sources(train_agent_dir: Path | None, distill_agent_dir: Path | None,
                  sft_agent_dir: Path | None, p: AgentEvaluateParams) -> dict[str, str | Path]:
    """Agent name → source: the base model name for ``base``, an agent stage folder (``model/``
    + ``meta.json``) for every other agent (module docstring).

    Raises:
        FileNotFoundError: an arm's folder is not given or lacks ``meta.json`` / ``model/``
            (the message names the arm).
    """
    given = {"sft": sft_agent_dir, "csd": distill_agent_dir}
    folders: dict[str, Path] = {}
    for name in (n for n in p.agent_names() if n != BASE_AGENT):
        if name in given:
            folder = given[name]
        else:
            folder = None if train_agent_dir is None else Path(train_agent_dir) / name
        if folder is None or not (Path(folder) / "meta.json").is_file() or not (
                Path(folder) / "model").is_dir():
            raise FileNotFoundError(
                f"agent arm {name!r}: {folder or 'no folder given'} has no meta.json and model/ "
                "(has the stage that trains this arm run? sft: --sft-agent, csd: --distill-agent, "
                "the others: subfolders of --train-agent)")
        folders[name] = Path(folder)
    base = {BASE_AGENT: _meta(folders["sft"])["base_model"]} if p.base else {}
    return {**base, **folders}


def trained_specs(stage_dir: Path) -> list:
    """The scenarios a finished agent stage played, rebuilt from its ``meta.json`` with
    :func:`~mimesis.rl.scenarios.scenario_specs`.

    RL stages (params ``steps``, ``scenarios_per_step``): the first ``scenarios_drawn`` of the
    scenario stream (dynamic sampling's replacements included; default ``steps ×
    scenarios_per_step``). ``sft_agent`` (params ``scenarios_per_env``): one pass of
    ``len(envs) × scenarios_per_env`` scenarios, as :func:`mimesis.rl.expert_sft.rl_params`
    draws them. Besides those, only ``envs``, ``env_kwargs`` and ``scenario_seed`` are read: the
    other params of a recipe (SFT's, an arm's user) are ignored.

    Raises:
        KeyError: the params lack what picks the scenarios.
    """
    from mimesis.rl.agent_training import AgentRLParams
    from mimesis.rl.scenarios import scenario_specs

    meta = _meta(stage_dir)
    params = dict(meta.get("params", {}))
    if "scenarios_per_env" in params and "steps" not in params:  # sft_agent: one pass
        params["steps"] = 1
        params["scenarios_per_step"] = len(params.get("envs", [])) * params["scenarios_per_env"]
    missing = [k for k in SCENARIO_KEYS if k not in params]
    if missing:
        raise KeyError(f"{stage_dir}/meta.json params lack {missing}: cannot check that the "
                       "evaluation scenarios were not trained on")
    p = AgentRLParams(**{k: params[k] for k in SCENARIO_KEYS})
    drawn = int(meta.get("scenarios_drawn") or 0)
    return scenario_specs(p, max(drawn, p.steps * p.scenarios_per_step))


# What makes two RL arms (grpo, grpo-prompted, csd) comparable: the same scenarios and seeds,
# the same number and size of steps and the same turn budgets; only the user or the loss differs.
RL_BUDGET_KEYS = ("envs", "env_kwargs", "steps", "scenarios_per_step", "group_size",
                  "max_turns", "max_new_tokens", "max_completion_tokens", "temperature",
                  "learning_rate", "iterations", "scenario_seed", "seed", "dynamic_sampling",
                  "overfit_scenarios")


def check_arms(sources: Mapping[str, str | Path], p: AgentEvaluateParams) -> None:
    """Refuse arms that cannot be compared fairly (module docstring), before anything loads.

    Raises:
        ValueError: an arm trained on another base model or with another per-turn budget than
            ``p.max_new_tokens``, an RL arm trained at other env settings (``env_kwargs``) than
            the evaluation's, a held-out scenario played in training, or a comparison naming
            an agent not in ``sources``.
    """
    from mimesis.eval.agents import check_disjoint, heldout_specs

    unknown = sorted({n for pair in p.comparisons for n in pair} - set(sources))
    if unknown:
        raise ValueError(f"comparisons name agents that are not evaluated: {unknown}")
    arms = {n: Path(s) for n, s in sources.items() if n != BASE_AGENT}
    metas = {n: _meta(d) for n, d in arms.items()}
    base = sources.get(BASE_AGENT, metas["sft"].get("base_model") if "sft" in metas else None)
    other_base = [f"{n}: {m.get('base_model')}" for n, m in metas.items()
                  if base is not None and m.get("base_model") != base]
    if other_base:
        raise ValueError(f"every arm must start from the base model {base!r}; {other_base}")
    budgets = {n: m.get("params", {}).get("max_new_tokens") for n, m in metas.items()}
    wrong = [f"{n} ({arms[n] / 'meta.json'}: {b})" for n, b in budgets.items()
             if b is not None and b != p.max_new_tokens]
    if wrong:
        raise ValueError(
            f"evaluate_agents.agents.max_new_tokens is {p.max_new_tokens} tokens per agent turn, "
            f"but these arms trained with another per-turn budget (max_new_tokens): "
            f"{'; '.join(wrong)}. Evaluate with the training budget: set "
            "evaluate_agents.agents.max_new_tokens to it (and train every arm with the same one)")
    rl_arms = {n: m["params"] for n, m in metas.items()
               if m.get("stage") != "sft_agent" and "steps" in m.get("params", {})}
    budget = {n: {k: params.get(k) for k in RL_BUDGET_KEYS} for n, params in rl_arms.items()}
    if len({json.dumps(b, sort_keys=True) for b in budget.values()}) > 1:
        first = next(iter(budget))
        diff = {n: {k: v for k, v in b.items() if v != budget[first][k]}
                for n, b in budget.items() if b != budget[first]}
        raise ValueError(f"the RL arms must share one training budget (same scenarios, seeds, "
                         f"steps): against {first!r} they differ in {diff}")
    other_setting = [f"{n} {env}: trained {params['env_kwargs'].get(env, {})}, evaluated "
                     f"{p.env_kwargs.get(env, {})}" for n, params in rl_arms.items()
                     for env in params.get("envs", ()) if env in p.envs
                     and "env_kwargs" in params
                     and params["env_kwargs"].get(env, {}) != p.env_kwargs.get(env, {})]
    if other_setting:
        raise ValueError("the RL arms trained at other env settings than the evaluation uses "
                         f"({'; '.join(other_setting)}): set evaluate_agents.agents.env_kwargs "
                         "to train_agent's (a difficulty level train_agent selected is applied "
                         "from <train_agent>/difficulty.json)")
    eval_specs = heldout_specs(p.envs, p.n_scenarios, p.seed_offset, p.env_kwargs)
    for name, folder in arms.items():
        try:
            check_disjoint(eval_specs, trained_specs(folder))
        except ValueError as exc:
            raise ValueError(f"agent arm {name!r} ({folder}): {exc}") from None


def with_trained_difficulty(p: AgentEvaluateParams, train_agent_dir: Path | None
                            ) -> AgentEvaluateParams:
    """``p`` evaluated at the difficulty level ``train_agent`` selected before RL.

    ``<train_agent_dir>/difficulty.json`` (written by ``train_agent``: ``{"enabled": false}``
    or ``{"enabled": true, "env", "env_kwargs", "selection"}``; docs/claim.md rule 1) names the
    env settings every arm trained at; the held-out scenarios of that env are played at the same
    settings. No file, ``enabled: false`` or an env the evaluation does not cover: ``p`` as is.

    Raises:
        ValueError: the file is not valid JSON or lacks ``env`` / ``env_kwargs``.
    """
    import dataclasses

    path = None if train_agent_dir is None else Path(train_agent_dir) / "difficulty.json"
    if path is None or not path.is_file():
        return p
    try:
        chosen = json.loads(path.read_text())
        if not chosen.get("enabled"):
            return p
        env, kwargs = chosen["env"], dict(chosen["env_kwargs"])
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{path}: not a difficulty selection ({exc!r})") from None
    if env not in p.envs:
        return p
    return dataclasses.replace(p, env_kwargs={**p.env_kwargs, env: kwargs})


# ----------------------------------------------------------------------------- run
def run_agent_evaluation(freeze_user_dir: Path, agents: Mapping[str, str | Path], corpus: Path,
                         out_dir: Path, p: AgentEvaluateParams) -> dict[str, Any]:
    """Evaluate ``agents`` under the frozen and the unseen users; write the report.

    Args:
        freeze_user_dir: The ``freeze_user`` output (``simulator/`` + its ``meta.json``).
        agents: Agent name → source, in evaluation order (:func:`agent_sources`): ``base`` → a
            base model name, every other name → an agent stage folder (``model/`` +
            ``meta.json``).
        corpus: Held-out conversations of the ``replay`` user (``<label>/test.jsonl``).
        out_dir: Where the report goes.
        p: The params.

    Returns:
        ``{"by_agent": {agent: {user: {env: {success_rate, mean_reward, n, format_compliance,
        mean_turns}}}}, "diff": {"<a>-<b>": {user: {env: {...}}}}, "mechanism": {...},
        "seconds": s}`` (:func:`~mimesis.eval.agent_pairs.diff_metrics`, its users plus the
        ``unseen mean`` of the users no agent trained against;
        :func:`~mimesis.eval.claim_report.claim_metrics`; NaN as ``None``); the full rows go
        to ``agents.json``.

    Raises:
        FrozenSimulatorError: the frozen simulator's files differ from its meta.json.
        StaleTrainingError: an agent adapter differs from its meta.json.
        ValueError: see :func:`check_arms`; an unseen user is the training simulator.
    """
    import time

    from mimesis.eval.agent_pairs import (
        diff_metrics,
        outcome_rows,
        paired_differences,
        unseen_mean_rows,
    )
    from mimesis.eval.agent_stats import SUCCESS_THRESHOLDS
    from mimesis.eval.agent_tables import (
        agent_plot,
        agent_table_markdown,
        comparison_table_markdown,
        detectability_note,
        diff_plot,
    )
    from mimesis.eval.agents import evaluate_agents, load_agent
    from mimesis.eval.claim_report import CLAIM_TITLES, claim_markdown, claim_metrics
    from mimesis.eval.elicitation import cells_from_records, elicitation_table
    from mimesis.eval.unseen_users import build_unseen, release
    from mimesis.io import write_jsonl
    from mimesis.rl.agent_training import AgentRLParams
    from mimesis.rl.frozen_user import load_user

    started = time.perf_counter()
    check_arms(agents, p)
    sim_dir = freeze_user_dir / "simulator"
    unseen = build_unseen(p.unseen_users, sim_dir, corpus=corpus, max_turns=p.max_turns)
    users = {}  # the training simulator first: the table's first user column
    if p.frozen_user:
        users[TRAINING_USER] = load_user(freeze_user_dir, AgentRLParams(
            dtype=p.dtype, user=p.user, max_turns=p.max_turns, seed=p.seed)).simulator
    users.update(unseen)
    loaders = {name: (lambda name=name: load_agent("base" if name == BASE_AGENT else "adapter",
                                                   agents[name], p.dtype))
               for name in agents}
    episodes: list[dict[str, Any]] = []
    outcomes: list[dict[str, Any]] = []

    def keep(agent: str, user: str, records: list) -> None:
        outcomes.extend(outcome_rows(agent, user, records))
        episodes.extend({"agent": agent, "user": user, **r.model_dump(
            mode="json", exclude={"prompt_ids", "completion_ids", "env_mask", "logprobs",
                                  "turn_ids"})} for r in records)

    try:
        rows = evaluate_agents(loaders, users, p.core(), on_episodes=keep)
    finally:
        release(unseen)
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
    trends = {name: _meta(agents[name]).get("reward_trend") for name in p.train_agent_arms
              if name in agents}
    write_jsonl(out_dir / "agent_episodes.jsonl", episodes)
    (out_dir / "agents.json").write_text(json.dumps(_no_nan(
        {"rows": rows, "comparisons": diffs, "success_thresholds": SUCCESS_THRESHOLDS,
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
                    "note": note.replace("**", ""),
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
