"""The frozen simulator as the simulated user of MLflow's conversation simulator.

MLflow (>= 3.10, ``mlflow.genai.simulators``) tests an agent by playing goal/persona test cases
against it: a ``ConversationSimulator`` alternates a simulated user's message and the agent's
``predict_fn``, traces every agent turn (one session per conversation) and stops when an LLM
judge says the goal was achieved. Its stock user is an assistant model told to play a user;
here the user is the frozen simulator behind ``mimesis serve``:

- :class:`MimesisSimulatedUser` (a ``BaseSimulatedUserAgent``): one server-side episode per
  conversation (``/ep/<id>/v1``, the agent's view: MLflow's history is already in it, ``user`` =
  the simulated user, ``assistant`` = the agent); the test case's goal (with its persona and
  guidelines, when given) is the scenario goal of the episode's first call;
- :class:`MimesisConversationSimulator`: a ``ConversationSimulator`` whose stopping rule is the
  simulated user's own: the conversation ends when our simulator ends it (its end signal, or a
  guard: turn budget, restart, pleasantries loop, empty turn), as real users end conversations,
  instead of a judge's reading of the goal. No LLM but the served simulator is called.

The private reasoning stays on the server (``GET /ep/<id>/private`` for audits): MLflow gets the
utterances only. Example (a running ``mimesis serve``; any value for the key of a loopback
server without ``--api-key``)::

    import os
    from mimesis.integrations.mlflow_simulator import MimesisConversationSimulator

    os.environ.setdefault("MIMESIS_API_KEY", "unused")
    simulator = MimesisConversationSimulator(
        [{"goal": "find a cheap hotel in Lisbon for two nights in May"},
         {"goal": "get a refund for a late delivery", "persona": "a busy nurse, terse"}],
        max_turns=6, base_url="http://127.0.0.1:8000")
    traces = simulator.simulate(my_predict_fn)   # my_predict_fn(messages, **kwargs) -> reply

How the hook works: MLflow calls the user, then ``predict_fn``, then its goal check, in one
worker thread per conversation. The goal check here asks the conversation's user (kept in a
thread-local) for its next turn: an ended episode stops the conversation; otherwise the turn is
kept and is the user's next message.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

from mlflow.genai.simulators import (
    BaseSimulatedUserAgent,
    ConversationSimulator,
    SimulatorContext,
)
from mlflow.genai.simulators.prompts import DEFAULT_PERSONA

SERVED_MODEL = "mimesis-user-simulator"
_CURRENT = threading.local()  # the user of the conversation this worker thread plays


class MimesisSimulatedUser(BaseSimulatedUserAgent):
    """A simulated user backed by ``mimesis serve`` (one episode per instance: MLflow makes one
    per conversation).

    Args:
        model: Model id sent to the server (it serves one simulator whatever the id).
        base_url: ``mimesis serve`` base URL, without ``/v1``.
        api_key_env: Environment variable holding the server's key (any value for a loopback
            server without ``--api-key``).
        timeout_s: Per-request timeout, seconds.
        max_tokens: New tokens per raw generation (reasoning + utterance).
        temperature / top_p / seed: The simulator's sampling.

    Raises:
        mimesis.openai_chat.ChatAPIError: ``api_key_env`` is unset, or the server failed.
        RuntimeError: the server refused a turn (its 4xx message is included).
    """

    def __init__(self, model: str | None = None, *, base_url: str = "http://127.0.0.1:8000",
                 api_key_env: str = "MIMESIS_API_KEY", timeout_s: float = 120.0,
                 max_tokens: int = 96, temperature: float = 1.0, top_p: float = 1.0,
                 seed: int | None = None) -> None:
        super().__init__(model=model or SERVED_MODEL)
        from mimesis.openai_chat import ChatClient

        self.episode_id = f"mlflow-{uuid.uuid4().hex}"
        self.base_url = base_url.rstrip("/")
        self.sampling = {"max_tokens": max_tokens, "temperature": temperature, "top_p": top_p,
                         "seed": seed}
        self.client = ChatClient(self.model, f"{self.base_url}/ep/{self.episode_id}/v1",
                                 api_key_env, timeout_s=timeout_s, label="mimesis user",
                                 key_hint=" (any value for a loopback server without --api-key)")
        self.ended = False
        self.end_reason: str | None = None
        self._next: tuple[int, str] | None = None  # (history length, turn) from the goal check

    def generate_message(self, context: SimulatorContext) -> str:
        """The user's next message for MLflow's ``context`` (the one the goal check already
        drew, when it drew it for this history)."""
        _CURRENT.user = self
        history = context.conversation_history
        if self._next is not None and self._next[0] == len(history):
            return self._next[1]
        return self.next_turn(history, scenario_goal(context))

    def next_turn(self, history: list[dict[str, Any]], goal: str | None = None) -> str:
        """Ask the server for the user's turn after ``history`` (agent's view); sets
        :attr:`ended` / :attr:`end_reason` when the simulator ends the episode.

        Args:
            history: ``[{"role": "user" | "assistant", "content"}]`` so far.
            goal: The scenario goal (sent on the episode's first call only).
        """
        from mimesis.serve.schemas import END_CONTENT, END_FINISH_REASON

        chat = [{"role": m["role"], "content": str(m.get("content") or "")} for m in history
                if m.get("role") in ("user", "assistant")]
        extra = {"scenario": {"goal": goal}} if goal and not chat else None
        reply = self.client.complete(chat, extra_body=extra, **self.sampling)
        if reply.rejected:
            raise RuntimeError(f"mimesis serve refused the turn: {reply.rejected}")
        if reply.finish_reason == END_FINISH_REASON or reply.text == END_CONTENT:
            self.ended, self.end_reason = True, "end_conversation"
            return ""
        return reply.text

    def check_ended(self, history: list[dict[str, Any]]) -> bool:
        """Draw the user's reply to ``history`` (which ends with the agent's message) and keep
        it for :meth:`generate_message`; True when the user ended the conversation instead."""
        text = self.next_turn(history)
        self._next = (len(history), text)
        return self.ended


def scenario_goal(context: SimulatorContext) -> str:
    """The scenario goal of a test case: its goal, then its persona (unless MLflow's default)
    and its simulation guidelines."""
    parts = [context.goal.strip()]
    if context.persona and context.persona != DEFAULT_PERSONA:
        parts.append(f"Who you are: {context.persona.strip()}")
    guidelines = context.simulation_guidelines
    if guidelines:
        lines = guidelines if isinstance(guidelines, list) else [guidelines]
        parts.append("How you go about it: " + " ".join(str(g).strip() for g in lines))
    return "\n".join(parts)


class MimesisConversationSimulator(ConversationSimulator):
    """MLflow's ``ConversationSimulator`` with :class:`MimesisSimulatedUser` as the user and
    the user's own end of conversation as the stopping rule.

    Args:
        test_cases: As MLflow's (``goal`` required; ``persona``, ``simulation_guidelines``,
            ``context``, ``expectations`` optional).
        max_turns: Most user turns per conversation (the simulator may end sooner).
        user_agent_class: A :class:`MimesisSimulatedUser` subclass (tests, custom transport).
        **user_params: :class:`MimesisSimulatedUser` arguments (``base_url``, ``api_key_env``,
            sampling).
    """

    def __init__(self, test_cases: Any, max_turns: int = 10, *,
                 user_agent_class: type[MimesisSimulatedUser] = MimesisSimulatedUser,
                 **user_params: Any) -> None:
        if not issubclass(user_agent_class, MimesisSimulatedUser):
            raise TypeError("user_agent_class must subclass MimesisSimulatedUser")
        super().__init__(test_cases, max_turns=max_turns, user_model=SERVED_MODEL,
                         user_agent_class=user_agent_class, **user_params)

    def _check_goal_achieved(self, conversation_history: list[dict[str, Any]],
                             last_response: str, goal: str) -> bool:
        # MLflow's hook after each agent turn: here the simulated user decides, not a judge.
        user = getattr(_CURRENT, "user", None)
        if user is None:
            raise RuntimeError("no MimesisSimulatedUser has spoken in this thread")
        return user.check_ended(conversation_history)
