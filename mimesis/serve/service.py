"""What the endpoints do: resolve the scenario, check the request against the episode, call the
batched simulator, and shape the OpenAI response (content without reasoning, end signal).

End of conversation: when the simulator ends the episode (its end signal, or a guard: turn
budget, restart, pleasantries loop, empty turn), the response has ``finish_reason``
:data:`~mimesis.serve.schemas.END_FINISH_REASON` and content
:data:`~mimesis.serve.schemas.END_CONTENT`; every later call on the episode returns the same.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping

from mimesis.schemas import Scenario
from mimesis.serve.backends import Sampling
from mimesis.serve.batching import BatchingSimulator, GenerationError, TurnResult
from mimesis.serve.config import ServeConfig
from mimesis.serve.episodes import EPISODE_ID, EpisodeStore, state_bytes
from mimesis.serve.fitting import PromptTooLongError
from mimesis.serve.limits import check_request
from mimesis.serve.messages import (
    AgentView,
    check_continues,
    read_request,
    read_simulator_request,
    scenario_equal,
    stateless_state,
)
from mimesis.serve.schemas import (
    END_CONTENT,
    END_FINISH_REASON,
    STOP_FINISH_REASON,
    APIError,
    ChatCompletion,
    ChatCompletionRequest,
    Choice,
    EpisodeInfo,
    PrivateTurn,
    PrivateView,
    PromptFit,
    ResponseMessage,
    Usage,
    View,
)
from mimesis.simulator.runtime import UserState


class SimulatorService:
    """The server's logic, independent of HTTP (FastAPI routes are one-liners over it).

    Args:
        simulator: The batched simulator (started by the app's lifespan).
        config: Limits and defaults.
        scenarios: Scenarios selectable by ``scenario_id`` (e.g. the label test split).
    """

    def __init__(self, simulator: BatchingSimulator, config: ServeConfig,
                 scenarios: Mapping[str, Scenario] | None = None) -> None:
        self.simulator = simulator
        self.config = config
        self.scenarios = dict(scenarios or {})
        self.store = EpisodeStore(config.episode_ttl_s, config.max_episodes,
                                  max_total_bytes=config.max_total_bytes)

    def sampling(self, body: ChatCompletionRequest) -> Sampling:
        """Sampling settings of a request (its limits checked by :func:`check_request`)."""
        cfg = self.config
        max_tokens = body.max_completion_tokens or body.max_tokens or cfg.default_max_tokens
        return Sampling(max_tokens=max_tokens,
                        temperature=cfg.temperature if body.temperature is None
                        else body.temperature,
                        top_p=cfg.top_p if body.top_p is None else body.top_p, seed=body.seed)

    def scenario(self, body: ChatCompletionRequest) -> Scenario | None:
        """The scenario a request names (``scenario``, ``scenario_id``, else the server default).

        Raises:
            APIError: 400 for both fields at once or an unknown ``scenario_id``.
        """
        if body.scenario is not None and body.scenario_id is not None:
            raise APIError(400, "send scenario or scenario_id, not both", param="scenario_id",
                           code="conflicting_parameters")
        if body.scenario is not None:
            return body.scenario.to_scenario()
        if body.scenario_id is not None:
            if body.scenario_id not in self.scenarios:
                raise APIError(400, f"unknown scenario_id {body.scenario_id!r} ("
                               f"{len(self.scenarios)} scenarios loaded)", param="scenario_id",
                               code="unknown_scenario")
            return self.scenarios[body.scenario_id]
        if self.config.default_goal:
            return Scenario(goal=self.config.default_goal, annotator="server")
        return None

    def read(self, body: ChatCompletionRequest, path_view: View | None = None
             ) -> tuple[AgentView, Scenario | None, bool]:
        """A request in either view (:data:`~mimesis.serve.schemas.View`), read.

        Args:
            body: The request.
            path_view: ``simulator`` for the ``/sim`` routes, else ``None``.

        Returns:
            ``(view, scenario, named)``: the agent-side :class:`AgentView`, the scenario (the
            request's, else the server default; ``None`` without either) and whether the
            request named it (a field or, in the simulator view, the system message).

        Raises:
            APIError: 400 for a ``view`` field that contradicts the path, a system-message
                scenario sent with ``scenario``/``scenario_id``, or a bad request.
        """
        if path_view and body.view and body.view != path_view:
            raise APIError(400, f"view={body.view!r} on a /sim route (the simulator view)",
                           param="view", code="conflicting_parameters")
        named = body.scenario is not None or body.scenario_id is not None
        if (body.view or path_view or "agent") == "agent":
            return read_request(body.messages), self.scenario(body), named
        view, goal = read_simulator_request(body.messages, self.config.max_scenario_chars)
        if goal is None:
            return view, self.scenario(body), named
        if named:
            raise APIError(400, "the simulator view takes the scenario from the system message: "
                           "send it there or in scenario/scenario_id, not both",
                           param="scenario", code="conflicting_parameters")
        return view, Scenario(goal=goal, annotator="client"), True

    @staticmethod
    def _required(scenario: Scenario | None) -> Scenario:
        if scenario is None:
            raise APIError(400, "no scenario: send extra_body={'scenario': {'goal': ...}} or "
                           "{'scenario_id': ...} (or, in the simulator view, a system message; "
                           "the server has no default goal)", param="scenario",
                           code="scenario_required")
        return scenario

    async def stateless(self, body: ChatCompletionRequest, path_view: View | None = None) -> dict:
        """``POST /v1/chat/completions`` (``/sim/v1/…``: simulator view): the next user turn
        from the request alone (earlier reasoning unknown; nothing kept).

        Raises:
            APIError: 400 a limit exceeded (:func:`check_request`) or a bad request.
        """
        check_request(body, self.config)
        sampling = self.sampling(body)
        view, scenario, _ = self.read(body, path_view)
        state = stateless_state(self.simulator.init_state(self._required(scenario)), view)
        result = await self._next_message(view.agent_message, state, sampling)
        return self._completion(result, None)

    async def episode(self, episode_id: str, body: ChatCompletionRequest,
                      path_view: View | None = None) -> dict:
        """``POST /ep/{episode_id}/v1/chat/completions`` (``/sim/ep/…``: simulator view): the
        next user turn of an episode.

        Raises:
            APIError: 400 bad id, a limit exceeded (:func:`check_request`) or a bad request,
                404 unknown/expired episode with history, 409 the request does not continue
                the episode or names another scenario.
        """
        check_episode_id(episode_id)
        check_request(body, self.config)
        sampling = self.sampling(body)
        view, scenario, named = self.read(body, path_view)
        episode = self.store.get(episode_id)
        if episode is None:
            if view.user_turns():
                raise APIError(404, f"episode {episode_id!r} is unknown or expired, and the "
                               "request continues a conversation", param="episode_id",
                               code="episode_not_found")
            state = self.simulator.init_state(self._required(scenario))
            episode = self.store.create(episode_id, state)
        elif named and scenario is not None and not scenario_equal(scenario,
                                                                   episode.state.scenario):
            raise APIError(409, f"episode {episode_id!r} runs another scenario; an episode "
                           "keeps the scenario of its first call: start a new episode id "
                           "(/ep/<new id>/v1) for this one", param="scenario",
                           code="scenario_mismatch")
        async with episode.lock:
            key = view.fingerprint()
            if episode.replay_key == key and episode.replay is not None:
                return episode.replay
            if episode.state.ended:
                return self._completion(TurnResult("", episode.state), episode_id)
            check_continues(episode.state, view, episode_id)
            self._check_budget(episode_id, episode.state, view.agent_message)
            result = await self._next_message(view.agent_message, episode.state, sampling)
            self.store.update(episode, result.state)
            episode.updated = time.time()
            episode.replay_key, episode.replay = key, self._completion(result, episode_id)
            return episode.replay

    async def _next_message(self, agent_message: str | None, state: UserState,
                            sampling: Sampling) -> TurnResult:
        """The batched simulator's turn; its per-request failures as OpenAI-shaped errors.

        Raises:
            APIError: 400 ``context_length_exceeded`` (the system prompt alone does not fit the
                prompt budget; a long agent message is shortened to fit instead),
                500 ``generation_failed`` (generating this request's turn raised, also alone;
                the other requests of its batch are answered).
        """
        try:
            return await self.simulator.next_message(agent_message, state, sampling)
        except PromptTooLongError as err:
            raise APIError(400, str(err), param="messages",
                           code="context_length_exceeded") from err
        except GenerationError as err:
            raise APIError(500, str(err), code="generation_failed") from err

    def _check_budget(self, episode_id: str, state: UserState, agent_message: str | None) -> None:
        size = state_bytes(state) + len((agent_message or "").encode("utf-8", "surrogatepass"))
        if size > self.config.max_episode_bytes:
            raise APIError(400, f"episode {episode_id!r} would hold {size} bytes, over this "
                           f"server's limit of {self.config.max_episode_bytes} per episode: "
                           "start a new episode", param="messages", code="episode_too_large")

    def private(self, episode_id: str) -> PrivateView:
        """``GET /ep/{episode_id}/private``: reasoning per user turn, flags and raw generations.

        Raises:
            APIError: 404 unknown or expired episode.
        """
        check_episode_id(episode_id)
        episode = self.store.get(episode_id)
        if episode is None:
            raise APIError(404, f"episode {episode_id!r} is unknown or expired",
                           param="episode_id", code="episode_not_found")
        s = episode.state
        turns = [PrivateTurn(index=k, utterance=u, reasoning=r, flags=f) for k, (u, r, f)
                 in enumerate(zip(s.user_utterances(), s.private, s.turn_flags, strict=True))]
        return PrivateView(episode_id=episode_id, scenario=s.scenario, turns=turns,
                           ended=s.ended, end_reason=s.end_reason, end_reasoning=s.end_reasoning,
                           flags=s.flags, raw=s.raw, created=episode.created,
                           updated=episode.updated)

    def delete(self, episode_id: str) -> dict:
        """``DELETE /ep/{episode_id}``: forget an episode (404 when unknown)."""
        check_episode_id(episode_id)
        if not self.store.delete(episode_id):
            raise APIError(404, f"episode {episode_id!r} is unknown or expired",
                           param="episode_id", code="episode_not_found")
        return {"id": episode_id, "object": "episode", "deleted": True}

    def _completion(self, result: TurnResult, episode_id: str | None) -> dict:
        state: UserState = result.state
        ended = state.ended
        usage = Usage(prompt_tokens=result.prompt_tokens,
                      completion_tokens=result.completion_tokens,
                      total_tokens=result.prompt_tokens + result.completion_tokens)
        choice = Choice(message=ResponseMessage(content=END_CONTENT if ended else result.message),
                        finish_reason=END_FINISH_REASON if ended else STOP_FINISH_REASON)
        info = EpisodeInfo(episode_id=episode_id, turn=state.turns, ended=ended,
                           end_reason=state.end_reason, flags=list(state.flags),
                           prompt=PromptFit(dropped_messages=result.dropped_messages,
                                            left_out_chars=result.left_out_chars))
        return ChatCompletion(id=f"chatcmpl-{uuid.uuid4().hex}", created=int(time.time()),
                              model=self.config.model_name, choices=[choice], usage=usage,
                              mimesis=info).model_dump()


def check_episode_id(episode_id: str) -> None:
    """Raises APIError 400 unless ``episode_id`` is 1–128 of ``[A-Za-z0-9._:-]`` (whole string:
    no trailing newline)."""
    if not EPISODE_ID.fullmatch(episode_id):
        raise APIError(400, "episode ids are 1-128 characters of letters, digits and . _ : - "
                       "(starting with a letter or digit)", param="episode_id",
                       code="invalid_episode_id")

