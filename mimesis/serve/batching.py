"""Gather concurrent requests into one batched simulator call (asyncio queue + one worker).

Each request puts ``(agent_message, state, sampling)`` on a queue and awaits a future. The worker
takes the first waiting request, keeps collecting for ``window_ms`` (or until ``max_batch``),
groups the batch by :class:`~mimesis.serve.backends.Sampling` and runs
:meth:`UserSimulator.next_messages <mimesis.simulator.runtime.UserSimulator.next_messages>` once
per group — one ``backend.generate`` call, plus one for turns a guard resamples — in a single
worker thread, so the event loop keeps accepting requests meanwhile. Requests that arrive during a
generation form the next batch. Parsing, guards and episode rules are those of
:class:`~mimesis.simulator.runtime.UserSimulator`, as everywhere else. A request's redraws get
seeds derived from its own (:meth:`Sampling.for_draw
<mimesis.serve.backends.Sampling.for_draw>`), so a seeded request's turn is the same alone or
batched, and a redraw does not repeat the draw it replaces.

Every backend call, the prompt-budget check and token counts included, runs in that worker
thread. A transformers fast tokenizer keeps its padding setting on the shared Rust object, set
anew by each call: a count on the event loop thread that lands between a batch's "pad" and its
encode leaves that batch unpadded (``ValueError: Unable to create tensor``).

When a group's call raises, its requests are run again one at a time, so a request that breaks
generation fails alone (:class:`GenerationError`) and the others of its batch are answered.

A request whose caller stops waiting (its deadline passed, its client left: the awaiting task is
cancelled, and with it the request's future) is abandoned: dropped before generation when still
queued, and a running generation is stopped (``stop`` of
:meth:`~mimesis.serve.backends.Backend.generate`, asked between decode steps) once every request
of its group is abandoned, so the worker is free for the next batch.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial

from mimesis.schemas import Scenario, Turn
from mimesis.serve.backends import Backend, GenerationCancelled, Sampling
from mimesis.serve.fitting import Fit, PromptTooLongError, fit
from mimesis.simulator.guards import GuardParams
from mimesis.simulator.prompts import render_system_prompt
from mimesis.simulator.runtime import NO_REPLY, UserSimulator, UserState, build_view

log = logging.getLogger("mimesis.serve")


class GenerationError(RuntimeError):
    """Generating one request's turn raised, also when run on its own.

    The message names the original exception (``ValueError: …``), which is its ``__cause__``.
    """


@dataclass
class TurnResult:
    """The simulator's answer to one request.

    Attributes:
        message: The user's utterance (``""`` when the episode ended on this call).
        state: The episode state after the call.
        prompt_tokens / completion_tokens: Usage of the generation(s) this call made.
        dropped_messages / left_out_chars: How the view was fitted into the prompt budget
            (:class:`~mimesis.serve.fitting.Fit`; 0 and 0 when it fitted whole).
    """

    message: str
    state: UserState
    prompt_tokens: int = 0
    completion_tokens: int = 0
    dropped_messages: int = 0
    left_out_chars: int = 0


@dataclass
class _Item:
    agent_message: str | None
    state: UserState
    sampling: Sampling
    future: asyncio.Future
    # Set on the event loop when the future is cancelled; read by the worker thread.
    abandoned: threading.Event = field(default_factory=threading.Event)


@dataclass
class BatchStats:
    """Counters of the worker (reported by ``GET /stats``)."""

    batches: int = 0
    requests: int = 0
    largest_batch: int = 0
    generate_seconds: float = 0.0
    completion_tokens: int = 0
    retried_batches: int = 0  # groups rerun one request at a time after an error
    failed_requests: int = 0  # requests answered with GenerationError
    abandoned_requests: int = 0  # dropped or stopped because nobody waited for them any more
    sizes: dict[int, int] = field(default_factory=dict)


class BatchingSimulator:
    """A :class:`UserSimulator` behind an async batching queue.

    Args:
        backend: The generation engine.
        max_turns: Most user turns per episode.
        guards: Run-time guard settings (default :class:`GuardParams`).
        window_ms: How long the worker waits for more requests after the first one.
        max_batch: Most requests per batch (≥ 1).
        system_prompt_fn: Scenario → system prompt (the trained simulator's by default).

    Raises:
        ValueError: ``max_batch`` < 1 or negative ``window_ms``.
    """

    def __init__(self, backend: Backend, max_turns: int = 16, guards: GuardParams | None = None,
                 window_ms: float = 10.0, max_batch: int = 16,
                 system_prompt_fn: Callable[[Scenario], str] = render_system_prompt) -> None:
        if max_batch < 1 or window_ms < 0:
            raise ValueError("max_batch must be ≥ 1 and window_ms ≥ 0")
        self.backend = backend
        self.window_s = window_ms / 1000
        self.max_batch = max_batch
        self._make_sim = partial(UserSimulator, max_turns=max_turns,
                                 system_prompt_fn=system_prompt_fn, guards=guards)
        self.max_turns = max_turns
        self.stats = BatchStats()
        self._queue: asyncio.Queue[_Item] | None = None
        self._worker: asyncio.Task | None = None
        self._executor: ThreadPoolExecutor | None = None

    def init_state(self, scenario: Scenario) -> UserState:
        """A fresh episode for ``scenario`` (no model call)."""
        return self._make_sim(self._no_generate).init_state(scenario)

    async def start(self) -> None:
        """Start the worker (call from the running event loop)."""
        self._queue = asyncio.Queue()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mimesis-generate")
        self._worker = asyncio.create_task(self._work(), name="mimesis-batcher")

    async def stop(self) -> None:
        """Stop the worker; requests still queued fail with ``RuntimeError``."""
        if self._worker is not None:
            self._worker.cancel()
            try:
                await self._worker
            except asyncio.CancelledError:
                pass
        while self._queue is not None and not self._queue.empty():
            item = self._queue.get_nowait()
            if not item.future.done():
                item.future.set_exception(RuntimeError("server shutting down"))
        if self._executor is not None:
            self._executor.shutdown(wait=True)
        self._worker = self._executor = None

    def fit(self, messages: list[dict[str, str]]) -> Fit:
        """``messages`` fitted into the backend's prompt budget
        (:func:`~mimesis.serve.fitting.fit`).

        Raises:
            mimesis.serve.fitting.PromptTooLongError: the system prompt alone does not fit.
        """
        return fit(messages, self.backend.prompt_tokens,
                   getattr(self.backend, "max_prompt_tokens", None))

    def check_fits(self, agent_message: str | None, state: UserState) -> None:
        """Raise :class:`~mimesis.serve.fitting.PromptTooLongError` when the view of the next
        turn cannot fit. The worker checks each request before batching it, so one request that
        does not fit never fails a batch; it calls the backend, so only the worker calls it."""
        self.fit(build_view(_with_agent_turn(agent_message, state)))

    async def next_message(self, agent_message: str | None, state: UserState,
                           sampling: Sampling) -> TurnResult:
        """The user's reply to ``agent_message`` in episode ``state`` (not modified).

        Raises:
            RuntimeError: the worker is not running.
            mimesis.serve.fitting.PromptTooLongError: the view cannot fit the prompt budget.
            GenerationError: generating this turn raised, in its batch and again on its own
                (e.g. an invalid turn order, an engine error).
        """
        if self._queue is None or self._worker is None:
            raise RuntimeError("BatchingSimulator.start() was not called")
        future = asyncio.get_running_loop().create_future()
        item = _Item(agent_message, state, sampling, future)
        future.add_done_callback(lambda f: item.abandoned.set() if f.cancelled() else None)
        await self._queue.put(item)
        return await future

    async def _work(self) -> None:
        loop = asyncio.get_running_loop()
        assert self._queue is not None
        while True:
            batch = [await self._queue.get()]
            deadline = loop.time() + self.window_s
            while len(batch) < self.max_batch:
                remaining = deadline - loop.time()
                try:
                    item = (self._queue.get_nowait() if remaining <= 0 else
                            await asyncio.wait_for(self._queue.get(), remaining))
                except (asyncio.QueueEmpty, TimeoutError):
                    break
                batch.append(item)
            waiting = [item for item in batch if not item.future.cancelled()]
            self.stats.abandoned_requests += len(batch) - len(waiting)
            batch = waiting
            if not batch:
                continue
            try:
                outcomes = await loop.run_in_executor(self._executor, self._run_batch, batch)
            except Exception as err:  # the worker must outlive any batch: answer, go on
                log.exception("batch failed outside generation")
                outcomes = [err] * len(batch)
            for item, outcome in zip(batch, outcomes, strict=True):
                if item.future.done():
                    continue
                if isinstance(outcome, BaseException):
                    item.future.set_exception(outcome)
                else:
                    item.future.set_result(outcome)

    def _run_batch(self, batch: Sequence[_Item]) -> list[TurnResult | BaseException]:
        """Worker thread: fit check per request, then one ``next_messages`` call per sampling
        group (rerun request by request when it raises)."""
        started = time.perf_counter()
        outcomes: list[TurnResult | BaseException] = [RuntimeError("not run")] * len(batch)
        groups: dict[Sampling, list[int]] = defaultdict(list)
        for i, item in enumerate(batch):
            if item.abandoned.is_set():
                outcomes[i] = GenerationCancelled("abandoned before generation")
                self.stats.abandoned_requests += 1
                continue
            try:
                self.check_fits(item.agent_message, item.state)
            except PromptTooLongError as err:
                outcomes[i] = err
                continue
            except Exception as err:  # noqa: BLE001 - e.g. a chat template that rejects it
                outcomes[i] = self._failed(err)
                continue
            groups[item.sampling].append(i)
        for sampling, idx in groups.items():
            for i, outcome in zip(idx, self._run_group(batch, idx, sampling), strict=True):
                outcomes[i] = outcome
        self._record(len(batch), time.perf_counter() - started, outcomes)
        return outcomes

    def _run_group(self, batch: Sequence[_Item], idx: list[int],
                   sampling: Sampling) -> list[TurnResult | BaseException]:
        """Outcomes of ``batch[i] for i in idx`` from one call; after an error, from one call
        per request, so only the requests that fail on their own get an error."""
        try:
            return self._next_messages(batch, idx, sampling)
        except GenerationCancelled as err:  # every caller left: nothing to isolate or retry
            self.stats.abandoned_requests += len(idx)
            return [err] * len(idx)
        except Exception as err:  # noqa: BLE001 - any engine error: isolate the request at fault
            if len(idx) == 1:
                return [self._failed(err)]
            log.warning("a batch of %d failed (%s: %s); rerunning it one request at a time",
                        len(idx), type(err).__name__, err)
            self.stats.retried_batches += 1
        outcomes: list[TurnResult | BaseException] = []
        for i in idx:
            try:
                outcomes += self._next_messages(batch, [i], sampling)
            except GenerationCancelled as err:
                self.stats.abandoned_requests += 1
                outcomes.append(err)
            except Exception as err:  # noqa: BLE001 - answered to this request alone
                outcomes.append(self._failed(err))
        return outcomes

    def _next_messages(self, batch: Sequence[_Item], idx: list[int],
                       sampling: Sampling) -> list[TurnResult]:
        def stop() -> bool:
            return all(batch[i].abandoned.is_set() for i in idx)

        draws = itertools.count()  # each call is every pending request's next draw

        def generate(views: list) -> list[str]:
            return self.backend.generate([self.fit(v).messages for v in views],
                                         sampling.for_draw(next(draws)), stop=stop)

        replies = self._make_sim(generate).next_messages(
            [(batch[i].agent_message, batch[i].state) for i in idx])
        return [self._result(batch[i], message, state)
                for i, (message, state) in zip(idx, replies, strict=True)]

    def _failed(self, err: Exception) -> GenerationError:
        log.error("generation failed for one request", exc_info=err)
        self.stats.failed_requests += 1
        # The client learns the exception's kind and first words; the log keeps the traceback.
        failure = GenerationError(f"generation failed for this request: "
                                  f"{type(err).__name__}: {str(err)[:300]}")
        failure.__cause__ = err
        return failure

    def _result(self, item: _Item, message: str, state: UserState) -> TurnResult:
        """Attach usage (the raw generations this call added, and the view they were given)
        and how that view was fitted; a shortened agent turn flags the episode (and the new
        user turn) ``agent_message_shortened``."""
        new_raw = state.raw[len(item.state.raw):]
        if not new_raw:
            return TurnResult(message, state)
        fitted = self.fit(build_view(_with_agent_turn(item.agent_message, item.state)))
        prompt = self.backend.prompt_tokens(fitted.messages) * len(new_raw)
        completion = sum(self.backend.count_tokens(r) for r in new_raw)
        if fitted.left_out_chars:
            if "agent_message_shortened" not in state.flags:
                state.flags.append("agent_message_shortened")
            if len(state.turn_flags) > len(item.state.turn_flags):
                state.turn_flags[-1].append("agent_message_shortened")
        return TurnResult(message, state, prompt, completion, fitted.dropped_messages,
                          fitted.left_out_chars)

    def _record(self, size: int, seconds: float, outcomes: list) -> None:
        s = self.stats
        s.batches += 1
        s.requests += size
        s.largest_batch = max(s.largest_batch, size)
        s.generate_seconds += seconds
        s.sizes[size] = s.sizes.get(size, 0) + 1
        s.completion_tokens += sum(o.completion_tokens for o in outcomes
                                   if isinstance(o, TurnResult))

    @staticmethod
    def _no_generate(batch: list) -> list[str]:
        raise RuntimeError("init_state does not generate")


def _with_agent_turn(agent_message: str | None, state: UserState) -> UserState:
    """A copy of ``state`` with the agent's message appended, as the runtime records it.

    Shallow (a new history list, the same turns): it is only read, to build a view; a deep copy
    of a long history cost more than fitting it.
    """
    if agent_message is None or state.ended:
        return state.model_copy()
    text = agent_message if agent_message.strip() else NO_REPLY
    return state.model_copy(update={"history": [*state.history, Turn(role="assistant",
                                                                     text=text)]})
