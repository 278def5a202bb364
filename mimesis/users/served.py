"""The frozen simulator as a service during agent training: ``mimesis serve`` episodes.

An arm with ``user: served`` (:mod:`mimesis.users.factory`) plays its user through
``mimesis serve`` (``--backend vllm`` on its own GPU(s) in the ``gpu`` profile's layout;
docs/serving_and_scaling.md "Multi-GPU agent RL"), over its OpenAI-compatible *episode* endpoints:

* every training episode is a server episode (``POST {base_url}/ep/<id>/v1/chat/completions``,
  the agent's view plus ``scenario``): the server keeps the simulator state, applies the
  simulator's parser and guards, and answers with the reasoning-free utterance or the end signal;
* after each turn ``GET {base_url}/ep/<id>/private`` returns the episode's private reasoning,
  which lands on the local state exactly where the frozen in-process simulator puts it
  (``UserState.private`` → ``TurnRecord.user_reasoning``), so the CSD coach reads the same
  private channel either way; ``DELETE`` frees the server episode when it ends.

The server is authoritative: the local :class:`ServedUserSimulator` only adds the agent's
message, keeps the turn budget, and copies the server's turn, reasoning, flags and end reason.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from mimesis.schemas import Turn
from mimesis.simulator.runtime import UserSimulator, UserState


class ServedUserError(RuntimeError):
    """The simulator server refused a request or answered something unusable."""


class ServedState(UserState):
    """:class:`UserState` plus the id of its server episode."""

    episode_id: str = ""


class ServedUserSimulator(UserSimulator):
    """A :class:`UserSimulator` whose turns come from ``mimesis serve`` episodes.

    Args:
        base_url: The server root (``http://host:port``; a trailing ``/v1`` is dropped).
        model: The model id sent with each request (the server's ``model_name``).
        max_turns: Most user turns per episode (the local budget, as the frozen user's).
        temperature / top_p / max_new_tokens: The user's sampling (params ``user``).
        api_key_env / private_key_env: Environment variables holding the agent-endpoint key
            and the ``/private`` key (unset or ``""``: no header; a loopback server needs none).
        concurrency / timeout_s: Requests in flight, seconds per request.
        client: An ``httpx.Client``-like object (tests); default built here.
    """

    def __init__(self, base_url: str, model: str, max_turns: int = 16, temperature: float = 0.8,
                 top_p: float = 0.95, max_new_tokens: int = 48, api_key_env: str = "",
                 private_key_env: str = "", concurrency: int = 8, timeout_s: float = 60.0,
                 client=None) -> None:
        super().__init__(self._no_generate, max_turns=max_turns)
        import httpx

        self.base_url = base_url.rstrip("/").removesuffix("/v1")
        self.model, self.concurrency = model, concurrency
        self.sampling = {"temperature": temperature, "top_p": top_p, "max_tokens": max_new_tokens}
        self.agent_headers = _auth(api_key_env)
        self.private_headers = _auth(private_key_env)
        self.client = client or httpx.Client(base_url=self.base_url, timeout=timeout_s)

    @staticmethod
    def _no_generate(batch):
        raise ServedUserError("a served user generates on the server, not through generate_fn")

    def init_state(self, scenario) -> ServedState:
        """A fresh episode with a new server episode id (no request yet)."""
        return ServedState(scenario=scenario, system_prompt="", episode_id=uuid.uuid4().hex)

    def next_messages(self, pairs: Sequence[tuple[str | None, UserState]]
                      ) -> list[tuple[str, UserState]]:
        """One request (+ one ``/private`` read) per episode still going, concurrently."""
        states = [self._receive(message, state) for message, state in pairs]
        waiting = [s for s in states if not s.ended]
        if waiting:
            with ThreadPoolExecutor(min(self.concurrency, len(waiting))) as pool:
                list(pool.map(self._turn, waiting))
        return [("" if s.ended else s.history[-1].text, s) for s in states]

    def _turn(self, state: UserState) -> None:
        """Ask the server for the next user turn of ``state``'s episode; update ``state``."""
        messages = [{"role": t.role, "content": t.text} for t in state.history]
        scenario = state.scenario
        body = {"model": self.model, "messages": messages, **self.sampling,
                "scenario": {"goal": scenario.goal, "behaviors": scenario.behaviors,
                             "traits": scenario.traits}}
        path = f"/ep/{state.episode_id}"
        reply = self._request("POST", f"{path}/v1/chat/completions", self.agent_headers, body)
        private = self._request("GET", f"{path}/private", self.private_headers)
        info = reply.get("mimesis") or {}
        state.raw = list(private.get("raw", []))
        state.flags = list(private.get("flags", []))
        if info.get("ended") or private.get("ended"):
            state.ended, state.end_reason = True, private.get("end_reason") or "end_signal"
            state.end_reasoning = private.get("end_reasoning", "")
            self._request("DELETE", path, self.agent_headers)
            return
        turn = private["turns"][-1]
        state.history.append(Turn(role="user", text=reply["choices"][0]["message"]["content"]))
        state.private.append(turn.get("reasoning", ""))
        state.turn_flags.append(list(turn.get("flags", [])))
        state.turns += 1

    def _request(self, method: str, path: str, headers: dict[str, str],
                 body: dict[str, Any] | None = None) -> dict[str, Any]:
        response = self.client.request(method, path, headers=headers, json=body)
        if response.status_code >= 400:
            raise ServedUserError(f"{method} {self.base_url}{path}: {response.status_code} "
                                  f"{response.text[:300]}")
        return response.json()


def _auth(env: str) -> dict[str, str]:
    key = os.environ.get(env, "") if env else ""
    return {"Authorization": f"Bearer {key}"} if key else {}
