"""The agent arms ``evaluate_agents`` compares, and the checks that make them comparable.

:func:`agent_sources` finds each arm's folder, :func:`check_arms` refuses arms that cannot be
compared fairly before anything loads (:mod:`mimesis.eval.agents.run`, module docstring, lists
the rules), :func:`trained_specs` rebuilds the scenarios an arm trained on,
:func:`with_trained_difficulty` applies the level ``train_agent`` selected (docs/claim.md rule 1)
and :func:`seen_users` names the unseen users an arm met in training.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the params import this module's constants
    from mimesis.eval.agents.run import AgentComparisonParams

BASE_AGENT = "base"
SCENARIO_KEYS = ("envs", "env_kwargs", "steps", "scenarios_per_step", "scenario_seed")


def read_meta(stage_dir: Path) -> dict[str, Any]:
    """The ``meta.json`` of an agent stage folder (params, base model, user, reward trend)."""
    return json.loads((Path(stage_dir) / "meta.json").read_text())


def seen_users(agents: Mapping[str, str | Path], unseen_users: Sequence[Any]
               ) -> dict[str, list[str]]:
    """Agent → the unseen users it trained against (its stage ``meta.json`` ``user``, matched
    by :func:`~mimesis.users.identity.trained_against`); agents that met none are
    left out. The ``grpo-prompted`` control trained against the prompted base model, so an
    ``prompted`` unseen user with that model and prompt is its own training user."""
    from mimesis.users.identity import trained_against
    from mimesis.users.spec import parse_unseen

    configs = parse_unseen(unseen_users)
    seen = {name: trained_against(read_meta(src).get("user"), configs)
            for name, src in agents.items() if name != BASE_AGENT}
    return {name: users for name, users in seen.items() if users}


def agent_sources(train_agent_dir: Path | None, distill_agent_dir: Path | None,
                  sft_agent_dir: Path | None, p: AgentComparisonParams) -> dict[str, str | Path]:
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
    base = {BASE_AGENT: read_meta(folders["sft"])["base_model"]} if p.base else {}
    return {**base, **folders}


def trained_specs(stage_dir: Path) -> list:
    """The scenarios a finished agent stage played, rebuilt from its ``meta.json`` with
    :func:`~mimesis.rollout.scenarios.scenario_specs`.

    RL stages (params ``steps``, ``scenarios_per_step``): the first ``scenarios_drawn`` of the
    scenario stream (dynamic sampling's replacements included; default ``steps ×
    scenarios_per_step``). ``sft_agent`` (params ``scenarios_per_env``): one pass of
    ``len(envs) × scenarios_per_env`` scenarios, as :func:`mimesis.rl.expert_sft.rl_params`
    draws them. Besides those, only ``envs``, ``env_kwargs`` and ``scenario_seed`` are read: the
    other params of a recipe (SFT's, an arm's user) are ignored.

    Raises:
        KeyError: the params lack what picks the scenarios.
    """
    from mimesis.rollout.scenarios import ScenarioPlan, scenario_specs

    meta = read_meta(stage_dir)
    params = dict(meta.get("params", {}))
    if "scenarios_per_env" in params and "steps" not in params:  # sft_agent: one pass
        params["steps"] = 1
        params["scenarios_per_step"] = len(params.get("envs", [])) * params["scenarios_per_env"]
    missing = [k for k in SCENARIO_KEYS if k not in params]
    if missing:
        raise KeyError(f"{stage_dir}/meta.json params lack {missing}: cannot check that the "
                       "evaluation scenarios were not trained on")
    p = ScenarioPlan(**{k: params[k] for k in SCENARIO_KEYS})
    drawn = int(meta.get("scenarios_drawn") or 0)
    return scenario_specs(p, max(drawn, p.steps * p.scenarios_per_step))


# What makes two RL arms (grpo, grpo-prompted, csd) comparable: the same scenarios and seeds,
# the same number and size of steps and the same turn budgets; only the user or the loss differs.
RL_BUDGET_KEYS = ("envs", "env_kwargs", "steps", "scenarios_per_step", "group_size",
                  "max_turns", "max_new_tokens", "max_completion_tokens", "temperature",
                  "learning_rate", "iterations", "scenario_seed", "seed", "dynamic_sampling",
                  "overfit_scenarios")


def check_arms(sources: Mapping[str, str | Path], p: AgentComparisonParams) -> None:
    """Refuse arms that cannot be compared fairly (module docstring), before anything loads.

    Raises:
        ValueError: an arm trained on another base model or with another per-turn budget than
            ``p.max_new_tokens``, an RL arm trained at other env settings (``env_kwargs``) than
            the evaluation's, a held-out scenario played in training, or a comparison naming
            an agent not in ``sources``.
    """
    from mimesis.eval.agents.evaluate import check_disjoint, heldout_specs

    unknown = sorted({n for pair in p.comparisons for n in pair} - set(sources))
    if unknown:
        raise ValueError(f"comparisons name agents that are not evaluated: {unknown}")
    arms = {n: Path(s) for n, s in sources.items() if n != BASE_AGENT}
    metas = {n: read_meta(d) for n, d in arms.items()}
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


def with_trained_difficulty(p: AgentComparisonParams, train_agent_dir: Path | None
                            ) -> AgentComparisonParams:
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
