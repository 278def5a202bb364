"""The user simulator at run time: a participant with explicit state.

Protocol (tau2-bench, ``agent/base/participant.py`` / ``user/user_simulator_base.py``)::

    sim = UserSimulator(generator.generate, max_turns=16)
    state = sim.init_state(scenario)
    message, state = sim.next_message(None, state)          # first turn: from the scenario alone
    while not state.ended:
        message, state = sim.next_message(agent_reply(message), state)

``next_messages`` does the same for many episodes with ONE ``generate_fn`` call (plus one more
only for turns a guard sends back for resampling).

The simulator's view (:func:`build_view`) is built in one place, with the role convention of
training (:func:`~mimesis.simulator.roles.flip_roles`): system prompt, its own turns as
``assistant`` in the canonical ``<think>reasoning</think>\\nutterance`` form, agent turns as
``user``. The agent only ever receives the parsed utterance (:mod:`~mimesis.simulator.parsing`);
the reasoning stays in ``UserState.private``.

Episode rules (docs/pitfalls.md #1, #2, #4, #5, #6), applied to each generated turn in this order:

0. sentences that copy one of the scenario's directives (its instructions to the simulator,
   ``Scenario.directives``) are cut from the utterance
   (:func:`~mimesis.simulator.guards.strip_directive_copies`; flag ``directive_copy``); an
   utterance left empty goes through rule 4, like an ``unsafe_split`` one: never sent. So does
   an utterance that states a hidden fact (a scenario word nobody has said yet) with
   first-person meta-talk ("my goal is…", "I shouldn't say it"): it is emptied, its text kept
   as reasoning (flag ``hidden_fact``; :mod:`~mimesis.simulator.hidden_facts`).
1. only an end signal → the turn is drawn again, up to ``GuardParams.end_draws`` draws in all
   (flag ``end_confirm``; ``open_end`` on the opening, where ``resample_open_end`` switches it);
   the episode ends (``end_signal``) only when every draw was an end.
2. an utterance *and* an end signal → the utterance is sent and the end is deferred (flag
   ``end_deferred``): the agent still gets to carry out what the user just confirmed; the
   episode ends on a later turn that is only the end signal.
3. a near-verbatim repeat of an earlier user turn
   (:func:`~mimesis.simulator.guards.repeats_earlier`) is a restart of a finished request: it
   is drawn again once (``GuardParams.resample_restart``); a repeat again is not sent and the
   episode ends (``restart``; or ``end_signal`` when the repeat carried one).
4. no utterance → resampled once (``GuardParams.resample_empty``), else the episode ends
   (``empty_turn``): an empty user message is never sent.
5. assistant-like (``role_flip``), degenerate (``junk``: markup tags, a token repeated, see
   :func:`~mimesis.simulator.guards.is_junk`) or, on the first turn, goal-dumping (``goal_dump``) or
   off-topic (``off_topic``: an opening the user speaks first with no content word of the
   goal) turns are flagged and optionally
   resampled once; the last sample is sent with its flags. Each rule redraws a turn at most
   once (an end: ``end_draws - 1`` times), so one rule's redraw never spends another's.
6. the ``pleasantries_limit``-th content-free turn in a row ("thanks!", "bye") is not sent; the
   episode ends (``pleasantries_loop``).

Before generating, an episode that already has ``max_turns`` user turns ends (``max_turns``).
Once ended, ``next_message`` never calls the model again and returns ``""`` with
``state.ended`` True.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from pydantic import BaseModel, Field

from mimesis.schemas import LabeledConversation, Messages, Scenario, Turn, TurnLabel
from mimesis.simulator.guards import (
    GuardParams,
    content_words,
    goal_overlap,
    is_assistant_like,
    is_junk,
    is_pleasantry,
    repeats_earlier,
    strip_directive_copies,
)
from mimesis.simulator.hidden_facts import hidden_facts_said
from mimesis.simulator.parsing import ParsedTurn, parse_turn
from mimesis.simulator.prompts import render_system_prompt
from mimesis.simulator.roles import flip_roles

GenerateFn = Callable[[list[Messages]], list[str]]
EndReason = Literal["end_signal", "max_turns", "restart", "pleasantries_loop", "empty_turn"]
# What the simulator reads when the agent sent nothing (e.g. a policy that only "thought").
NO_REPLY = "(no reply)"


class UserState(BaseModel):
    """Everything the simulator knows about one episode (serialisable; one JSON line per episode).

    Attributes:
        scenario: The hidden goal and behaviour directives.
        system_prompt: Rendered once by ``init_state``.
        history: The chat as in real data: ``user`` = simulator utterances (what the agent saw),
            ``assistant`` = agent messages.
        private: Reasoning of the k-th user turn (``private[k]``); never shown to the agent.
        turn_flags: Parser and guard flags of the k-th user turn.
        goal_overlap: :func:`~mimesis.simulator.guards.goal_overlap` of the k-th user turn.
        turns: Number of user turns sent.
        ended / end_reason / end_reasoning: Whether, why and (when generated) the private
            reasoning of the last generated turn.
        flags: Every flag raised in the episode, first occurrence order, including flags of
            turns that were resampled (``resampled:<reason>``: the guard or rule-0 flags of
            the redrawn draw, not its parser flags; the draw itself is in ``raw``) or not sent
            (``restart``).
        raw: Every raw generation, resamples included (for audits of leaks).
        pleasantry_streak: Content-free user turns in a row so far.
    """

    scenario: Scenario
    system_prompt: str
    history: list[Turn] = Field(default_factory=list)
    private: list[str] = Field(default_factory=list)
    turn_flags: list[list[str]] = Field(default_factory=list)
    goal_overlap: list[float] = Field(default_factory=list)
    turns: int = 0
    ended: bool = False
    end_reason: EndReason | None = None
    end_reasoning: str = ""
    flags: list[str] = Field(default_factory=list)
    raw: list[str] = Field(default_factory=list)
    pleasantry_streak: int = 0

    def user_utterances(self) -> list[str]:
        """The user turns the agent has seen, in order."""
        return [t.text for t in self.history if t.role == "user"]


def build_view(state: UserState) -> Messages:
    """The simulator's chat messages for its next turn (the one place this view is built).

    Returns ``[system, assistant(<think>private[0]</think>\\nuser turn 0), user(agent reply 0),
    …]`` — exactly :func:`~mimesis.simulator.roles.flip_roles` of the episode so far (no end
    turn), with ``state.system_prompt`` as the system message.
    """
    user_idx = [i for i, t in enumerate(state.history) if t.role == "user"]
    labels = [TurnLabel(turn_index=i, reasoning=r, reasoning_annotator="simulator")
              for i, r in zip(user_idx, state.private, strict=True)]
    conv = LabeledConversation(id="simulator-view", turns=state.history, scenario=state.scenario,
                               labels=labels, end_reasoning="", end_reasoning_annotator="none",
                               ended=False)
    messages = flip_roles(conv)
    messages[0] = {"role": "system", "content": state.system_prompt}
    return messages


@dataclass
class _Verdict:
    """What to do with one generated turn."""

    parsed: ParsedTurn
    flags: list[str]
    action: Literal["send", "end", "resample"]
    reason: EndReason | None = None
    overlap: float = 0.0
    earlier: list[str] = field(default_factory=list)
    rules: list[str] = field(default_factory=list)  # the rules that ask for a redraw

    @property
    def reasons(self) -> list[str]:
        """The runtime's own flags of this draw (its guards and rule 0), after the parser's:
        why it was redrawn. The parser's flags say how the text was written (``think_tagged``
        is every well-formed turn), so counted as reasons they would swamp the real ones."""
        return self.flags[len(self.parsed.flags):]


class UserSimulator:
    """A user simulator (trained or prompted) behind the participant protocol.

    Args:
        generate_fn: ``generate_fn(batch) -> texts``: one raw continuation (assistant role) per
            message list, in order; e.g. ``ChatGenerator.generate`` or an OpenAI-compatible
            client wrapper.
        max_turns: Most user turns per episode (≥ 1).
        system_prompt_fn: Scenario → system prompt; the prompted baseline passes
            :func:`mimesis.simulator.baseline.render_prompted_system_prompt`.
        guards: Guard settings (defaults: :class:`GuardParams`).

    Raises:
        ValueError: ``max_turns`` < 1.
    """

    def __init__(self, generate_fn: GenerateFn, max_turns: int = 16,
                 system_prompt_fn: Callable[[Scenario], str] = render_system_prompt,
                 guards: GuardParams | None = None) -> None:
        if max_turns < 1:
            raise ValueError(f"max_turns must be ≥ 1, got {max_turns}")
        self.generate_fn = generate_fn
        self.max_turns = max_turns
        self.system_prompt_fn = system_prompt_fn
        self.guards = guards or GuardParams()

    def init_state(self, scenario: Scenario) -> UserState:
        """A fresh episode for ``scenario`` (no model call)."""
        return UserState(scenario=scenario, system_prompt=self.system_prompt_fn(scenario))

    def next_message(self, agent_message: str | None,
                     state: UserState) -> tuple[str, UserState]:
        """The user's reply to ``agent_message`` (``None`` for the opening turn).

        Returns:
            ``(user_message, new_state)``; ``user_message`` is ``""`` when ``new_state.ended``.
            ``state`` itself is not modified.

        Raises:
            ValueError: ``None`` after the episode started, two agent messages in a row, or a
                ``generate_fn`` that returns the wrong number of texts.
        """
        return self.next_messages([(agent_message, state)])[0]

    def next_messages(self, pairs: Sequence[tuple[str | None, UserState]]
                      ) -> list[tuple[str, UserState]]:
        """Batched :meth:`next_message`: one ``generate_fn`` call for every episode waiting.

        Ended episodes cost nothing. A second call, over the resampled turns only, happens when
        a guard asks for a resample.
        """
        states = [self._receive(message, state) for message, state in pairs]
        replies = [""] * len(states)
        todo = [i for i, s in enumerate(states) if not s.ended]
        earlier: dict[int, list[str]] = {}
        used: dict[int, list[str]] = {i: [] for i in todo}  # rules that redrew each turn
        while todo:  # finite: each rule redraws a turn once, an end end_draws - 1 times
            retry = []
            for i, verdict in zip(todo, self._generate([states[i] for i in todo],
                                                       [used[i] for i in todo]), strict=True):
                if verdict.action == "resample":
                    earlier[i] = earlier.get(i, []) + [f"resampled:{f}" for f in verdict.reasons]
                    used[i] += verdict.rules
                    retry.append(i)
                else:
                    verdict.earlier = earlier.get(i, [])
                    replies[i] = self._commit(states[i], verdict)
            todo = retry
        return list(zip(replies, states, strict=True))

    def _receive(self, agent_message: str | None, state: UserState) -> UserState:
        """Copy ``state``, add the agent's message, end it when the turn budget is spent."""
        state = state.model_copy(deep=True)
        if state.ended:
            return state
        if agent_message is None:
            if state.history:
                raise ValueError("agent_message is None but the conversation has started")
        elif state.history and state.history[-1].role == "assistant":
            raise ValueError("two agent messages in a row: the user has not answered the first")
        else:
            text = agent_message if agent_message.strip() else NO_REPLY
            state.history.append(Turn(role="assistant", text=text))
        if state.turns >= self.max_turns:
            state.ended, state.end_reason = True, "max_turns"
        return state

    def _generate(self, states: list[UserState], used: list[list[str]]) -> list[_Verdict]:
        if not states:
            return []
        texts = self.generate_fn([build_view(s) for s in states])
        if len(texts) != len(states):
            raise ValueError(f"generate_fn returned {len(texts)} texts for {len(states)} chats")
        for state, text in zip(states, texts, strict=True):
            state.raw.append(text)
        return [self._assess(s, t, u) for s, t, u in zip(states, texts, used, strict=True)]

    def _assess(self, state: UserState, raw: str, used: Sequence[str] = ()) -> _Verdict:
        """Apply the episode rules of the module docstring to one generated turn; ``used``:
        the rules that already redrew this turn (each redraws it once, an end
        ``end_draws - 1`` times)."""
        g, parsed = self.guards, parse_turn(raw)
        flags = list(parsed.flags)
        public = "\n".join(t.text for t in state.history if t.role == "assistant")
        kept, cut = strip_directive_copies(parsed.utterance, state.scenario.directives,
                                           g.directive_min_words, public)
        if cut:  # the cut text stays in state.raw for audits; the agent never gets it
            parsed = replace(parsed, utterance=kept)
            flags.append("directive_copy")
        told = "\n".join(t.text for t in state.history)
        if hidden_facts_said(parsed.utterance, state.scenario, told):
            # the simulator reading out its scenario: private, never sent (rule 0)
            parsed = replace(parsed, utterance="",
                             reasoning="\n".join(x for x in (parsed.reasoning, parsed.utterance) if x))
            flags.append("hidden_fact")
        text = parsed.utterance
        if parsed.ended and not text:
            if used.count("end") < g.end_draws - 1 and (state.turns > 0 or g.resample_open_end):
                return _Verdict(parsed, flags + ["end_confirm" if state.turns else "open_end"],
                                "resample", rules=["end"])
            return _Verdict(parsed, flags, "end", "end_signal")
        if parsed.ended:
            flags.append("end_deferred")
        if repeats_earlier(text, state.user_utterances(), g.repeat_threshold, g.repeat_min_words):
            if "restart" not in used and g.resample_restart:
                return _Verdict(parsed, flags + ["restart"], "resample", rules=["restart"])
            return _Verdict(parsed, flags + ["restart"], "end",
                            "end_signal" if parsed.ended else "restart")
        overlap = goal_overlap(state.scenario.goal, text)
        opening = bool(text) and state.turns == 0
        # off_topic only where the user speaks first: a first reply to an agent's question
        # ("downtown.", "$200") may rightly share no word with the goal
        problems = {"empty_utterance": not text,
                    "role_flip": bool(text) and is_assistant_like(text),
                    "goal_dump": opening and overlap >= g.goal_dump_threshold,
                    "off_topic": opening and not state.history and overlap == 0.0
                    and bool(content_words(state.scenario.goal)),
                    "junk": bool(text) and is_junk(text)}
        allowed = {"empty_utterance": g.resample_empty, "role_flip": g.resample_role_flip,
                   "goal_dump": g.resample_goal_dump, "off_topic": g.resample_off_topic,
                   "junk": g.resample_junk}
        found = [name for name, hit in problems.items() if hit]
        flags += found
        redraw = [name for name in found if allowed[name] and name not in used]
        if redraw:
            return _Verdict(parsed, flags, "resample", overlap=overlap, rules=redraw)
        if not text:
            return _Verdict(parsed, flags, "end", "empty_turn")
        if is_pleasantry(text) and state.pleasantry_streak + 1 >= g.pleasantries_limit:
            return _Verdict(parsed, flags + ["pleasantries_loop"], "end",
                            "end_signal" if parsed.ended else "pleasantries_loop")
        return _Verdict(parsed, flags, "send", overlap=overlap)

    @staticmethod
    def _commit(state: UserState, verdict: _Verdict) -> str:
        """Record the verdict in ``state``; return what the agent receives."""
        for flag in verdict.earlier + verdict.flags:
            if flag not in state.flags:
                state.flags.append(flag)
        if verdict.action == "end":
            state.ended, state.end_reason = True, verdict.reason
            state.end_reasoning = verdict.parsed.reasoning
            return ""
        text = verdict.parsed.utterance
        state.history.append(Turn(role="user", text=text))
        state.private.append(verdict.parsed.reasoning)
        state.turn_flags.append(verdict.earlier + verdict.flags)
        state.goal_overlap.append(verdict.overlap)
        state.turns += 1
        state.pleasantry_streak = state.pleasantry_streak + 1 if is_pleasantry(text) else 0
        return text
