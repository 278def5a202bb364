"""Episodes as MLflow traces: one trace per agent turn, one session per episode.

An episode is a conversation between an agent and a user (the frozen simulator, the prompted
base model, a replay, agenda or endpoint user). MLflow's GenAI view groups traces that share the
``mlflow.trace.session`` metadata into a session and shows it as a chat; ``mlflow.trace.user``
lets the UI filter by who played the user. So each agent turn becomes one trace:

- inputs ``{"messages": [...]}``: what the agent received since its previous turn (the opening
  chat on turn 0: system prompt and first observation; then the user's reply or the env's note);
- outputs: the agent's message;
- metadata (immutable, indexed): ``mlflow.trace.session`` = the episode id, ``mlflow.trace.user``
  = the user's name;
- tags: ``mimesis.stage``, ``mimesis.agent``, ``mimesis.env``, ``mimesis.scenario``,
  ``mimesis.reward``, ``mimesis.success``, ``mimesis.termination``, ``mimesis.turn``,
  ``mimesis.turns`` and, for training rollouts, ``mimesis.step``.

Only the agent's own chat (``messages`` of the episode record) and the outcome are read: the
simulator's private reasoning (``turns[*].user_reasoning``) and the scenario it was given (goal,
traits, directives: the hidden facts) never reach a trace. Fields are picked by name, not
filtered out, so a field added to the record later stays out until it is picked here.

Bounded: a stage logs a sample (``mlflow_traces`` in its params.yaml section; 0 = none) and the
queue of MLflow's asynchronous exporter is flushed every :data:`FLUSH_EVERY` traces (a full
queue drops traces). Cost: benchmarks/tracing.py.

Trace ids come from OpenTelemetry's generator, which draws on the global :mod:`random`; stages
seed it, so two stages (or two runs of one) with the same seed would draw the same ids and the
tracking store would keep only the last trace of each id. Ids are therefore drawn from an
OS-seeded state, and the stage's own random state is put back afterwards: tracing neither
collides nor changes what a seeded run samples next. Each turn's trace starts at least 1 ms
after the previous one, so a session lists its turns in order.
"""

from __future__ import annotations

import os
import random
import re
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

SESSION = "mlflow.trace.session"
USER = "mlflow.trace.user"
FLUSH_EVERY = 200  # traces queued between flushes: MLflow's async queue holds 1000 tasks
MAX_CHARS = 4000  # per message: a trace shows the conversation, not a dump of the env's tables
_ID_UNSAFE = re.compile(r"[^A-Za-z0-9._:-]+")
# The only fields of an episode record a trace is made of: the agent's chat and the outcome.
READ = ("agent", "user", "messages", "env", "scenario_id", "index", "reward", "termination",
        "step")


def pick(row: Any) -> dict[str, Any]:
    """The :data:`READ` fields of an episode record (a JSON row or an
    :class:`~mimesis.rollout.records.Episode`); nothing else of it goes further."""
    if hasattr(row, "model_dump"):
        row = row.model_dump(mode="json", include=set(READ))
    return {k: row[k] for k in READ if k in row}


def sample_evenly(items: Sequence[Any], k: int) -> list[Any]:
    """``k`` items spread evenly over ``items`` (all of them when ``k >= len(items)``; none when
    ``k <= 0``); first and last included, order kept, deterministic.

    >>> sample_evenly(list(range(10)), 4)
    [0, 3, 6, 9]
    >>> sample_evenly([1, 2], 5), sample_evenly([1, 2], 0)
    ([1, 2], [])
    """
    n = len(items)
    if k <= 0 or n == 0:
        return []
    if k >= n:
        return list(items)
    if k == 1:
        return [items[0]]
    return [items[round(i * (n - 1) / (k - 1))] for i in range(k)]


def turn_exchanges(messages: Sequence[Mapping[str, str]]) -> list[tuple[list[dict], str]]:
    """The agent's chat cut at its turns: ``(messages received since the previous agent turn,
    agent message)`` per agent turn; what follows the last agent turn is not a turn.

    >>> turn_exchanges([{"role": "system", "content": "s"}, {"role": "user", "content": "hi"},
    ...                 {"role": "assistant", "content": "a1"}, {"role": "user", "content": "u"},
    ...                 {"role": "assistant", "content": "a2"}, {"role": "user", "content": "end"}])
    ... # doctest: +NORMALIZE_WHITESPACE
    [([{'role': 'system', 'content': 's'}, {'role': 'user', 'content': 'hi'}], 'a1'),
     ([{'role': 'user', 'content': 'u'}], 'a2')]
    """
    out: list[tuple[list[dict], str]] = []
    pending: list[dict] = []
    for m in messages:
        content = str(m.get("content") or "")[:MAX_CHARS]
        if m.get("role") == "assistant":
            out.append((pending, content))
            pending = []
        else:
            pending.append({"role": str(m.get("role")), "content": content})
    return out


def session_id(prefix: str, row: Mapping[str, Any], agent: str, user: str) -> str:
    """The episode's id: ``<prefix>-<agent>-<user>-<scenario>-<index>`` (+ ``-s<step>`` for a
    training rollout), reduced to ``[A-Za-z0-9._:-]``, at most 250 characters."""
    parts = [prefix, agent, user, str(row.get("scenario_id", "")), str(row.get("index", 0))]
    if row.get("step") is not None:
        parts.append(f"s{row['step']}")
    return _ID_UNSAFE.sub("_", "-".join(p for p in parts if p))[:250]


def episode_tags(row: Mapping[str, Any], stage: str, agent: str,
                 thresholds: Mapping[str, float] | None = None) -> dict[str, str]:
    """Trace tags of an episode (strings): stage, agent, env, scenario, reward, success (when
    ``thresholds``, env -> success threshold, has the episode's env), termination, turns, step
    (training rollouts)."""
    reward = float(row.get("reward", 0.0))
    env = str(row.get("env", ""))
    tags = {"mimesis.stage": stage, "mimesis.agent": agent, "mimesis.env": env,
            "mimesis.scenario": str(row.get("scenario_id", "")), "mimesis.reward": f"{reward:g}",
            "mimesis.termination": str(row.get("termination", "")),
            "mimesis.turns": str(sum(m.get("role") == "assistant"
                                     for m in row.get("messages", [])))}
    if thresholds and env in thresholds:
        tags["mimesis.success"] = str(reward >= thresholds[env]).lower()
    if row.get("step") is not None:
        tags["mimesis.step"] = str(row["step"])
    return tags


def log_episode_traces(rows: Iterable[Any], stage: str, *, agent: str | None = None,
                       user: str | None = None,
                       thresholds: Mapping[str, float] | None = None) -> int:
    """Log each episode as one MLflow trace per agent turn, in the current experiment (linked to
    the active run, if any).

    Args:
        rows: Episode records: :class:`~mimesis.rollout.records.Episode` objects or their JSON rows
            (token lists optional), with ``agent`` / ``user`` keys unless given here; training
            rows may carry ``step``. Only the :data:`READ` fields are read (:func:`pick`).
        stage: The stage name (tag ``mimesis.stage``; the session ids start with it).
        agent: The agent's name for every row (else each row's ``agent``).
        user: The user's name for every row (else each row's ``user``).
        thresholds: Env -> success threshold (the registry's
            :func:`~mimesis.envs.registry.success_thresholds`), for the ``mimesis.success`` tag;
            passed in because this leaf module does not import the environments.

    Returns:
        The number of traces logged (agent turns).
    """
    import mlflow

    run = mlflow.active_run()
    prefix = f"{stage}-{run.info.run_id[:8]}" if run is not None else stage
    logged, last_ms = 0, 0
    with _unseeded_ids():
        for row in map(pick, rows):
            who, by = agent or str(row.get("agent", "agent")), user or str(row.get("user", "user"))
            session = session_id(prefix, row, who, by)
            tags = episode_tags(row, stage, who, thresholds)
            for turn, (received, said) in enumerate(turn_exchanges(row.get("messages", []))):
                _wait_past(last_ms)
                with mlflow.start_span(name="agent_turn", span_type="CHAT_MODEL") as span:
                    last_ms = span.start_time_ns // 1_000_000
                    span.set_inputs({"messages": received})
                    span.set_outputs(said)
                    mlflow.update_current_trace(metadata={SESSION: session, USER: by},
                                                tags={**tags, "mimesis.turn": str(turn)})
                logged += 1
                if logged % FLUSH_EVERY == 0:
                    mlflow.flush_trace_async_logging()
    return logged


@contextmanager
def _unseeded_ids() -> Iterator[None]:
    """Run the block on an OS-seeded global :mod:`random` (trace ids) and restore the caller's
    state afterwards (see the module docstring)."""
    state = random.getstate()
    random.seed(os.urandom(32))
    try:
        yield
    finally:
        random.setstate(state)


def _wait_past(last_ms: int) -> None:
    """Wait until the wall clock is past ``last_ms`` (ms since the epoch): the UI orders a
    session's traces by their start time, in milliseconds."""
    while time.time_ns() // 1_000_000 <= last_ms:
        time.sleep(0.0005)


def flush() -> None:
    """Wait until every queued trace is written (MLflow exports them in background threads)."""
    import mlflow

    mlflow.flush_trace_async_logging()
