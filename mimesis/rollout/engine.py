"""Multi-turn rollouts: agent ↔ user simulator ↔ environment, batched across episodes.

:class:`RolloutEngine` plays G episodes per scenario (:meth:`RolloutEngine.run`) or any list
of ``(spec, group_id)`` jobs (:meth:`RolloutEngine.play`). Each episode follows the env
contract of :mod:`mimesis.envs.base`: the agent's message goes to ``env.step``; when the env
routes it to the user (``info["to_user"]``) the simulator's reply goes to ``env.observe_user``
(the simulator runtime strips its reasoning, which the record keeps per turn).

Batching (continuous, at the episode level): at most ``max_concurrent`` episodes are live; a
queue of pending episodes refills a slot as soon as an episode ends. Every step makes ONE agent
call for all live episodes waiting on the agent and ONE simulator call
(``UserSimulator.next_messages``) for all waiting on the user — never one episode at a time.
``max_concurrent=1`` is the sequential baseline: the same code, batch 1.

Token budget (docs/pitfalls.md #9): :func:`enforce_token_budget` is the one place that ends an
episode for length, called after every addition to the completion, whatever the batch size.

Turn budget: every observation the agent reads ends with :func:`turns_left_note` (messages left;
on the last, that it must answer now).

Text policies: an agent with an ``act(views) -> texts`` method (:class:`TextPolicy`, e.g. the
scripted experts of :mod:`mimesis.rl.experts`) plays instead of a token sampler. It sees only
what an agent sees (:class:`AgentView`: the env's first observation, its own messages and what
came back); each text becomes the ids a sampler would have produced for it
(:func:`policy_turn_ids`: content tokens + end-of-turn, checked against the chat template) with
log-prob 0.0, so its episodes are ordinary :class:`Episode` records with the same
``prompt_ids``/``completion_ids``/``env_mask`` layout as sampled rollouts.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from tqdm.auto import tqdm

from mimesis.envs import make
from mimesis.envs.base import UserEnv
from mimesis.models.engine.sampling import Sample, TokenGenerateFn
from mimesis.models.engine.tokens import TemplateDriftError, Transcript, encode, render
from mimesis.rollout.records import (
    OUTCOME_TERMINATION,
    Episode,
    RolloutParams,
    ScenarioSpec,
    Termination,
    TurnRecord,
)
from mimesis.schemas import Messages
from mimesis.simulator.runtime import UserSimulator, UserState

Job = tuple[ScenarioSpec, int]  # (scenario, group id)


@dataclass
class RolloutStats:
    """Batch sizes of every agent and simulator call (one entry per call)."""

    agent_batches: list[int] = field(default_factory=list)
    user_batches: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class ViewTurn:
    """One agent turn as the agent saw it: its message and what came back (``source``: ``env``,
    ``tool`` or ``user``; the user's private reasoning is never here)."""

    agent: str
    source: str
    obs: str


@dataclass(frozen=True)
class AgentView:
    """What an agent may know of a live episode: the environment's name, its first observation
    (task instructions), the message budget and every earlier turn. No task, scenario or user
    state: a policy that acts on a view cannot read the hidden facts."""

    env: str
    prompt: str
    max_turns: int
    turns: tuple[ViewTurn, ...] = ()

    @property
    def turns_left(self) -> int:
        """Agent messages still allowed, this one included."""
        return self.max_turns - len(self.turns)


@runtime_checkable
class TextPolicy(Protocol):
    """An agent that answers in text: ``act(views) -> texts``, one message per view, in order."""

    def act(self, views: Sequence[AgentView]) -> list[str]: ...


def policy_turn_ids(tokenizer, messages: Messages, text: str) -> list[int]:
    """The ids a sampling agent would produce to say ``text`` after ``messages``: the content's
    tokens and the end-of-turn token (``eos_token``), as :class:`~mimesis.models.engine.tokens.Transcript`
    expects a sampled turn.

    Raises:
        TemplateDriftError: the template does not render an assistant turn as
            ``generation prompt + text + eos_token`` (then sampled turns could not match it
            either).
    """
    before = render(tokenizer, messages, add_generation_prompt=True)
    after = render(tokenizer, [*messages, {"role": "assistant", "content": text}],
                   add_generation_prompt=False)
    if not after.startswith(before + text + tokenizer.eos_token):
        raise TemplateDriftError("the chat template does not render an agent turn as its text "
                                 f"followed by {tokenizer.eos_token!r}")
    return encode(tokenizer, text) + [tokenizer.eos_token_id]


@dataclass
class LiveEpisode:
    """Mutable state of an episode in flight (internal to the engine, exposed for tests)."""

    index: int
    spec: ScenarioSpec
    group_id: int
    env: UserEnv
    info: dict[str, Any]
    user: UserState
    transcript: Transcript
    turns: list[TurnRecord] = field(default_factory=list)
    phase: Literal["agent", "user", "done"] = "agent"
    to_user: str | None = None
    record: Episode | None = None


def enforce_token_budget(episode: LiveEpisode, max_completion_tokens: int) -> bool:
    """The one truncation rule: end ``episode`` if its completion reached the token budget.

    An episode ends (termination ``max_tokens``, ``truncated=True``) the moment its completion
    — agent and injected tokens together — has ``max_completion_tokens`` tokens or more, before
    anything else happens: tokens past the budget are cut, a cut agent turn is never sent to
    the env, and no further turn is played. Reward rule: ``env.score()`` on the episode as it
    stands, the same rule the env applies to its own truncation at ``max_turns`` (so a
    length-truncated episode keeps the credit of what it completed; it never gains from the cut
    turn).

    Returns:
        True when the episode ended here.
    """
    transcript = episode.transcript
    if episode.phase == "done" or len(transcript.completion_ids) < max_completion_tokens:
        return False
    transcript.cut(max_completion_tokens)
    _finish(episode, episode.env.score(), "max_tokens", truncated=True)
    return True


def _finish(episode: LiveEpisode, reward: float, termination: Termination,
            truncated: bool) -> None:
    t, info, user = episode.transcript, episode.info, episode.user
    episode.phase = "done"
    episode.record = Episode(
        scenario_id=f"{info['env']}:{info['task_id']}", group_id=episode.group_id,
        index=episode.index, env=info["env"], task_id=str(info["task_id"]), spec=episode.spec,
        scenario=info["scenario"], prompt_ids=t.prompt_ids, completion_ids=t.completion_ids,
        env_mask=t.env_mask, logprobs=t.logprobs, turn_ids=t.turn_ids, reward=float(reward),
        termination=termination, truncated=truncated, messages=t.messages, turns=episode.turns,
        user_end_reason=user.end_reason, user_flags=list(user.flags))


class RolloutEngine:
    """Plays episodes with a sampling agent, a user simulator and registered environments.

    Args:
        agent: Token-level sampler of the agent (e.g. :class:`~mimesis.models.engine.sampling.TokenSampler`),
            or a :class:`TextPolicy` (its texts are encoded by :func:`policy_turn_ids`).
        tokenizer: The agent's tokenizer; its chat template renders the agent's chat.
        simulator: The user simulator (frozen model or prompted baseline) behind its runtime.
        params: Engine settings.
        progress: Show a tqdm bar over finished episodes.
    """

    def __init__(self, agent: TokenGenerateFn | TextPolicy, tokenizer, simulator: UserSimulator,
                 params: RolloutParams | None = None, progress: bool = True) -> None:
        self.agent, self.tokenizer, self.simulator = agent, tokenizer, simulator
        self.params = params or RolloutParams()
        self.progress = progress
        self.stats = RolloutStats()

    def sequential(self) -> RolloutEngine:
        """The same engine with ``max_concurrent=1`` (one episode at a time, batch 1)."""
        params = dataclasses.replace(self.params, max_concurrent=1)
        return RolloutEngine(self.agent, self.tokenizer, self.simulator, params, self.progress)

    def run(self, specs: Sequence[ScenarioSpec], desc: str = "rollout") -> list[Episode]:
        """``group_size`` episodes of each spec; ``group_id`` = the spec's index in ``specs``.

        Returns:
            Episodes ordered by group, then by their index within the group.
        """
        jobs = [(spec, g) for g, spec in enumerate(specs) for _ in range(self.params.group_size)]
        return self.play(jobs, desc=desc)

    def play(self, jobs: Sequence[Job], desc: str = "rollout") -> list[Episode]:
        """Play one episode per ``(spec, group_id)`` job; returns the records in job order."""
        queue = deque(enumerate(jobs))
        live: list[LiveEpisode] = []
        records: list[Episode | None] = [None] * len(jobs)
        bar = tqdm(total=len(jobs), desc=desc, unit="episode", disable=not self.progress)
        while queue or live:
            while queue and len(live) < self.params.max_concurrent:
                live.append(self._start(*queue.popleft()))
            self._agent_step([e for e in live if e.phase == "agent"])
            self._user_step([e for e in live if e.phase == "user"])
            for e in live:
                if e.record is not None:
                    records[e.index] = e.record
                    bar.update(1)
            live = [e for e in live if e.phase != "done"]
        bar.close()
        return [r for r in records if r is not None]

    def _start(self, index: int, job: Job) -> LiveEpisode:
        spec, group_id = job
        env = make(spec.env, max_turns=self.params.max_turns, **spec.env_kwargs)
        obs, info = env.reset(seed=spec.seed, options=dict(spec.options) or None)
        opening = [{"role": "user", "content": obs}]
        if self.params.system_prompt:
            opening.insert(0, {"role": "system", "content": self.params.system_prompt})
        return LiveEpisode(index, spec, group_id, env, info,
                           self.simulator.init_state(info["scenario"]),
                           Transcript.start(self.tokenizer, opening))

    def _agent_step(self, waiting: list[LiveEpisode]) -> None:
        """One agent call for every episode waiting on the agent."""
        if not waiting:
            return
        p = self.params
        limits = [min(p.max_new_tokens, p.max_completion_tokens - len(e.transcript.completion_ids))
                  for e in waiting]
        if isinstance(self.agent, TextPolicy):
            samples = self._text_samples(waiting, limits)
        else:
            samples = self.agent([e.transcript.ids() for e in waiting], limits)
        if len(samples) != len(waiting):
            raise ValueError(f"agent returned {len(samples)} samples for {len(waiting)} prompts")
        self.stats.agent_batches.append(len(waiting))
        for e, sample in zip(waiting, samples, strict=True):
            e.transcript.add_agent(sample.ids, sample.logprobs)
            turn = TurnRecord(agent_text=self.tokenizer.decode(sample.ids,
                                                               skip_special_tokens=True))
            e.turns.append(turn)
            if enforce_token_budget(e, p.max_completion_tokens):
                continue
            obs, reward, terminated, truncated, info = e.env.step(turn.agent_text)
            turn.kind, turn.to_user = info["kind"], info["to_user"]
            turn.obs, turn.obs_source = obs, info["obs_source"]
            if info["to_user"] is not None:
                e.phase, e.to_user = "user", e.env.user_view(info["to_user"])
            else:
                self._after(e, obs, reward, terminated, truncated, info)

    def _text_samples(self, waiting: list[LiveEpisode], limits: list[int]) -> list[Sample]:
        """A text policy's messages as samples: its ids (cut at the turn's limit, like a sampled
        turn), log-probs 0.0."""
        texts = self.agent.act([agent_view(e, self.params.max_turns) for e in waiting])
        if len(texts) != len(waiting):
            raise ValueError(f"text policy returned {len(texts)} texts for {len(waiting)} views")
        samples = []
        for e, text, limit in zip(waiting, texts, limits, strict=True):
            ids = policy_turn_ids(self.tokenizer, e.transcript.messages, text)[:limit]
            samples.append(Sample(ids, [0.0] * len(ids)))
        return samples

    def _user_step(self, waiting: list[LiveEpisode]) -> None:
        """One simulator call (``next_messages``) for every episode waiting on the user."""
        if not waiting:
            return
        replies = self.simulator.next_messages([(e.to_user, e.user) for e in waiting])
        self.stats.user_batches.append(len(waiting))
        for e, (reply, state) in zip(waiting, replies, strict=True):
            e.user, e.phase, e.to_user = state, "agent", None
            turn = e.turns[-1]
            if state.ended:
                turn.user_reasoning = state.end_reasoning
            else:
                turn.user_reasoning, turn.user_flags = state.private[-1], state.turn_flags[-1]
            obs, reward, terminated, truncated, info = e.env.observe_user(reply, ended=state.ended)
            turn.obs, turn.obs_source = obs, "user"
            self._after(e, obs, reward, terminated, truncated, info)

    def _after(self, e: LiveEpisode, obs: str, reward: float, terminated: bool, truncated: bool,
               info: dict[str, Any]) -> None:
        """End the episode on the env's signal, else show ``obs`` to the agent."""
        if terminated or truncated:
            outcome = info["outcome"]
            if outcome not in OUTCOME_TERMINATION:
                raise ValueError(f"env {info['env']} ended with unknown outcome {outcome!r}")
            _finish(e, reward, OUTCOME_TERMINATION[outcome], truncated=truncated)
            return
        role = self.params.obs_roles[info["obs_source"]]
        e.transcript.add_message({"role": role,
                                  "content": obs + turns_left_note(self.params.max_turns - len(e.turns))})
        enforce_token_budget(e, self.params.max_completion_tokens)


def turns_left_note(left: int) -> str:
    """What the agent reads after each observation: the messages it has left, and on the last
    one that it must answer now.

    Why: the prompt states the budget once, and a small agent cannot count its own messages;
    measured on the CPU default (5 turns), the SFT agent asked the same question until the turn
    limit in every TravelGym episode and never answered (reward 0 in 8 of 8). Only the agent's
    context gets the note; ``env`` observations and :class:`ViewTurn` ``obs`` stay as the env
    emitted them.

    >>> turns_left_note(3), turns_left_note(1)
    ('\\n\\n(3 messages left)', '\\n\\n(1 message left: this is your last; give your [answer] now)')
    """
    if left == 1:
        return "\n\n(1 message left: this is your last; give your [answer] now)"
    return f"\n\n({left} messages left)"


def agent_view(e: LiveEpisode, max_turns: int) -> AgentView:
    """The public part of a live episode (:class:`AgentView`)."""
    prompt = next(m["content"] for m in e.transcript.messages if m["role"] == "user")
    turns = tuple(ViewTurn(t.agent_text, t.obs_source, t.obs) for t in e.turns)
    return AgentView(env=e.info["env"], prompt=prompt, max_turns=max_turns, turns=turns)
