"""Registry of agent environments: adding an environment is adding one folder.

An environment lives in ``mimesis/envs/<name>/``: a package whose ``__init__.py`` imports the
:class:`~mimesis.envs.base.UserEnv` subclass decorated with :func:`register` (its ``gym.py``),
with the env's data files, fact probes and grounding exchanges beside it. It is found
automatically: :func:`make`, :func:`list_envs` and the other look-ups import every module and
sub-package of ``mimesis.envs`` once before they look the name up. What the rest of the library
needs to know about an env is read from its class here — its split (:func:`env_names`), its
success threshold (:func:`success_threshold`), whether it has fact probes and grounding
dialogues (:meth:`~mimesis.envs.base.UserEnv.provides`) — never from lists kept elsewhere
(docs/environments.md, "Adding an environment").
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from mimesis.envs.base import Split, UserEnv

E = TypeVar("E", bound=type[UserEnv])

_REGISTRY: dict[str, type[UserEnv]] = {}
_discovered = False


@dataclass(frozen=True)
class EnvSpec:
    """What :func:`list_envs` reports about one environment.

    Attributes:
        name: Registry name (``FunctionGym`` …).
        split: ``train`` (used to train agents) or ``held_out`` (evaluation only).
        n_scenarios: Number of shipped tasks; ``None`` for procedural generation (unbounded,
            one task per seed).
        source: Where the tasks come from.
    """

    name: str
    split: Split
    n_scenarios: int | None
    source: str


# Every HELD_OUT_EVERY-th task of a fixed task list is kept for evaluation only: evaluating an
# agent on the tasks it was trained on measures memory, not skill (docs/pitfalls.md #13).
HELD_OUT_EVERY = 5


def task_indices(n_tasks: int, part: Literal["train", "eval"]) -> list[int]:
    """Indices of a fixed task list that training (``train``) or evaluation (``eval``) may use.

    Task ``i`` is evaluation-only when ``i % HELD_OUT_EVERY == HELD_OUT_EVERY - 1`` (20%); the
    rest are for training. Held-out environments are evaluation-only as a whole, so callers use
    every index of those.

    Examples:
        >>> task_indices(10, "train"), task_indices(10, "eval")
        ([0, 1, 2, 3, 5, 6, 7, 8], [4, 9])

    Raises:
        ValueError: ``part`` is neither ``train`` nor ``eval``.
    """
    if part not in ("train", "eval"):
        raise ValueError(f"part must be 'train' or 'eval', got {part!r}")
    held = HELD_OUT_EVERY - 1
    return [i for i in range(n_tasks) if (i % HELD_OUT_EVERY == held) == (part == "eval")]


# The user simulator's grounding dialogues (train_user) and the fact-reveal probes (evaluate)
# must not share tasks, or the check would measure recall of training rows: procedural envs give
# grounding the seeds from GROUNDING_SEED on (probes use small seeds), fixed lists split their
# training part between the two (:func:`fact_indices`).
GROUNDING_SEED = 300_000


def fact_indices(n_tasks: int, use: Literal["grounding", "probe"]) -> list[int]:
    """Training-part indices of a fixed task list for the simulator's grounding dialogues or for
    the fact-reveal probes: alternate indices of :func:`task_indices` ``"train"``, so the two
    never share a task.

    Examples:
        >>> fact_indices(10, "grounding"), fact_indices(10, "probe")
        ([0, 2, 5, 7], [1, 3, 6, 8])

    Raises:
        ValueError: ``use`` is neither ``grounding`` nor ``probe``.
    """
    if use not in ("grounding", "probe"):
        raise ValueError(f"use must be 'grounding' or 'probe', got {use!r}")
    train = task_indices(n_tasks, "train")
    return train[0::2] if use == "grounding" else train[1::2]


def register(cls: E) -> E:
    """Class decorator: add an environment to the registry under ``cls.name``.

    Raises:
        ValueError: another class is already registered under that name.
    """
    known = _REGISTRY.get(cls.name)
    if known is not None and known is not cls:
        raise ValueError(f"environment {cls.name!r} is already registered by {known}")
    _REGISTRY[cls.name] = cls
    return cls


def _discover() -> None:
    """Import every module of ``mimesis.envs`` so their ``@register`` decorators run."""
    global _discovered
    if _discovered:
        return
    package = importlib.import_module("mimesis.envs")
    for module in pkgutil.iter_modules(package.__path__, prefix="mimesis.envs."):
        importlib.import_module(module.name)
    _discovered = True


def env_class(name: str) -> type[UserEnv]:
    """The class registered under ``name``.

    Raises:
        KeyError: unknown name (the message lists the known ones).
    """
    _discover()
    if name not in _REGISTRY:
        raise KeyError(f"unknown environment {name!r}; known: {sorted(_REGISTRY)}")
    return _REGISTRY[name]


def make(name: str, **kwargs: Any) -> UserEnv:
    """Build a registered environment; ``kwargs`` go to its constructor.

    Raises:
        KeyError: unknown name (the message lists the known ones).
    """
    return env_class(name)(**kwargs)


def env_split(name: str) -> Split:
    """The split (``train`` / ``held_out``) of a registered env, without loading its tasks.

    Raises:
        KeyError: unknown name (the message lists the known ones).
    """
    return env_class(name).split


def env_names(split: Split | None = None) -> list[str]:
    """Names of the envs of the ``mimesis.envs`` package (of ``split``, when given), without
    loading their tasks, in their classes' ``order`` (then by name): the default env list of
    every setting that plays "the training envs". An env registered from another module (a
    user's, a test's) is played by name (:func:`make`) but is in no default list.

    Examples:
        >>> [n for n in env_names("train") if n in ("TauGym", "TravelGym", "FunctionGym")]
        ['FunctionGym', 'TravelGym', 'TauGym']
        >>> "TelepathyGym" in env_names("train")
        False
    """
    _discover()
    names = [n for n, cls in _REGISTRY.items() if cls.__module__.startswith(f"{__package__}.")
             and (split is None or cls.split == split)]
    return sorted(names, key=lambda n: (_REGISTRY[n].order, n))


# Rewards are sums of floats: 0.1 + 0.2 must count as 0.3.
SUCCESS_EPS = 1e-9


def success_threshold(name: str) -> float:
    """Reward at or above which an episode of env ``name`` counts as a success: the env class's
    ``success_threshold`` (why each value: docs/environments.md).

    >>> success_threshold("TelepathyGym")
    0.5

    Raises:
        ValueError: ``name`` is not registered, or its class declares no threshold (never a
            silent default).
    """
    try:
        cls = env_class(name)
    except KeyError:
        raise ValueError(f"no success threshold for environment {name!r}: not a registered "
                         f"environment (known: {sorted(_REGISTRY)})") from None
    threshold = getattr(cls, "success_threshold", None)
    if threshold is None:
        raise ValueError(f"no success threshold for environment {name!r}: set the class "
                         f"attribute success_threshold of {cls.__qualname__} from its reward")
    return float(threshold)


def success_thresholds() -> dict[str, float]:
    """``{env: success_threshold(env)}`` for every registered env, in :func:`env_names` order.

    Raises:
        ValueError: a registered env without a threshold.
    """
    return {n: success_threshold(n) for n in env_names()}


def check_envs(names: Sequence[str], split: Split | None = None,
               env_kwargs: Mapping[str, Any] | None = None) -> None:
    """Raise unless every name is a registered env (of ``split``, when given) and every key of
    ``env_kwargs`` is a registered env (kwargs of one not in ``names`` are unused).

    Raises:
        ValueError: the first problem found, naming the env and the known ones.
    """
    _discover()
    unknown = [n for n in names if n not in _REGISTRY]
    if unknown:
        raise ValueError(f"unknown environment(s) {unknown}; known: {sorted(_REGISTRY)}")
    if split is not None:
        wrong = [n for n in names if _REGISTRY[n].split != split]
        if wrong:
            ok = sorted(n for n, spec in _REGISTRY.items() if spec.split == split)
            raise ValueError(f"{wrong}: not {split} environment(s) (held-out envs are for "
                             f"evaluation only); {split} envs: {ok}")
    # kwargs of a registered env that is not played are unused, not an error: a profile that
    # plays fewer envs cannot delete the default's kwargs (params merge)
    extra = sorted(set(env_kwargs or {}) - set(_REGISTRY))
    if extra:
        raise ValueError(f"env_kwargs for unknown environment(s) {extra}; known: "
                         f"{sorted(_REGISTRY)}")


def small_agent_env_kwargs() -> dict[str, dict[str, Any]]:
    """Env constructor arguments sized for a 135M agent: the ``env_kwargs`` that params.yaml gives
    ``sft_agent``, ``train_agent``, ``distill_agent`` and ``evaluate_agents.agents`` alike (an
    agent must be evaluated on the prompts it trained on), and their dataclasses' default.

    TauGym: a 1200-character policy, tool names only, tool results cut to 300 characters;
    TravelGym: 6 options a search (~230 SmolLM2 tokens; 10 options are ~390 and filled the
    640-token episode budget). A fresh dict each call (a mutable default).
    """
    return {"TauGym": {"policy_chars": 1200, "tool_docs": "names", "tool_result_chars": 300},
            "TravelGym": {"n_options": 6}}


def list_envs() -> list[EnvSpec]:
    """All registered environments, sorted by split (train first) then name."""
    _discover()
    specs = [
        EnvSpec(cls.name, cls.split, cls.scenario_count(), cls.source) for cls in _REGISTRY.values()
    ]
    return sorted(specs, key=lambda s: (s.split != "train", s.name))
