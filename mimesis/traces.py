"""Episodes as MLflow traces: one trace per turn of the conversation, one session per episode.

An episode is a conversation between an agent and a user (the frozen simulator, the prompted
base model, a replay, agenda or endpoint user). MLflow's GenAI view groups traces that share the
``mlflow.trace.session`` metadata into a session and shows it as a chat; ``mlflow.trace.user``
lets the UI filter by who played the user. Each turn of the chat is one trace, read by the UI
from the trace's root span: the last ``user`` message of its inputs is the User's message (and
the trace's request preview), its output the Assistant's. So a turn is one user message and
the agent's reply to it (:func:`conversation_turns`):

- root span ``conversation_turn`` (AGENT): inputs ``{"messages": [{"role": "user", "content":
  <what the user said>}]}``; outputs: the agent's reply, its first message after the user's
  that went to the user, or its last one (an answer, a finish, the turn limit). The agents here
  speak first, so turn 0 opens the conversation: no user message yet, its inputs are the agent's
  instructions (the env's prompt) as ``system`` messages, and the UI shows the agent's reply alone;
- a child span ``agent`` (CHAT_MODEL) per agent message of the turn (searches, tool calls, then
  the reply): inputs ``{"messages": [...]}``, what the agent received before it as its chat had
  it (the opening prompt on turn 0, a tool result or env note, the user's words with the
  engine's turns-left note); outputs: the agent's message;
- metadata: ``mlflow.trace.session`` = the episode id, ``mlflow.trace.user`` = the user's name;
- tags: ``mimesis.{stage,agent,env,scenario,reward,success,termination}``, ``mimesis.turn`` (the
  trace's place in its session), ``mimesis.turns`` (agent messages) and ``mimesis.step``.

Only the agent's own chat (``messages`` of the episode record), where each observation came from
and what the user said (``obs_source`` and ``obs`` of ``turns``) and the outcome are read: the
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
from dataclasses import dataclass
from typing import Any

from mimesis.schemas import Messages

SESSION = "mlflow.trace.session"
USER = "mlflow.trace.user"
FLUSH_EVERY = 200  # traces queued between flushes: MLflow's async queue holds 1000 tasks
MAX_CHARS = 4000  # per message: a trace shows the conversation, not a dump of the env's tables
PREVIEW_CHARS = 1000  # MLflow's own cap on a request/response preview (open-source server)
_ID_UNSAFE = re.compile(r"[^A-Za-z0-9._:-]+")
# The only fields of an episode record a trace is made of: the agent's chat and the outcome...
READ = ("agent", "user", "messages", "turns", "env", "scenario_id", "index", "reward",
        "termination", "step")
# ...and of each of its turns, what came back and from whom (never user_reasoning).
READ_TURN = ("obs", "obs_source")


@dataclass(frozen=True)
class ConversationTurn:
    """One turn of the conversation as MLflow shows it.

    Attributes:
        user: What the user said; ``None`` on the opening turn (the agent speaks first).
        steps: ``(messages the agent received, its message)`` per agent message of the turn, in
            order; the last message is the agent's reply.
    """

    user: str | None
    steps: list[tuple[Messages, str]]

    @property
    def reply(self) -> str:
        return self.steps[-1][1]


def pick(row: Any) -> dict[str, Any]:
    """The :data:`READ` fields of an episode record (a JSON row or an
    :class:`~mimesis.rollout.records.Episode`), and only the :data:`READ_TURN` fields of its
    turns; nothing else of it goes further."""
    if hasattr(row, "model_dump"):
        row = row.model_dump(mode="json", include=set(READ))
    out = {k: row[k] for k in READ if k in row}
    if "turns" in out:
        out["turns"] = [{k: t[k] for k in READ_TURN if k in t} for t in out["turns"]]
    return out


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


def agent_steps(messages: Sequence[Mapping[str, str]]) -> list[tuple[Messages, str]]:
    """The agent's chat cut at its messages: ``(messages received since its previous message,
    agent message)`` per agent message; what follows the last agent message is not a step.

    >>> agent_steps([{"role": "system", "content": "s"}, {"role": "user", "content": "hi"},
    ...              {"role": "assistant", "content": "a1"}, {"role": "user", "content": "u"},
    ...              {"role": "assistant", "content": "a2"}, {"role": "user", "content": "end"}])
    ... # doctest: +NORMALIZE_WHITESPACE
    [([{'role': 'system', 'content': 's'}, {'role': 'user', 'content': 'hi'}], 'a1'),
     ([{'role': 'user', 'content': 'u'}], 'a2')]
    """
    out: list[tuple[Messages, str]] = []
    pending: Messages = []
    for m in messages:
        content = str(m.get("content") or "")[:MAX_CHARS]
        if m.get("role") == "assistant":
            out.append((pending, content))
            pending = []
        else:
            pending.append({"role": str(m.get("role")), "content": content})
    return out


def conversation_turns(messages: Sequence[Mapping[str, str]],
                       turns: Sequence[Mapping[str, Any]] = ()) -> list[ConversationTurn]:
    """The episode as the turns of a conversation: the opening (the agent's first steps, up to
    its first message to the user), then one per user message, with the agent's steps up to its
    next message to the user (or its last one).

    What the user said after agent message ``k`` is ``turns[k]["obs"]`` when
    ``turns[k]["obs_source"]`` is ``user`` (the words alone; the agent's chat appends the turns-left
    note to them); a record without ``turns`` falls back on the chat's roles (a ``user``
    message after the opening). Words after the agent's last message (the runtime's empty
    reply when it ends the conversation) are not a turn.

    >>> chat = [{"role": "user", "content": "Plan a trip."},
    ...         {"role": "assistant", "content": "[search] hotel"},
    ...         {"role": "tool", "content": "H1"},
    ...         {"role": "assistant", "content": "[action] Budget?"},
    ...         {"role": "user", "content": "Cheap.\\n\\n(1 message left)"},
    ...         {"role": "assistant", "content": "[answer] H1"}]
    >>> turns = [{"obs_source": "tool", "obs": "H1"}, {"obs_source": "user", "obs": "Cheap."},
    ...          {"obs_source": "env", "obs": "Answer recorded."}]
    >>> [(t.user, t.reply, len(t.steps)) for t in conversation_turns(chat, turns)]
    [(None, '[action] Budget?', 2), ('Cheap.', '[answer] H1', 1)]
    """
    steps = agent_steps(messages)
    out: list[ConversationTurn] = []
    current = ConversationTurn(None, [])
    for k, step in enumerate(steps):
        current.steps.append(step)
        if k + 1 == len(steps):
            break
        said = _user_words(steps[k + 1][0], turns[k] if k < len(turns) else {})
        if said is not None:
            out.append(current)
            current = ConversationTurn(said[:MAX_CHARS], [])
    if current.steps:
        out.append(current)
    return out


def _user_words(received: Messages, turn: Mapping[str, Any]) -> str | None:
    """What the user said after an agent message (``None``: the user was not spoken to)."""
    if "obs_source" in turn:
        return str(turn.get("obs") or "") if turn["obs_source"] == "user" else None
    return next((m["content"] for m in received if m["role"] == "user"), None)


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
    """Log each episode as one MLflow trace per turn of its conversation
    (:func:`conversation_turns`), in the current experiment (linked to the active run, if any).

    Args:
        rows: Episode records: :class:`~mimesis.rollout.records.Episode` objects or their JSON rows
            (token lists optional), with ``agent`` / ``user`` keys unless given here; training
            rows may carry ``step``. Only the :data:`READ` and :data:`READ_TURN` fields are read
            (:func:`pick`).
        stage: The stage name (tag ``mimesis.stage``; the session ids start with it).
        agent: The agent's name for every row (else each row's ``agent``).
        user: The user's name for every row (else each row's ``user``).
        thresholds: Env -> success threshold (the registry's
            :func:`~mimesis.envs.registry.success_thresholds`), for the ``mimesis.success`` tag;
            passed in because this leaf module does not import the environments.

    Returns:
        The number of traces logged (conversation turns).
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
            for index, turn in enumerate(conversation_turns(row.get("messages", []),
                                                            row.get("turns", []))):
                _wait_past(last_ms)
                with mlflow.start_span(name="conversation_turn", span_type="AGENT") as span:
                    last_ms = span.start_time_ns // 1_000_000
                    span.set_inputs({"messages": turn_request(turn)})
                    for received, said in turn.steps:
                        with mlflow.start_span(name="agent", span_type="CHAT_MODEL") as step:
                            step.set_inputs({"messages": received})
                            step.set_outputs(said)
                    span.set_outputs(turn.reply)
                    mlflow.update_current_trace(metadata={SESSION: session, USER: by},
                                                tags={**tags, "mimesis.turn": str(index)},
                                                request_preview=request_preview(turn))
                logged += 1
                if logged % FLUSH_EVERY == 0:
                    mlflow.flush_trace_async_logging()
    return logged


def turn_request(turn: ConversationTurn) -> Messages:
    """The root span's input messages: what the user said; on the opening turn the agent's
    instructions, as ``system`` messages (the agent's chat carries the env's prompt as its first
    ``user`` message, which is no word of the user's).

    >>> turn_request(ConversationTurn("Cheap.", [([], "[answer] H1")]))
    [{'role': 'user', 'content': 'Cheap.'}]
    >>> turn_request(ConversationTurn(None, [([{"role": "user", "content": "Plan."}], "Hi")]))
    [{'role': 'system', 'content': 'Plan.'}]
    """
    if turn.user is not None:
        return [{"role": "user", "content": turn.user}]
    return [{"role": "system", "content": m["content"]} for m in turn.steps[0][0]]


def request_preview(turn: ConversationTurn) -> str | None:
    """The opening's request preview (the trace list's Input column; a session's Input is its
    first trace's): its instructions marked ``[system]``, so that the list does not show them as
    if the user had said them. ``None`` on the other turns: MLflow's own preview of their request
    is the user's words.

    MLflow writes a trace's info and its spans in two background tasks, and when the span write
    lands last it can put back its own preview (the bare instructions): seen once in 142 traces.

    >>> request_preview(ConversationTurn(None, [([{"role": "user", "content": "Plan."}], "Hi")]))
    '[system] Plan.'
    >>> request_preview(ConversationTurn("Cheap.", [([], "[answer] H1")])) is None
    True
    """
    if turn.user is not None:
        return None
    return ("[system] " + "\n".join(m["content"] for m in turn_request(turn)))[:PREVIEW_CHARS]


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
