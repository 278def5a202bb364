"""Agent evaluation: success rate and reward on held-out scenarios, per agent, user and env.

Protocol (docs/metrics.md, agent side; MIMESIS paper, arXiv 2610.09484): every agent (the base
model, the SFT, GRPO and CSD agents; :mod:`mimesis.eval.agents.run`) plays the same fixed set of
held-out scenarios of each environment with (a) the frozen training simulator and (b) each
unseen user (:mod:`mimesis.users.unseen`). One :meth:`~mimesis.rollout.engine.RolloutEngine.play`
call per (agent, simulator) plays every scenario of every env together (batched agent and user
calls). Every run starts from the same seeds: a fresh agent sampler seeded ``seed``, and every
user restarted from ``seed`` (:func:`~mimesis.users.reseed.reseed_user`), so identical agents get
identical episodes and runs of different agents are paired (caveat: :mod:`mimesis.users.reseed`).
Paper reference points (Qwen3-8B agent, mean over 9 unseen users): GRPO with a GPT-5.5 user 26.10,
GRPO with MIMESIS-9B 29.54, + CSD 31.09.

Held-out scenarios (:func:`heldout_specs`): procedural envs use seeds ``seed_offset + i``
(default :data:`HELDOUT_SEED_OFFSET` = 10 000 000; training uses ``scenario_seed + i``, from 0 in
the default params, and fixed-task envs train on the training part of their list); fixed-task envs
take task indices spread evenly over the evaluation part (``options={"index": …}``).
:func:`check_disjoint` refuses an overlap with what an arm played.

Success thresholds, confidence intervals and the ``ALL`` rows: :mod:`mimesis.eval.agents.stats`;
paired differences between agents: :mod:`mimesis.eval.agents.pairs`.

Where things live: this module holds the held-out scenarios, the evaluation run
(:func:`evaluate_agents`) and agent loading (:func:`load_agent`); the report of its rows (Markdown
table, bar plot) is in :mod:`mimesis.eval.agents.tables`.
"""

from __future__ import annotations

import gc
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from mimesis.envs.registry import small_agent_env_kwargs
from mimesis.eval.agents.stats import episode_rows, overall_rows, success_threshold
from mimesis.rollout.records import Episode, RolloutParams, ScenarioSpec
from mimesis.simulator.runtime import UserSimulator
from mimesis.users.reseed import reseed_user

HELDOUT_SEED_OFFSET = 10_000_000

AgentSource = tuple[Any, Any] | Callable[[], tuple[Any, Any]]


@dataclass(frozen=True)
class EvalRolloutParams:
    """How every agent is played and scored in an evaluation: the held-out scenarios, the episode
    budgets, the agent's sampling, the seeds and the bootstrap CI (:func:`evaluate_agents`'s
    settings; the fields of params.yaml ``evaluate_agents.agents`` that
    :class:`~mimesis.eval.agents.run.AgentComparisonParams` inherits).

    Attributes:
        envs: Registered environments to evaluate on (train and held-out envs alike).
        n_scenarios: Held-out scenarios per env (capped at a fixed-task env's task count).
        seed_offset: First held-out seed of procedural envs.
        episodes_per_scenario: Episodes per scenario (> 1 only helps with sampling).
        max_turns: Agent messages per episode (env) and user turns (simulator).
        max_new_tokens: Tokens per agent turn (the training budget: the stage refuses another).
        max_completion_tokens: Agent + injected tokens per episode.
        temperature: Agent sampling temperature; 0 = greedy (the default: a fixed policy).
        top_p: Agent nucleus mass.
        batch_size: Agent rows per forward.
        max_concurrent: Episodes in flight per engine.
        seed: Agent sampler seed and user seed, both restarted at every (agent, user) run
            (paired comparisons).
        n_bootstrap: Bootstrap resamples of the CI.
        ci: Confidence level of the CI.
        system_prompt: Optional system message opening the agent's chat.
        env_kwargs: Env name → constructor arguments (e.g. a shorter TauGym policy).
    """

    envs: tuple[str, ...] = ("TravelGym", "PersuadeGym", "TelepathyGym")
    n_scenarios: int = 2
    seed_offset: int = HELDOUT_SEED_OFFSET
    episodes_per_scenario: int = 1
    max_turns: int = 3
    max_new_tokens: int = 48
    max_completion_tokens: int = 640
    temperature: float = 0.0
    top_p: float = 1.0
    batch_size: int = 16
    max_concurrent: int = 16
    seed: int = 13
    n_bootstrap: int = 1000
    ci: float = 0.95
    system_prompt: str | None = None
    env_kwargs: dict[str, dict[str, Any]] = field(default_factory=small_agent_env_kwargs)

    def __post_init__(self) -> None:
        object.__setattr__(self, "envs", tuple(self.envs))
        positive = ("n_scenarios", "episodes_per_scenario", "max_turns", "max_new_tokens",
                    "max_completion_tokens", "batch_size", "max_concurrent", "n_bootstrap")
        bad = [n for n in positive if getattr(self, n) < 1]
        if bad or not self.envs:
            raise ValueError(f"must be >= 1: {bad}; envs must not be empty")
        if not 0 < self.ci < 1 or self.temperature < 0 or not 0 < self.top_p <= 1:
            raise ValueError("need 0 < ci < 1, temperature >= 0, 0 < top_p <= 1")
        from mimesis.envs.registry import check_envs

        check_envs(self.envs, env_kwargs=self.env_kwargs)
        for env in self.envs:
            success_threshold(env)  # an env without a success definition fails here, not later

    def rollout(self) -> RolloutParams:
        """The engine settings of these params."""
        return RolloutParams(group_size=self.episodes_per_scenario,
                             max_concurrent=self.max_concurrent, max_turns=self.max_turns,
                             max_new_tokens=self.max_new_tokens,
                             max_completion_tokens=self.max_completion_tokens,
                             system_prompt=self.system_prompt)


# ----------------------------------------------------------------------------- scenarios
def spread_indices(n: int, total: int) -> list[int]:
    """``min(n, total)`` task indices spread evenly over ``range(total)``.

    >>> spread_indices(4, 297), spread_indices(5, 3)
    ([0, 74, 148, 222], [0, 1, 2])
    """
    n = min(n, total)
    return [i * total // n for i in range(n)]


def task_count(env: str, env_kwargs: dict | None = None) -> int | None:
    """Shipped tasks of ``env`` (``None``: procedural). Asks only this env (``list_envs`` would
    load every env's task list).

    Raises:
        ValueError: an unknown env.
    """
    from mimesis.envs import make

    try:
        tasks = make(env, **(env_kwargs or {})).tasks
    except KeyError as exc:
        raise ValueError(f"unknown environments [{env!r}]: {exc}") from None
    return None if tasks is None else len(tasks)


def heldout_specs(envs: Sequence[str], n_scenarios: int,
                  seed_offset: int = HELDOUT_SEED_OFFSET,
                  env_kwargs: dict[str, dict] | None = None) -> list[ScenarioSpec]:
    """Held-out scenarios: per env, seeds ``seed_offset + i`` (procedural) or task indices
    spread over the evaluation part of a fixed task list (training envs:
    :func:`~mimesis.envs.registry.task_indices` ``"eval"``; held-out envs: every task), seed
    ``seed_offset + i`` too; envs in the given order.

    Raises:
        ValueError: an unknown env.
    """
    from mimesis.envs.registry import env_split, task_indices

    env_kwargs = env_kwargs or {}
    specs = []
    for env in envs:
        kwargs = env_kwargs.get(env, {})
        total = task_count(env, kwargs)
        if total is None:
            specs += [ScenarioSpec(env=env, seed=seed_offset + i, env_kwargs=kwargs)
                      for i in range(n_scenarios)]
            continue
        allowed = task_indices(total, "eval") if env_split(env) == "train" else list(range(total))
        specs += [ScenarioSpec(env=env, seed=seed_offset + i, options={"index": allowed[k]},
                               env_kwargs=kwargs)
                  for i, k in enumerate(spread_indices(n_scenarios, len(allowed)))]
    return specs


def check_disjoint(eval_specs: Sequence[ScenarioSpec], train_specs: Sequence[ScenarioSpec]) -> None:
    """Refuse evaluation scenarios that training played: the same env and task index (fixed task
    lists) or the same env and seed (procedural envs, where the seed picks the task).

    Raises:
        ValueError: names the overlapping scenarios.
    """
    def key(s: ScenarioSpec) -> tuple[str, str]:
        return s.env, json.dumps(s.options, sort_keys=True) if s.options else str(s.seed)

    overlap = sorted({key(s) for s in eval_specs} & {key(s) for s in train_specs})
    if overlap:
        raise ValueError(f"{len(overlap)} evaluation scenario(s) were used in training, e.g. "
                         f"{overlap[:3]}")


# ----------------------------------------------------------------------------- evaluation
def _default_sampler(model, tokenizer, p: EvalRolloutParams):
    from mimesis.models.engine.sampling import SamplingParams, TokenSampler

    return TokenSampler(model, tokenizer, SamplingParams(
        temperature=p.temperature, top_p=p.top_p, max_new_tokens=p.max_new_tokens,
        batch_size=p.batch_size), seed=p.seed)


def free_memory() -> None:
    """Collect garbage and empty the CUDA cache (between agents)."""
    gc.collect()
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except ImportError:  # pragma: no cover - torch is a dependency
        pass


def evaluate_agents(agents: Mapping[str, AgentSource], simulators: Mapping[str, UserSimulator],
                    params: EvalRolloutParams | None = None, *, progress: bool = True,
                    on_episodes: Callable[[str, str, list[Episode]], None] | None = None,
                    make_sampler: Callable[..., Any] | None = None) -> list[dict]:
    """Play the held-out scenarios of ``params.envs`` for every (agent, simulator) pair.

    Args:
        agents: Name → ``(model, tokenizer)`` or a zero-argument loader returning one (loaded
            when its turn comes, dropped and garbage-collected after its runs).
        simulators: Name → user simulator (the frozen training one, unseen ones); each is
            restarted from ``params.seed`` before each of its runs
            (:func:`~mimesis.users.reseed.reseed_user`: its ``generate_fn`` may be replaced).
        params: Settings (default :class:`EvalRolloutParams`).
        progress: tqdm bars (one over pairs, one per run over episodes).
        on_episodes: Called with ``(agent, simulator, episodes)`` after each run (e.g. to write
            them); the records are not kept otherwise.
        make_sampler: ``(model, tokenizer, params) -> TokenGenerateFn``; default a
            :class:`~mimesis.models.engine.sampling.TokenSampler` with the params' sampling settings.

    Returns:
        Rows of :func:`episode_rows` (agent, simulator, env order) followed by the
        :func:`overall_rows`; each row also has ``run_seconds`` (the wall time of its run; the
        ALL rows sum their runs).

    Raises:
        ValueError: an unknown env, or no agent or simulator.
        TypeError: a simulator whose randomness cannot be restarted.
    """
    p = params or EvalRolloutParams()
    if not agents or not simulators:
        raise ValueError("need at least one agent and one simulator")
    from mimesis.rollout.engine import RolloutEngine

    specs = heldout_specs(p.envs, p.n_scenarios, p.seed_offset, p.env_kwargs)
    jobs = [(spec, g) for g, spec in enumerate(specs) for _ in range(p.episodes_per_scenario)]
    sampler_of = make_sampler or _default_sampler
    rows: list[dict] = []
    seconds: dict[tuple[str, str], float] = {}
    bar = tqdm(total=len(agents) * len(simulators), desc="agent evaluation", unit="run",
               disable=not progress)
    for agent_name, source in agents.items():
        model, tokenizer = source if isinstance(source, tuple) else source()
        for sim_name, simulator in simulators.items():
            started = time.perf_counter()
            reseed_user(simulator, p.seed)
            engine = RolloutEngine(sampler_of(model, tokenizer, p), tokenizer, simulator,
                                   p.rollout(), progress=progress)
            episodes = engine.play(jobs, desc=f"{agent_name} x {sim_name}")
            seconds[agent_name, sim_name] = round(time.perf_counter() - started, 2)
            rows += [{**row, "run_seconds": seconds[agent_name, sim_name]} for row in
                     episode_rows(agent_name, sim_name, episodes, p.n_bootstrap, p.ci, p.seed)]
            if on_episodes is not None:
                on_episodes(agent_name, sim_name, episodes)
            del engine, episodes
            bar.update(1)
        del model, tokenizer
        if not isinstance(source, tuple):
            free_memory()
    bar.close()
    overall = [{**row, "run_seconds": seconds[row["agent"], row["simulator"]]}
               for row in overall_rows(rows, p.ci)]
    return rows + overall


# ----------------------------------------------------------------------------- agents
def load_agent(kind: str, source: str | Path, dtype: str = "float32", device: str | None = None,
               merge: bool = True):
    """Load an agent for evaluation.

    Args:
        kind: ``base`` (``source`` = a ``load_base`` name or HF folder) or ``adapter`` (aliases
            ``train_agent``, ``distill_agent``: ``source`` = the stage's output folder, with
            ``model/`` = LoRA adapter and ``meta.json`` naming ``base_model``).
        dtype: Weights dtype.
        device: Where to put the model (default ``cuda`` when available, else CPU).
        merge: Merge the adapter into the base (faster sampling; same function).

    Returns:
        ``(model, tokenizer)``: eval mode, no gradients; the tokenizer is the base's (the one
        training used).

    Raises:
        ValueError: unknown ``kind``.
        FileNotFoundError: no ``meta.json`` / ``model/`` in an adapter folder.
        mimesis.models.merge.StaleTrainingError: the adapter files differ from ``meta.json``
            ``weights``, or the base model resolves to another folder than at training.
    """
    import torch

    from mimesis.models.base import base_dir, load_base

    if kind == "base":
        model, tokenizer = load_base(str(source), dtype=dtype)
    elif kind in ("adapter", "train_agent", "distill_agent"):
        from peft import PeftModel

        from mimesis.models.merge import StaleTrainingError, adapter_sha256

        out = Path(source)
        meta_path, model_dir = out / "meta.json", out / "model"
        if not meta_path.is_file() or not model_dir.is_dir():
            raise FileNotFoundError(f"{out} lacks meta.json or model/: not an agent stage output")
        meta = json.loads(meta_path.read_text())
        expected = meta.get("weights")
        if expected and adapter_sha256(model_dir) != expected:
            raise StaleTrainingError(f"{model_dir} does not match the weights of {meta_path}")
        recorded = meta.get("base_model_dir")
        if recorded and base_dir(meta["base_model"]).name != recorded:
            raise StaleTrainingError(f"base model {meta['base_model']!r} resolves to another "
                                     f"folder than {recorded}, which the agent was trained on")
        base, tokenizer = load_base(meta["base_model"], dtype=dtype)
        model = PeftModel.from_pretrained(base, str(model_dir))
        if merge:
            model = model.merge_and_unload()
    else:
        raise ValueError(f"agent kind {kind!r}: use base, adapter, train_agent or distill_agent")
    device = device or ("cuda" if torch.cuda.is_available() else None)
    if device:
        model.to(device)
    model.requires_grad_(False)
    model.eval()
    return model, tokenizer
