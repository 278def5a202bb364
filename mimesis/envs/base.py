"""The agent-environment base class and its contract with the rollout engine.

An environment holds one task with hidden facts per episode. The agent acts through tagged text
(see :mod:`mimesis.envs.actions`); the *user* is played by a simulator that the environment never
calls itself — the rollout engine does. One episode, as the engine runs it::

    obs, info = env.reset(seed=seed)            # obs: task instructions for the agent
    scenario = info["scenario"]                 # the user simulator's private scenario
    while True:
        obs, reward, terminated, truncated, info = env.step(agent_message)
        if info["to_user"] is not None:         # [action]: the message goes to the user
            reply, ended = simulator(info["to_user"])
            obs, reward, terminated, truncated, info = env.observe_user(reply, ended=ended)
        if terminated or truncated:
            break                               # reward is the episode's reward

Rules of the contract:

- ``step`` is called once per agent message; every call uses one of ``max_turns`` turns. Only
  ``step`` ends an episode by truncation (``turn == max_turns`` without termination), so an
  ``[action]`` on the last turn is truncated and its ``to_user`` is ``None``: there is one path
  for truncation, whatever the action (docs/pitfalls.md #9).
- After a ``step`` whose ``info["to_user"]`` is a string, ``obs`` is ``""`` and the engine must
  call ``observe_user`` before the next ``step``; the env raises otherwise. ``observe_user``
  returns the same five-tuple; its ``obs`` is the user's reply (what the agent sees next).
  ``ended=True`` (the simulator sent its end-of-conversation signal) terminates the episode.
- The reward is sparse: 0.0 on every non-final transition, and ``score()`` — the env's pure
  reward function applied to the episode as it stands — on the final one, however the episode
  ended (answer, ``[finish]``, user ended, truncation).
- ``info`` always has ``env``, ``task_id``, ``turn``, ``max_turns``, ``kind`` (the parsed action
  kind, ``None`` after reset/observe_user), ``tagged``, ``to_user``, ``obs_source`` (``env``,
  ``tool`` or ``user``: how to render ``obs`` in the agent's chat) and ``outcome`` (``None``
  until the episode ends, then e.g. ``answered``, ``finished``, ``user_ended``, ``truncated``).
  ``reset`` adds ``scenario``.
"""

from __future__ import annotations

import string
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, Protocol, TypeVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from mimesis.envs.actions import parse_action
from mimesis.schemas import Scenario

if TYPE_CHECKING:
    import random

    from mimesis.envs.facts import Exchange, Fact

Split = Literal["train", "held_out"]
ObsSource = Literal["env", "tool", "user"]
StepResult = tuple[str, float, bool, bool, dict[str, Any]]

EMPTY_ACTION_NOTE = "Your message was empty; nothing was sent to the user."


class HasId(Protocol):
    id: str


T = TypeVar("T", bound=HasId)


@dataclass(frozen=True)
class EnvMessage:
    """One entry of the episode transcript (``role``: agent, user, tool or env)."""

    role: Literal["agent", "user", "tool", "env"]
    text: str


class UserEnv(gym.Env[str, str], ABC, Generic[T]):
    """Base of the agent environments: a user with private facts, talked to by the agent.

    Subclasses set ``name``, ``split``, ``source`` and ``success_threshold`` and implement the
    hooks below; a training env also implements :meth:`probe_fact` and
    :meth:`grounding_exchanges` (:mod:`mimesis.envs.facts`). Tasks are frozen dataclasses with an
    ``id``. With ``tasks=None`` the env uses :meth:`default_tasks`,
    and when that is ``None`` too, draws a fresh task per episode from :meth:`generate_task`
    (procedural envs), so ``reset(seed=s)`` always gives the same task for the same ``s``.

    Args:
        tasks: Fixed task list (e.g. from a ``load_userrl_tasks`` loader), or ``None``.
        max_turns: Agent messages allowed per episode (≥ 1).

    Raises:
        ValueError: ``max_turns`` < 1 or an empty task list.
    """

    name: ClassVar[str]
    split: ClassVar[Split]
    source: ClassVar[str]
    # Reward at or above which an episode counts as a success, read off the env's ``score()``
    # (docs/environments.md); evaluation, difficulty selection and expert traces all use it.
    success_threshold: ClassVar[float]
    # Place in the registry's env lists (:func:`~mimesis.envs.registry.env_names`), which are
    # the default ``envs`` of every setting that plays "the training envs": the order decides
    # which seeds and grounding rows each env gets, so it is fixed here, not alphabetical. The
    # shipped envs follow the environment table of docs/environments.md; a new env goes last.
    order: ClassVar[int] = 100
    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, tasks: list[T] | None = None, max_turns: int = 20) -> None:
        if max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {max_turns}")
        self.tasks: list[T] | None = list(tasks) if tasks is not None else self.default_tasks()
        if self.tasks is not None and not self.tasks:
            raise ValueError(f"{self.name}: empty task list")
        self.max_turns = max_turns
        # Informational: messages are free text (gymnasium has no unbounded unicode space).
        self.action_space = spaces.Text(max_length=100_000, charset=string.printable)
        self.observation_space = spaces.Text(max_length=100_000, charset=string.printable)
        self.task: T | None = None
        self.turn = 0
        self.history: list[EnvMessage] = []
        self._awaiting_user = False
        self._over = False

    # ----------------------------------------------------------------- hooks for subclasses
    @classmethod
    def default_tasks(cls) -> list[T] | None:
        """Tasks shipped with the package, or ``None`` for a procedural env."""
        return None

    def generate_task(self, rng: np.random.Generator) -> T:
        """Draw one task (procedural envs only)."""
        raise TypeError(f"{self.name} ships a fixed task set and has no procedural generator; "
                        "pass tasks=")

    def start_episode(self) -> None:
        """Reset per-episode state after ``self.task`` is set (optional)."""

    @abstractmethod
    def agent_prompt(self) -> str:
        """Task instructions and action format for the agent (the first observation)."""

    @abstractmethod
    def user_goal(self) -> str:
        """The user's private knowledge and how to answer (goal text of the scenario)."""

    def user_directives(self) -> list[str]:
        """The sentences of :meth:`user_goal` that instruct the simulator how to answer (no
        fact of the task in them, and no scripted reply it is told to say): a user turn that
        copies one is cut before the agent sees it
        (:func:`~mimesis.simulator.guards.strip_directive_copies`). Default: none."""
        return []

    def user_view(self, message: str) -> str:
        """What the user simulator reads for the agent's ``[action]`` ``message`` (default: the
        message itself). An env may append private working the user would do in their head
        (FunctionGym: the rule's value at the inputs asked for); the agent never sees it, and
        ``info["to_user"]`` stays the agent's own message."""
        return message

    @abstractmethod
    def on_search(self, query: str) -> str:
        """Tool result for ``[search] query``."""

    @abstractmethod
    def on_answer(self, content: str) -> tuple[str, bool]:
        """Record ``[answer] content``; return (feedback for the agent, episode over)."""

    @abstractmethod
    def score(self) -> float:
        """The episode's reward as it stands (a pure reward function of the episode state)."""

    def probe_fact(self, position: int) -> Fact:
        """One hidden fact of the current task, asked for directly (the fact-reveal probes;
        ``position``: the task's place in the probed sample, to vary the fact kind).

        Raises:
            NotImplementedError: the env has no fact probes (held-out envs).
        """
        raise NotImplementedError(f"{self.name} has no fact probes")

    def grounding_exchanges(self, rng: random.Random) -> Iterator[Exchange]:
        """Scripted (agent message, user's private reasoning, user's reply) exchanges on the
        current task, as many as the caller takes: the simulator's grounding dialogues.

        Raises:
            NotImplementedError: the env has no grounding dialogues (held-out envs).
        """
        raise NotImplementedError(f"{self.name} has no grounding dialogues")

    # ----------------------------------------------------------------- public API
    @classmethod
    def provides(cls, hook: Literal["probe_fact", "grounding_exchanges"]) -> bool:
        """Whether the env implements the optional ``hook`` (overrides the base's).

        >>> UserEnv.provides("probe_fact")
        False
        """
        return getattr(cls, hook) is not getattr(UserEnv, hook)

    @classmethod
    def scenario_count(cls) -> int | None:
        """Number of shipped tasks, or ``None`` when tasks are generated procedurally."""
        tasks = cls.default_tasks()
        return None if tasks is None else len(tasks)

    def scenario_prompt(self) -> Scenario:
        """The user simulator's scenario for the current task (never shown to the agent)."""
        return Scenario(goal=self.user_goal(), annotator=f"env:{self.name}",
                        directives=self.user_directives())

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start an episode.

        Args:
            seed: Seeds ``self.np_random``; the same seed gives the same task.
            options: ``{"task": T}`` to play a given task, or ``{"index": i}`` to pick
                ``tasks[i]`` from a fixed list.

        Returns:
            ``(agent_prompt, info)``; ``info["scenario"]`` is the user simulator's scenario.
        """
        super().reset(seed=seed)
        options = options or {}
        if "task" in options:
            task = options["task"]
        elif self.tasks is None:
            task = self.generate_task(self.np_random)
        elif "index" in options:
            task = self.tasks[int(options["index"])]
        else:
            task = self.tasks[int(self.np_random.integers(len(self.tasks)))]
        self.task, self.turn, self._awaiting_user, self._over = task, 0, False, False
        self.start_episode()
        obs = self.agent_prompt()
        self.history = [EnvMessage("env", obs)]
        info = self._info(kind=None, tagged=False, to_user=None, source="env", outcome=None)
        info["scenario"] = self.scenario_prompt()
        return obs, info

    def step(self, action: str) -> StepResult:
        """Apply one agent message (see the module docstring for the contract).

        Raises:
            RuntimeError: before ``reset``, after the episode ended, or while a user reply is
                awaited.
        """
        if self.task is None or self._over:
            raise RuntimeError(f"{self.name}: call reset() to start an episode")
        if self._awaiting_user:
            raise RuntimeError(f"{self.name}: call observe_user(reply) before the next step")
        self.turn += 1
        self.history.append(EnvMessage("agent", action))
        act = parse_action(action)
        obs, source, to_user, outcome = "", "env", None, None
        if act.kind == "action" and act.content:
            to_user = act.content
        elif act.kind == "action":
            obs = EMPTY_ACTION_NOTE
        elif act.kind == "search":
            obs, source = self.on_search(act.content), "tool"
        elif act.kind == "answer":
            obs, over = self.on_answer(act.content)
            outcome = "answered" if over else None
        else:
            obs, outcome = "Episode finished.", "finished"
        terminated = outcome is not None
        truncated = not terminated and self.turn >= self.max_turns
        if truncated:
            to_user, outcome = None, "truncated"
            obs = (obs + "\n" if obs else "") + "Turn limit reached; the episode is over."
        if obs:
            self.history.append(EnvMessage("tool" if source == "tool" else "env", obs))
        self._awaiting_user = to_user is not None
        return self._emit(
            obs, terminated, truncated, act.kind, act.tagged, to_user, source, outcome
        )

    def observe_user(self, reply: str, ended: bool = False) -> StepResult:
        """Feed the user simulator's reply to the last ``[action]``.

        Args:
            reply: The user's message (reasoning already stripped by the simulator runtime).
            ended: True when the simulator ended the conversation; terminates the episode.

        Returns:
            The five-tuple of ``step``; ``obs`` is ``reply``.

        Raises:
            RuntimeError: no ``[action]`` is waiting for a reply.
        """
        if not self._awaiting_user:
            raise RuntimeError(f"{self.name}: no agent message is waiting for a user reply")
        self._awaiting_user = False
        self.history.append(EnvMessage("user", reply))
        outcome = "user_ended" if ended else None
        return self._emit(reply, ended, False, None, False, None, "user", outcome)

    # ----------------------------------------------------------------- internals
    def _emit(
        self,
        obs: str,
        terminated: bool,
        truncated: bool,
        kind: str | None,
        tagged: bool,
        to_user: str | None,
        source: ObsSource,
        outcome: str | None,
    ) -> StepResult:
        self._over = terminated or truncated
        reward = self.score() if self._over else 0.0
        info = self._info(kind=kind, tagged=tagged, to_user=to_user, source=source, outcome=outcome)
        return obs, reward, terminated, truncated, info

    def _info(
        self,
        kind: str | None,
        tagged: bool,
        to_user: str | None,
        source: ObsSource,
        outcome: str | None,
    ) -> dict[str, Any]:
        assert self.task is not None
        return {
            "env": self.name,
            "task_id": self.task.id,
            "turn": self.turn,
            "max_turns": self.max_turns,
            "kind": kind,
            "tagged": tagged,
            "to_user": to_user,
            "obs_source": source,
            "outcome": outcome,
        }


def action_format(search_help: str = "use the tool described above") -> str:
    """The tag list shown to the agent; ``search_help`` describes ``[search]`` in this env."""
    return (
        "Reply with exactly one action per message, starting with its tag:\n"
        "[action] <message>   talk to the user (ask a question, propose, confirm)\n"
        f"[search] <query>     {search_help}\n"
        "[answer] <answer>    give your final answer\n"
        "[finish]             stop without answering\n"
        "A message without a tag is sent to the user as an [action]."
    )
