"""What TRL 1.16's ``GRPOTrainer(rollout_func=...)`` takes from the rollout engine.

The one ``rollout_func`` factory is :func:`mimesis.rl.grpo.make_rollout_func`; here are the
pieces it is built from that need no TRL import (output dict, grouping, dataset, reward).

What TRL 1.16 expects (``trl/trainer/grpo_trainer.py``: ``RolloutFunc``, ``_generate``,
``_generate_and_score_completions``, ``_get_train_sampler``):

- Call: ``rollout_func(prompts, trainer) -> dict``. ``prompts`` is the ``prompt`` column of the
  process's generation batch, *already repeated*: the ``RepeatSampler`` yields each dataset row
  ``num_generations`` times in a row (``num_generations_eval`` in eval), so ``prompts`` has
  ``B = groups × G`` entries and the function returns exactly one completion per entry, in order.
- Required keys, each a list of ``B`` lists: ``prompt_ids`` (int), ``completion_ids`` (int),
  ``logprobs`` (float, one per completion token; TRL uses them as the sampling log-probs for
  importance-sampling corrections, masked like the loss).
- ``env_mask`` (optional, ``B`` lists of 0/1 with the length of ``completion_ids``): popped and
  used as ``tool_mask``; the loss mask is ``completion_mask * env_mask``, so 0 keeps injected
  tokens out of the loss, and completion-length metrics count only 1s.
- Any other key is an extra field: a list is split per example (``inputs[i][key] =
  values[i]``) and reaches reward functions as a keyword argument (``env_reward`` here).
- TRL pads prompts on the left and completions on the right itself; with
  ``mask_truncated_completions=True`` it drops completions whose last token is not EOS/pad —
  our ``max_tokens`` episodes, and episodes whose last agent turn hit ``max_new_tokens``.

Our prompts are :class:`~mimesis.rollout.records.ScenarioSpec` JSON strings (:func:`scenario_dataset`):
TRL passes ``rollout_func`` nothing but the prompts, so the prompt names the scenario and the
engine renders the agent's real opening chat from ``env.reset``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from mimesis.rollout.records import Episode, ScenarioSpec

RolloutFunc = Callable[[list[str], Any], dict[str, list]]
TRL_KEYS = ("prompt_ids", "completion_ids", "logprobs", "env_mask")


def env_reward(completions: list, env_reward: list[float], **kwargs: Any) -> list[float]:
    """GRPO reward function: the environment's reward of each episode, passed through.

    Args:
        completions: Ignored (the env scored the whole episode).
        env_reward: The ``env_reward`` extra field of the ``rollout_func`` output
            (:func:`mimesis.rl.grpo.make_rollout_func`).

    Examples:
        >>> env_reward(["…", "…"], env_reward=[1.0, 0.0])
        [1.0, 0.0]
    """
    return [float(r) for r in env_reward]


def scenario_dataset(specs: Sequence[ScenarioSpec]):
    """A ``datasets.Dataset`` with one ``prompt`` (spec JSON) per scenario, for ``GRPOTrainer``."""
    from datasets import Dataset

    return Dataset.from_dict({"prompt": [s.to_prompt() for s in specs]})


def group_jobs(prompts: Sequence[str], group_size: int) -> list[tuple[ScenarioSpec, int]]:
    """``(spec, group id)`` per prompt: consecutive runs of ``group_size`` form a group.

    Raises:
        ValueError: ``len(prompts)`` is not a multiple of ``group_size`` or a run mixes prompts.
    """
    if group_size < 1 or len(prompts) % group_size:
        raise ValueError(f"{len(prompts)} prompts do not split into groups of {group_size}")
    jobs = []
    for g in range(len(prompts) // group_size):
        run = prompts[g * group_size:(g + 1) * group_size]
        if any(p != run[0] for p in run):
            raise ValueError(f"group {g} mixes prompts: TRL repeats each prompt G times in a row")
        jobs += [(ScenarioSpec.from_prompt(run[0]), g)] * group_size
    return jobs


def to_trl(episodes: Sequence[Episode]) -> dict[str, list]:
    """The ``rollout_func`` output dict for ``episodes`` (keys: :data:`TRL_KEYS` + extras).

    Extras: ``env_reward`` (float), ``termination`` (str), ``truncated`` (bool), ``turn_ids``
    (per-token turn index), ``scenario_id`` (str), ``group_id`` (int), ``num_turns`` (int).
    """
    return {
        "prompt_ids": [e.prompt_ids for e in episodes],
        "completion_ids": [e.completion_ids for e in episodes],
        "logprobs": [e.logprobs for e in episodes],
        "env_mask": [e.env_mask for e in episodes],
        "env_reward": [e.reward for e in episodes],
        "termination": [e.termination for e in episodes],
        "truncated": [e.truncated for e in episodes],
        "turn_ids": [e.turn_ids for e in episodes],
        "scenario_id": [e.scenario_id for e in episodes],
        "group_id": [e.group_id for e in episodes],
        "num_turns": [len(e.turns) for e in episodes],
    }
