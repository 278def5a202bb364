"""Stage ``train_agent``: multi-turn GRPO of the agent arms, each against its training user.

Reads ``<sft_agent_dir>/model`` (the supervised warm-up adapter every arm starts from; its
files' sha256 are checked against its ``meta.json``) and ``<freeze_user_dir>/simulator`` (every
file's sha256 checked against its ``meta.json`` before anything loads; a tampered folder refuses
training). The frozen simulator only plays the user: its weights are out of autograd and out of
the optimizer, and their fingerprint is checked again after training
(:class:`mimesis.rl.frozen_guard.FrozenGuard`).

Arms (params ``arms``, one :class:`~mimesis.users.spec.UserSpec` each, built by
:func:`mimesis.users.factory.make_user`): by default ``grpo`` (the frozen
simulator as the user) and ``grpo-prompted`` (the same base model prompted to act as a user:
the control of the paper's main claim). Every arm starts from the same SFT adapter and plays the
same scenarios with the same seeds for the same number of steps; only the user differs.

Recipe per arm: TRL's ``GRPOTrainer`` with our multi-turn ``rollout_func`` (the agent talks to
the user in the training environments; ``env_mask`` keeps user/tool tokens out of the loss),
clip 0.2/0.28, no KL, per-turn discounted group advantages (:mod:`mimesis.rl.grpo`), and
dynamic sampling (flat groups replaced by fresh training scenarios).

Difficulty (params ``difficulty``, docs/claim.md "Pre-registered rule 1"; off when its ladder is
empty): before any arm trains, the start policy plays training scenarios at every level of the
ladder under the frozen simulator (:mod:`mimesis.rl.difficulty_run`); the pre-registered rule
picks one level, and every arm trains with that level's settings merged into ``env_kwargs``
(so each arm's ``meta.json`` params carry them).

Writes to ``<out_dir>/<arm>/``: ``model/`` (LoRA adapter + tokenizer), ``meta.json`` (with
``reward_trend``: the last quarter of steps' mean training reward minus the first's, with a
bootstrap CI over groups, :mod:`mimesis.eval.agents.reward_trend`; ``None`` and
``reward_trend_reason`` under 2 steps), ``train_log.json`` (TRL log history + per-step
records), ``episodes.jsonl`` (every trained episode without token lists); ``checkpoints/``
while training (a re-run with the same params, inputs and base resumes from the last one).
``<out_dir>/meta.json`` lists the arms; ``<out_dir>/difficulty.json`` is ``{"enabled": false}``
or the chosen ``env``, its merged ``env_kwargs`` and the ``selection`` (every level's success
with its CI, the choice and why), ``difficulty.md`` its table; ``reward_trend.md`` the trend of
every arm and, for an arm whose reward did not rise, the measured reasons
(:func:`mimesis.eval.agents.reward_trend.why_not_rising`). MLflow: the stage run gets ``difficulty.json``, ``difficulty.md``,
``difficulty/level_<i>/success`` and ``reward_trend.md``; a child run ``train_agent/<arm>`` per
arm gets ``reward/<env>``, ``reward``, ``format_compliance``, ``groups/*`` per step, TRL's
metrics, ``reward_trend/{diff,ci_low,ci_high}``, ``rewards.png``, ``episodes.jsonl`` and
``mlflow_traces`` episodes as MLflow traces; ``<arm>/plots/`` the curves for ``dvc plots``.

Run: ``python -m mimesis.stages.train_agent --freeze-user data/freeze_user
--sft-agent data/sft_agent --out data/train_agent``
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mimesis.io import clear_outputs, sha256_file, write_json
from mimesis.models.lora import LoraParams
from mimesis.params import build, stage_params
from mimesis.rl.agent_training import AgentRLParams
from mimesis.rl.difficulty_run import DifficultyParams
from mimesis.runtime_env import configure_environment
from mimesis.tracking import git_commit, stage_run

STAGE = "train_agent"
# params that do not change what training computes (difficulty acts through env_kwargs only)
_NO_RESUME = ("keep_checkpoints", "difficulty", "mlflow_traces")
_OUTPUTS = ("model", "meta.json", "train_log.json", "episodes.jsonl", "plots")
_STAGE_OUTPUTS = ("difficulty.json", "difficulty.md", "reward_trend.md")  # <out_dir>, every run


def _default_arms() -> list[dict[str, Any]]:
    return [{"name": "grpo", "user": "frozen"}, {"name": "grpo-prompted", "user": "prompted"}]


@dataclass(frozen=True)
class TrainAgentParams(AgentRLParams):
    """Parameters of ``train_agent`` (params.yaml section ``train_agent``); the RL fields are
    documented on :class:`~mimesis.rl.agent_training.AgentRLParams`, an arm's keys on
    :func:`~mimesis.users.spec.parse_arms` (a name + a :class:`~mimesis.users.spec.UserSpec`)."""

    base_model: str = "smollm2-135m"  # without an SFT start: smollm2-135m | tiny-llama | folder
    lora: LoraParams = field(default_factory=lambda: LoraParams(dropout=0.0))  # no SFT start
    arms: list[dict[str, Any]] = field(default_factory=_default_arms)
    # docs/claim.md rule 1: measure a ladder of env settings before RL; [] ladder = off
    difficulty: DifficultyParams = field(default_factory=DifficultyParams)

    def __post_init__(self) -> None:
        super().__post_init__()
        from mimesis.rl.difficulty_run import check_grpo_disjoint, check_ladder
        from mimesis.users.spec import parse_arms

        parse_arms(self.arms)
        if self.difficulty.ladder:
            check_ladder(self.difficulty, self.envs, self.env_kwargs)
            check_grpo_disjoint(self.difficulty, self)


def run(freeze_user_dir: Path, out_dir: Path, params: TrainAgentParams,
        sft_agent_dir: Path | None = None) -> Path:
    """Train every arm with GRPO from the SFT adapter; write them to ``out_dir/<arm>``.

    Args:
        sft_agent_dir: The ``sft_agent`` output every arm starts from; ``None`` starts from
            ``params.base_model`` with a fresh LoRA adapter (``params.lora``).

    Raises:
        mimesis.simulator.frozen.FrozenSimulatorError: the simulator folder does not match its
            ``meta.json``, or the simulator was touched by training.
        mimesis.models.merge.StaleTrainingError: the SFT adapter differs from its ``meta.json``
            or was trained against another simulator.
        ValueError: the difficulty seeds overlap the SFT agent's scenarios, or a ladder level
            has fewer episodes than the rule needs (:mod:`mimesis.rl.difficulty_run`).
    """
    from mimesis.rl.generators import require_generator
    from mimesis.rl.ranks import is_main_process, main_run
    from mimesis.users.frozen import load_user
    from mimesis.users.spec import parse_arms

    require_generator(params.generator)  # a vLLM generator without vLLM fails before any load
    inputs = {"simulator/meta.json": sha256_file(freeze_user_dir / "simulator" / "meta.json")}
    if sft_agent_dir is not None:
        inputs["sft_agent/meta.json"] = sha256_file(sft_agent_dir / "meta.json")
    arms = parse_arms(params.arms)
    main = is_main_process()  # under accelerate launch only rank 0 writes (mimesis.rl.ranks)
    if main:
        _clear_stale(out_dir, {a.name for a in arms})
    with main_run(lambda: stage_run(STAGE, dataclasses.asdict(params))) as mlflow_run:
        user = load_user(freeze_user_dir, params)  # hash check first
        trained = _choose_difficulty(user, sft_agent_dir, out_dir, params, main)
        metas = [_train_arm(arm, user, freeze_user_dir, sft_agent_dir, out_dir / arm.name,
                            trained, inputs) for arm in arms]
        if not main:
            return out_dir
        _write_trends(out_dir, metas)
        write_json(out_dir / "meta.json", {
            "stage": STAGE, "git_commit": git_commit(), "mlflow_run_id": mlflow_run.info.run_id,
            "inputs": inputs, "arms": {m["arm"]: m["user"] for m in metas},
            "simulator": metas[0]["simulator"]})
    return out_dir


def arm_user(arm, frozen, params: AgentRLParams):
    """The user simulator an arm trains against: its :class:`~mimesis.users.spec.UserSpec`
    sampled as the stage samples its user (params ``user``, ``dtype``, ``seed``), built by
    :func:`~mimesis.users.factory.make_user` with ``max_turns`` user turns per episode.

    Args:
        arm: The arm (:func:`~mimesis.users.spec.parse_arms`).
        frozen: The loaded frozen simulator (:class:`~mimesis.users.frozen.FrozenUser`): the
            ``frozen`` arm's runtime, and the base model of a ``prompted`` arm naming none.
        params: The stage's params.

    Raises:
        ValueError: a ``prompted`` arm without a model whose simulator names no base model.
        mimesis.users.chat.UserEndpointError: ``openai`` without its API key.
    """
    from mimesis.users.factory import make_user

    spec = arm.with_sampling(params.user, dtype=params.dtype, seed=params.seed)
    return make_user(spec, frozen=frozen, max_turns=params.max_turns)


def _train_arm(arm, user, freeze_user_dir: Path, sft_agent_dir: Path | None, arm_dir: Path,
               params: TrainAgentParams, inputs: dict[str, str]) -> dict[str, Any]:
    """One arm: its user, the start policy, GRPO, outputs in ``arm_dir`` and a child MLflow run
    (outputs and run on the main process only; ``{}`` elsewhere)."""
    import mlflow

    from mimesis.models.base import base_dir
    from mimesis.models.merge import adapter_sha256
    from mimesis.rl import agent_report as report
    from mimesis.rl import agent_training as rl
    from mimesis.rl.grpo import TurnCreditGRPOTrainer
    from mimesis.rl.ranks import is_main_process, main_first, main_run
    from mimesis.train.reporting import MlflowMetricsCallback
    from mimesis.train.sft import fingerprint, prepare_checkpoints
    from mimesis.users.factory import describe
    from mimesis.users.spec import arm_entry

    main = is_main_process()
    if main:
        clear_outputs(arm_dir, _OUTPUTS)
    with main_run(lambda: mlflow.start_run(run_name=f"{STAGE}/{arm.name}", nested=True)
                  ) as arm_run:
        if main:
            mlflow.log_params({"arm": arm.name, "arm.user": arm.kind, "arm.model": arm.model})
        simulator = arm_user(arm, user, params)
        model, tokenizer, start = rl.load_start_policy(sft_agent_dir, user, params)
        decisive = {k: v for k, v in dataclasses.asdict(params).items()
                    if k not in _NO_RESUME and k != "arms"}
        key = fingerprint({**decisive, "arm": arm_entry(arm)}, inputs,
                          base_dir(start["base_model"]).name)
        with main_first():
            resume = prepare_checkpoints(arm_dir / "checkpoints", key)
        trainer = rl.build_trainer(TurnCreditGRPOTrainer, model, tokenizer, params, user,
                                   arm_dir / "checkpoints", [MlflowMetricsCallback()],
                                   peft_config=start["peft_config"], simulator=simulator)
        summary = rl.train(trainer, resume)
        trainer.save_model(str(arm_dir / "model"))  # every process (ZeRO-3 gathers); rank 0 writes
        if not main:
            _release(simulator)
            return {}
        meta = {
            "stage": STAGE, "arm": arm.name, "user": describe(arm, user),
            "params": dataclasses.asdict(params), "git_commit": git_commit(), "inputs": inputs,
            "mlflow_run_id": arm_run.info.run_id, "start": start["name"],
            "base_model": start["base_model"], "base_model_dir": base_dir(start["base_model"]).name,
            "finetune": "lora", "weights": adapter_sha256(arm_dir / "model"),
            "simulator": {"mlflow_run_id": user.meta.get("mlflow_run_id"),
                          "weights_fingerprint": user.fingerprint},
            "episodes": len(trainer.episodes), "rewards": rl.reward_summary(trainer.history),
            **summary, **_reward_trend(trainer, params.seed)}
        report.write_run(arm_dir, trainer, meta, f"{STAGE}/{arm.name}")
        trend = meta["reward_trend"] or {}
        mlflow.log_metrics({f"reward_trend/{k}": trend[k] for k in ("diff", "ci_low", "ci_high")
                            if trend.get(k) is not None})
        _release(simulator)
    if not params.keep_checkpoints:
        shutil.rmtree(arm_dir / "checkpoints", ignore_errors=True)
    report.print_summary(f"{STAGE}/{arm.name}", arm_dir, meta)
    return meta


def _clear_stale(out_dir: Path, arms: set[str]) -> None:
    """Remove what no arm of this run will rewrite: the single-agent layout of older versions
    (``out_dir/model`` …) and folders of arms that left the params (they would be evaluated)."""

    clear_outputs(out_dir, (*_OUTPUTS, *_STAGE_OUTPUTS))
    for child in out_dir.glob("*/meta.json"):
        if child.parent.name not in arms:
            shutil.rmtree(child.parent)


def _choose_difficulty(user, sft_agent_dir: Path | None, out_dir: Path,
                       params: TrainAgentParams, main: bool) -> TrainAgentParams:
    """docs/claim.md rule 1: the params every arm trains with (``params`` itself when the ladder
    is empty; else the chosen level's settings in ``env_kwargs``). Every process measures (the
    same seeds); the main process's choice is the one taken, written and logged."""
    import mlflow

    from mimesis.rl.difficulty import selection_markdown
    from mimesis.rl.difficulty_run import choose_level

    if not params.difficulty.ladder:
        if main:
            write_json(out_dir / "difficulty.json", {"enabled": False})
            mlflow.log_dict({"enabled": False}, "difficulty.json")
        return params
    selection = choose_level(sft_agent_dir, user, params, params.difficulty)
    level = selection.levels[_from_main(selection.chosen)].level
    trained = dataclasses.replace(params, env_kwargs={**params.env_kwargs,
                                                      level.env: dict(level.env_kwargs)})
    if main:
        record = {"enabled": True, "env": level.env, "env_kwargs": dict(level.env_kwargs),
                  "selection": selection.to_dict()}
        markdown = selection_markdown(selection)
        write_json(out_dir / "difficulty.json", record)
        (out_dir / "difficulty.md").write_text(markdown + "\n")
        mlflow.log_dict(record, "difficulty.json")
        mlflow.log_text(markdown, "difficulty.md")
        mlflow.log_metrics({f"difficulty/level_{i}/success": r.success
                            for i, r in enumerate(selection.levels)})
        print(f"{STAGE}: difficulty (docs/claim.md rule 1)\n{markdown}")
    return trained


def _from_main(value: Any) -> Any:
    """``value`` as the main process has it (every process gets the main's; accelerate's
    broadcast), so that all processes train the same level."""
    from mimesis.rl.ranks import world_size

    if world_size() == 1:
        return value
    import torch
    from accelerate import PartialState
    from accelerate.utils import broadcast_object_list

    PartialState(cpu=not torch.cuda.is_available())  # the process group, as the trainer's
    return broadcast_object_list([value], from_process=0)[0]


def _reward_trend(trainer, seed: int) -> dict[str, Any]:
    """``reward_trend`` of an arm (:func:`mimesis.eval.agents.reward_trend.reward_trend`, groups
    resampled) for its ``meta.json``; ``None`` with ``reward_trend_reason`` when it has no
    trend (fewer than 2 steps). A resumed run lacks the episodes of the steps before its
    checkpoint: it falls back to the restored history's step means (``source``)."""
    from mimesis.eval.agents.reward_trend import (
        episode_rewards,
        group_signal,
        history_rewards,
        reward_trend,
    )
    from mimesis.rl.agent_report import episode_rows

    rewards, groups = episode_rewards(episode_rows(trainer.episodes))
    source = "episodes"
    if not {int(row["step"]) for row in trainer.history if "reward" in row} <= set(rewards):
        rewards, groups, source = history_rewards(trainer.history), None, "history step means"
    try:
        trend = reward_trend(rewards, n_bootstrap=1000, seed=seed, groups_by_step=groups)
    except ValueError as err:
        return {"reward_trend": None, "reward_trend_reason": str(err)}
    signal = group_signal(rewards, groups) if groups is not None else None
    return {"reward_trend": {**trend, "source": source}, "group_signal": signal}


def _write_trends(out_dir: Path, metas: list[dict[str, Any]]) -> None:
    """``reward_trend.md`` (every arm's trend; arms without one and why), on stdout and MLflow."""
    import mlflow

    from mimesis.eval.agents.reward_trend import trend_markdown, why_not_rising

    trends = {m["arm"]: m["reward_trend"] for m in metas if m.get("reward_trend")}
    lines = [trend_markdown(trends)] if trends else []
    lines += [f"- {m['arm']}: no trend ({m.get('reward_trend_reason')})" for m in metas
              if not m.get("reward_trend")]
    path = out_dir / "difficulty.json"
    difficulty = json.loads(path.read_text()) if path.is_file() else None
    for m in metas:
        reasons = why_not_rising(m["reward_trend"], m.get("group_signal"), difficulty) if m.get(
            "reward_trend") else []
        if reasons:
            lines.append(f"\n{m['arm']}: the training reward did not rise. Measured: "
                         + "; ".join(reasons) + ".")
    markdown = "\n".join(lines)
    (out_dir / "reward_trend.md").write_text(markdown + "\n")
    mlflow.log_text(markdown, "reward_trend.md")
    print(f"{STAGE}: training reward, last quarter of steps minus the first\n{markdown}")


def _release(simulator) -> None:
    """Drop a prompted user's weights before the next arm loads its own."""
    release = getattr(simulator.generate_fn, "release", None)
    if callable(release):
        release()


def load_params(params_path: Path = Path("params.yaml")) -> TrainAgentParams:
    """This stage's params from ``params_path`` (active profile applied).

    Raises:
        mimesis.params.ParamsError: a missing section, an unknown key or an invalid value.
    """
    return build(TrainAgentParams, stage_params(STAGE, params_path), STAGE)


def main(argv: list[str] | None = None) -> None:
    configure_environment()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--freeze-user", default="data/freeze_user",
                        help="freeze_user stage output folder")
    parser.add_argument("--sft-agent", default="data/sft_agent",
                        help="sft_agent stage output folder (every arm starts from its adapter)")
    parser.add_argument("--out", default="data/train_agent", help="output folder")
    parser.add_argument("--params", default="params.yaml")
    args = parser.parse_args(argv)
    params = load_params(Path(args.params))
    run(Path(args.freeze_user), Path(args.out), params, sft_agent_dir=Path(args.sft_agent))


if __name__ == "__main__":
    main()
