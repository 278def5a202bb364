"""Fixtures for the agent RL tests (a helper module, loaded with importlib by the tests).

- ``ParityGym``: FunctionGym whose reward is 1 when the agent's first message has an even number
  of characters — random tiny-model messages get varied rewards, so group advantages are non-zero
  and a GRPO step must move the adapter.
- :func:`scripted_user`: a user simulator whose turns carry ``<think>`` reasoning (a random tiny
  model rarely writes any, and CSD only coaches turns that follow private reasoning).
- :func:`build_frozen_tiny`: a frozen-simulator folder as ``freeze_user`` writes one.
"""

from __future__ import annotations

import itertools
from pathlib import Path

from mimesis.envs.function.gym import FunctionGym
from mimesis.envs.registry import _REGISTRY, register
from mimesis.io import write_json
from mimesis.rl.agent_training import AgentRLParams, DynamicSamplingParams
from mimesis.simulator.runtime import UserSimulator
from mimesis.users.frozen import FrozenUser
from mimesis.users.spec import UserSamplingParams

PRIVATE_FACT = "my secret number is 4242"


class ParityGym(FunctionGym):
    """FunctionGym with a reward that random messages reach half of the time."""

    name = "ParityGym"

    def score(self) -> float:
        first = next((m.text for m in self.history if m.role == "agent"), "")
        return float(len(first) % 2 == 0)


class FlatFirstGym(FunctionGym):
    """Reward 0 on seeds below :data:`FLAT_BELOW` (their groups are flat: no GRPO signal), the
    parity of the first agent message's length on later seeds (dynamic sampling's replacements
    come from there, so a resampled group has signal about half of the time per episode)."""

    name = "FlatFirstGym"

    def reset(self, *, seed=None, options=None):
        self._seed = seed
        return super().reset(seed=seed, options=options)

    def score(self) -> float:
        if self._seed is None or self._seed < FLAT_BELOW:
            return 0.0
        first = next((m.text for m in self.history if m.role == "agent"), "")
        return float(len(first) % 2 == 0)


FLAT_BELOW = 1000

for _gym in (ParityGym, FlatFirstGym):
    if _gym.name not in _REGISTRY:
        register(_gym)

SMALL = {"envs": ["ParityGym"], "steps": 1, "scenarios_per_step": 2, "group_size": 4,
         "max_turns": 3, "max_new_tokens": 8, "max_completion_tokens": 320, "micro_batch": 4,
         "learning_rate": 5e-3, "user": UserSamplingParams(max_new_tokens=8),
         # flat groups get up to 2 fresh ones: the tests' steps need reward variance to learn
         "dynamic_sampling": DynamicSamplingParams(max_rounds=2)}


def small_params(cls=AgentRLParams, **overrides):
    """``cls`` with the tiny settings above (tests override what they need)."""
    return cls(**{**SMALL, **overrides})


def scripted_user(model, tokenizer, max_turns: int = 3) -> FrozenUser:
    """A :class:`FrozenUser` whose simulator answers ``<think>…</think>`` + a fresh value each
    time; ``model`` stands in as the frozen weights the guard watches."""
    from mimesis.users.frozen import weights_fingerprint

    counter = itertools.count(1)

    def generate(batch):
        return [f"<think>{PRIVATE_FACT}, turn {next(counter)}</think>\nf = {next(counter) * 7}"
                for _ in batch]

    model.requires_grad_(False)
    return FrozenUser(UserSimulator(generate, max_turns=max_turns), model, tokenizer, {},
                      weights_fingerprint(model), Path("."))


def build_frozen_tiny(sim_dir: Path) -> Path:
    """A frozen-simulator folder (tiny random Llama) with ``meta.json`` hashes."""
    from mimesis.models.base import load_base
    from mimesis.simulator.frozen import hash_files

    model, tokenizer = load_base("tiny-llama")
    model.save_pretrained(sim_dir)
    tokenizer.save_pretrained(sim_dir)
    # random weights never close a <think> block: prefilled, every turn would be private, so
    # the folder declares no private channel (freeze_user records "<think>")
    write_json(sim_dir / "meta.json", {"stage": "test-fixture", "base_model": "tiny-llama",
                                       "finetune": "none", "turn_prefill": "",
                                       "files": hash_files(sim_dir)})
    return sim_dir
