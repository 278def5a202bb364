"""Read an agent-side chat request as the simulator's history plus the agent's new message.

The client sends its own conversation: ``assistant`` = the agent, ``user`` = the simulated user's
earlier turns. That is already the convention of :class:`~mimesis.simulator.runtime.UserState`
(``Turn.role`` as in real data); the flip into the simulator's view happens in one place only,
:func:`~mimesis.simulator.runtime.build_view`. Here:

* ``system``/``developer`` messages (the agent's instructions) and ``tool``/``function`` messages
  (tool results) are dropped: a real user sees neither; so are assistant messages that only
  carry ``tool_calls``;
* consecutive messages of one side are joined with a blank line (an agent may answer in parts);
* a user turn with no text (a logged turn that held only an image or an attachment) is an empty
  turn of the history, :data:`NO_MESSAGE`: the simulated user said nothing that turn;
* the agent messages after the last user message are the agent's new turn; none at all (no user
  message either) asks for the opening user turn.

A simulator-side request (``view: simulator``: scenario as the system message, ``assistant`` =
the simulated user, ``user`` = the agent) is flipped back into the agent's side by
:func:`read_simulator_request` and then read by the same :func:`read_request`, so both views
give the same :class:`AgentView`.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass

from mimesis.schemas import Scenario, Turn
from mimesis.serve.schemas import APIError, ChatMessage
from mimesis.simulator.guards import is_pleasantry
from mimesis.simulator.runtime import NO_REPLY, UserState

_HIDDEN_ROLES = {"system", "developer", "tool", "function"}
_FLIP = {"user": "assistant", "assistant": "user"}
_SCENARIO_BLOCK = re.compile(r"<scenario>(.*?)</scenario>", re.DOTALL)
NO_MESSAGE = "(no message)"
"""What the simulator reads for a user turn without text (the user's counterpart of
:data:`~mimesis.simulator.runtime.NO_REPLY`)."""
# Simulator-view wording of read_request's errors (its own speak of the agent's side).
_SIM_ERRORS = {
    "agent_message_missing": "the conversation ends with an assistant message (the simulated "
    "user's): append the agent's reply as a user message to get the next turn",
}


@dataclass(frozen=True)
class AgentView:
    """A request, read.

    Attributes:
        history: The conversation before the agent's new message (``user`` = simulated user,
            ``assistant`` = agent), adjacent same-side messages joined.
        agent_message: The agent's new message; ``None`` asks for the opening user turn.
    """

    history: list[Turn]
    agent_message: str | None

    def user_turns(self) -> int:
        return sum(t.role == "user" for t in self.history)

    def fingerprint(self) -> str:
        """sha256 of the visible conversation (detects a retried request)."""
        turns = [[t.role, _norm(t.role, t.text)] for t in self.history]
        payload = json.dumps([turns, self.agent_message], ensure_ascii=False)
        return hashlib.sha256(payload.encode()).hexdigest()


def message_text(message: ChatMessage, index: int) -> str:
    """Text of ``message``: a string, or its ``text`` parts joined.

    Raises:
        APIError: 400 for a non-text content part (``unsupported_content``) or a text part
            without its text (``invalid_value``), naming the message and the part.
    """
    if message.content is None or isinstance(message.content, str):
        return message.content or ""
    texts = []
    for j, part in enumerate(message.content):
        where = f"messages.{index}.content.{j}"
        if part.type != "text":
            raise APIError(400, f"{where}: a {part.type!r} part; this server reads text only "
                           "(send the message's text as a string, or as "
                           "{\"type\": \"text\", \"text\": ...} parts)", param=where,
                           code="unsupported_content")
        if part.text is None:
            raise APIError(400, f"{where}: a text part without its \"text\" string",
                           param=where, code="invalid_value")
        texts.append(part.text)
    return "\n".join(texts)


def read_request(messages: list[ChatMessage]) -> AgentView:
    """The :class:`AgentView` of a request's ``messages``.

    A ``user`` turn without text is kept as :data:`NO_MESSAGE` (an empty turn).

    Raises:
        APIError: 400 when the conversation ends with a ``user`` message (there is no agent turn
            to answer).
    """
    turns: list[tuple[str, str]] = []
    for i, message in enumerate(messages):
        if message.role in _HIDDEN_ROLES:
            continue
        text = message_text(message, i)
        if message.role == "assistant" and not text.strip() and (message.model_extra or {}).get(
                "tool_calls"):
            continue
        if turns and turns[-1][0] == message.role:
            turns[-1] = (message.role, f"{turns[-1][1]}\n\n{text}".strip())
        else:
            turns.append((message.role, text))
    if turns and turns[-1][0] == "user":
        raise APIError(400, "the conversation ends with a user message: append the agent's "
                       "reply (an assistant message) to get the user's next turn",
                       param="messages", code="agent_message_missing")
    agent_message = turns.pop()[1] if turns else None
    history = [Turn(role=role, text=_norm(role, text))  # type: ignore[arg-type]
               for role, text in turns]
    return AgentView(history=history, agent_message=agent_message)


def read_simulator_request(messages: list[ChatMessage], max_goal_chars: int
                           ) -> tuple[AgentView, str | None]:
    """The :class:`AgentView` of a simulator-side request, and its scenario text.

    Returns:
        ``(view, goal)``: ``view`` as :func:`read_request` reads the flipped messages (the
        simulator's ``assistant`` turns become ``user`` turns and vice versa; tool calls and tool
        results dropped), ``goal`` the ``system``/``developer`` text (inside ``<scenario>…
        </scenario>`` when present), ``None`` without one.

    Raises:
        APIError: 400 as :func:`read_request`, or a scenario over ``max_goal_chars`` characters
            (``scenario_too_long``; ``ServeConfig.max_scenario_chars``).
    """
    system = "\n\n".join(message_text(m, i) for i, m in enumerate(messages)
                          if m.role in ("system", "developer")).strip()
    block = _SCENARIO_BLOCK.search(system)
    goal = (block.group(1) if block else system).strip()
    if len(goal) > max_goal_chars:
        where = next(i for i, m in enumerate(messages) if m.role in ("system", "developer"))
        raise APIError(400, f"messages.{where}.content: the scenario (system message) has "
                       f"{len(goal)} characters, over this server's limit of {max_goal_chars} "
                       "(mimesis serve --max-scenario-chars)", param=f"messages.{where}.content",
                       code="scenario_too_long")
    flipped = [m.model_copy(update={"role": "tool" if _only_tool_calls(m, i)
                                    else _FLIP.get(m.role, m.role)})
               for i, m in enumerate(messages)]
    try:
        view = read_request(flipped)
    except APIError as err:
        if err.body.error.code not in _SIM_ERRORS:
            raise
        detail = err.body.error
        raise APIError(err.status, _SIM_ERRORS[detail.code], param=detail.param,
                       code=detail.code) from err
    return view, goal or None


def _only_tool_calls(message: ChatMessage, index: int) -> bool:
    """A simulated user's tool call without text (tau2 user tools): not part of the chat."""
    return (message.role == "assistant" and not message_text(message, index).strip()
            and bool((message.model_extra or {}).get("tool_calls")))


def check_continues(state: UserState, view: AgentView, episode_id: str) -> None:
    """Require the request to replay the episode so far (then add one agent message).

    Raises:
        APIError: 409 (``history_mismatch``) when the request's history is not the episode's
            (wrong episode id, edited history, a stale retry, an opening call on a started
            episode).
    """
    expected = [(t.role, _norm(t.role, t.text)) for t in state.history]
    got = [(t.role, t.text) for t in view.history]
    if got != expected:
        where = next((k for k, (a, b) in enumerate(zip(got, expected)) if a != b),
                     min(len(got), len(expected)))
        raise APIError(409, f"messages do not continue episode {episode_id!r}: the visible "
                       f"conversation differs from the episode's at turn {where} (request has "
                       f"{len(got)} turns before the agent's new message, episode has "
                       f"{len(expected)})", param="messages", code="history_mismatch")


def stateless_state(state: UserState, view: AgentView) -> UserState:
    """Fill a fresh ``state`` (from ``init_state``) with a request's history, for stateless calls.

    The earlier user turns have no recorded reasoning (empty); the turn count, pleasantry streak
    follow from the history (the runtime ends the episode when the turn budget is spent).
    """
    n_user = view.user_turns()
    state.history = list(view.history)
    state.private = [""] * n_user
    state.turn_flags = [[] for _ in range(n_user)]
    state.goal_overlap = [0.0] * n_user
    state.turns = n_user
    streak = 0
    for text in reversed(state.user_utterances()):
        if not is_pleasantry(text):
            break
        streak += 1
    state.pleasantry_streak = streak
    return state


def scenario_equal(a: Scenario, b: Scenario) -> bool:
    """Same goal, behaviours and traits (the annotator does not matter)."""
    return (a.goal.strip(), sorted(a.behaviors), sorted(a.traits)) == (
        b.goal.strip(), sorted(b.behaviors), sorted(b.traits))


def _norm(role: str, text: str) -> str:
    """Comparable text: stripped; a blank agent message is what the runtime records, a blank
    user message the empty turn :data:`NO_MESSAGE`."""
    text = text.strip()
    return text or (NO_MESSAGE if role == "user" else NO_REPLY)
