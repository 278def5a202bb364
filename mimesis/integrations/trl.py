"""GRPO with TRL against the frozen user simulator: a ``rollout_func`` for ``GRPOTrainer``.

TRL 1.16's ``GRPOTrainer`` takes ``rollout_func(prompts, trainer) -> dict`` (experimental; set
``TRL_EXPERIMENTAL_SILENCE=1`` to silence its warning). :func:`frozen_user_rollout` returns one
that plays one of our environments (:mod:`mimesis.envs` registry: ``TravelGym``,
``FunctionGym``, ``TauGym``, …) with the frozen simulator as the user: it is
:func:`mimesis.rl.grpo.make_rollout_func` (the :class:`~mimesis.rollout.engine.RolloutEngine`)
over a user loaded by :func:`frozen_user_simulator`. User and tool tokens are in the completion
with ``env_mask`` 0, so TRL keeps them out of the loss; the environment's reward comes back as
the extra field ``env_reward`` (reward function :func:`~mimesis.rl.trl_rollout.env_reward`)::

    from trl import GRPOConfig, GRPOTrainer
    from mimesis.integrations.trl import env_reward, frozen_user_rollout, scenario_prompts

    trainer = GRPOTrainer(model=policy, processing_class=tokenizer, args=GRPOConfig(...),
                          reward_funcs=[env_reward],
                          train_dataset=scenario_prompts("TravelGym", count=64),
                          rollout_func=frozen_user_rollout("data/freeze_user/simulator"))

Dataset rows are :class:`~mimesis.rollout.records.ScenarioSpec` JSON strings (TRL hands
``rollout_func`` nothing but the prompts); ``num_generations`` episodes are played per row.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mimesis.rl.trl_rollout import RolloutFunc, env_reward, scenario_dataset
from mimesis.rollout.records import RolloutParams, ScenarioSpec

__all__ = ["env_reward", "frozen_user_rollout", "frozen_user_simulator", "scenario_prompts"]


def frozen_user_simulator(sim_dir: Path | str, *, max_turns: int = 8, temperature: float = 1.0,
                          top_p: float = 1.0, max_new_tokens: int = 96, batch_size: int = 16,
                          seed: int | None = 0, dtype: str = "float32",
                          trust_folder: bool = False):
    """Verify and load a frozen simulator folder as our runtime user.

    Args:
        sim_dir: ``data/freeze_user/simulator`` (or a downloaded copy).
        max_turns: Most user turns per episode.
        temperature / top_p / max_new_tokens: The user's sampling (tokens per user turn).
        batch_size: User turns generated per forward pass.
        seed: Seed of the user's sampler (``None``: nondeterministic).
        dtype: ``float32`` on CPU, ``bfloat16`` on GPU.
        trust_folder: Accept a ``freeze_user`` folder without its ``registry.json`` (warns).

    Returns:
        A :class:`~mimesis.simulator.runtime.UserSimulator` over a frozen (no-grad, eval-mode)
        model, on CUDA when available.

    Raises:
        FrozenSimulatorError: the folder fails its sha256 check.
    """
    from mimesis.users.frozen import load_frozen_user
    from mimesis.users.spec import UserSamplingParams

    sampling = UserSamplingParams(temperature=temperature, top_p=top_p,
                                  max_new_tokens=max_new_tokens, batch_size=batch_size)
    return load_frozen_user(Path(sim_dir), dtype=dtype, sampling=sampling, seed=seed,
                            max_turns=max_turns, trust_folder=trust_folder).simulator


def frozen_user_rollout(user: Path | str | Any, params: RolloutParams | None = None,
                        **user_kwargs: Any) -> RolloutFunc:
    """TRL ``rollout_func`` playing our environments with the frozen simulator as the user.

    Args:
        user: A frozen simulator folder, or a ready runtime
            :class:`~mimesis.simulator.runtime.UserSimulator`.
        params: Rollout settings (agent turns, tokens per agent turn, completion budget;
            default :class:`~mimesis.rollout.records.RolloutParams`). The group size is the
            trainer's ``num_generations``.
        **user_kwargs: Passed to :func:`frozen_user_simulator` (folder only).

    Returns:
        ``rollout_func(prompts, trainer) -> dict`` with ``prompt_ids``, ``completion_ids``,
        ``logprobs``, ``env_mask`` (B lists each) and the extras of
        :func:`~mimesis.rl.trl_rollout.to_trl` (``env_reward``, ``termination``, …).

    Raises:
        FrozenSimulatorError: the folder fails its sha256 check.
        ValueError: ``user_kwargs`` with a ready simulator.
    """
    from mimesis.rl.grpo import make_rollout_func  # imports trl

    if isinstance(user, str | Path):
        user = frozen_user_simulator(user, **user_kwargs)
    elif user_kwargs:
        raise ValueError("user_kwargs apply to a simulator folder, not a ready simulator")
    return make_rollout_func(user, params or RolloutParams())


def scenario_prompts(env: str = "TravelGym", count: int = 8, seed: int = 0,
                     env_kwargs: dict[str, Any] | None = None):
    """A ``GRPOTrainer`` dataset of ``count`` scenarios of registered environment ``env``.

    Args:
        env: Registry name (``mimesis.envs.registry``).
        count: Rows (one scenario each; seeds ``seed … seed + count − 1``).
        seed: First ``env.reset`` seed.
        env_kwargs: Extra environment constructor arguments.

    Returns:
        A ``datasets.Dataset`` with one ``prompt`` column of ScenarioSpec JSON strings.

    Raises:
        ValueError: ``env`` is not registered.
    """
    from mimesis.envs.registry import check_envs

    check_envs([env])
    return scenario_dataset([ScenarioSpec(env=env, seed=seed + i, env_kwargs=env_kwargs or {})
                             for i in range(count)])
