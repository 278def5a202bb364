"""``mimesis chat``: you play the agent, the frozen simulator plays the user, in a terminal.

The scenario is a conversation's from a label split file (``data/label/test.jsonl`` by default;
``--conversation ID`` or ``--index N``) or typed (``--goal``). The simulator speaks first; each
line you type is the agent's reply; ``/quit`` or end of input stops. ``--show-thoughts`` prints
the hidden goal and the user's private reasoning before each message. Runs through
:class:`~mimesis.simulator.runtime.UserSimulator`, so parsing and guards are the served ones.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from mimesis.behaviors.catalog import BEHAVIOR_IDS
from mimesis.format import END_SIGNAL
from mimesis.schemas import Scenario
from mimesis.serve.config import load_scenarios
from mimesis.simulator.prompts import directives
from mimesis.simulator.runtime import GenerateFn, UserSimulator, UserState

QUIT = frozenset({"/quit", "/exit", "/q"})


def pick_scenario(scenarios_path: Path, conversation: str | None = None, index: int = 0,
                  goal: str | None = None, behaviors: list[str] | None = None) -> Scenario:
    """The scenario to play: typed (``goal``) or from a label split file.

    Raises:
        FileNotFoundError: no ``goal`` and no such file.
        KeyError: unknown ``conversation`` id.
        IndexError: ``index`` outside the file.
        ValueError: unknown behaviour ids.
    """
    unknown = sorted(set(behaviors or []) - set(BEHAVIOR_IDS))
    if unknown:
        raise ValueError(f"unknown behaviour ids {unknown}; known: {', '.join(BEHAVIOR_IDS)}")
    if goal:
        return Scenario(goal=goal.strip(), behaviors=list(behaviors or []), annotator="typed")
    scenarios = load_scenarios(scenarios_path)
    if conversation is not None:
        if conversation not in scenarios:
            raise KeyError(f"no conversation {conversation!r} in {scenarios_path}")
        return scenarios[conversation]
    ids = list(scenarios)
    if not 0 <= index < len(ids):
        raise IndexError(f"--index {index} outside {scenarios_path} ({len(ids)} conversations)")
    return scenarios[ids[index]]


def load_generate_fn(sim_dir: Path, max_tokens: int, temperature: float, top_p: float,
                     seed: int | None, trust_folder: bool = False) -> GenerateFn:
    """``generate_fn`` of the frozen simulator at ``sim_dir`` (hash-verified, transformers;
    ``trust_folder``: see :func:`mimesis.simulator.frozen.recorded_fingerprint`)."""
    from mimesis.models.generation import ChatGenerator, GenerationConfig
    from mimesis.simulator.frozen import load_frozen

    model, tokenizer, _ = load_frozen(Path(sim_dir), trust_folder=trust_folder)
    generator = ChatGenerator(model, tokenizer, GenerationConfig(
        max_new_tokens=max_tokens, temperature=temperature, top_p=top_p, batch_size=1))
    steps = itertools.count()

    def generate(batch: list) -> list[str]:
        step = next(steps)  # a new seed per call: a resample must not repeat the turn
        return generator.generate(batch, desc="user", seed=None if seed is None else seed + step)

    return generate


def read_line(console: Console) -> str | None:
    """One agent reply from stdin (``None`` at end of input)."""
    console.print("[bold cyan]agent>[/bold cyan] ", end="")
    line = sys.stdin.readline()
    return line.rstrip("\n") if line else None


def run_chat(sim: UserSimulator, scenario: Scenario, read_agent: Callable[[], str | None],
             console: Console, show_thoughts: bool = False) -> UserState:
    """Play one episode: simulator turn, agent line, … until the user ends or you quit.

    Returns:
        The final :class:`UserState` (``ended`` False when you quit first).
    """
    if show_thoughts:
        console.print(f"[dim]hidden goal: {escape(scenario.goal)}[/dim]")
        if directives(scenario):
            console.print(f"[dim]directives: {escape(directives(scenario))}[/dim]")
    message, state = sim.next_message(None, sim.init_state(scenario))
    while not state.ended:
        if show_thoughts:
            thought = escape(state.private[-1] or "—")
            console.print(f"[dim italic]user thinks: {thought}[/dim italic]")
        console.print(f"[bold green]user>[/bold green] {escape(message)}")
        reply = read_agent()
        if reply is None or reply.strip() in QUIT:
            console.print("[yellow]you left the conversation[/yellow]")
            break
        message, state = sim.next_message(reply, state)
    if state.ended:
        if show_thoughts and state.end_reasoning:
            console.print(f"[dim italic]user thinks: {escape(state.end_reasoning)}[/dim italic]")
        console.print(f"[bold green]user>[/bold green] [dim]{escape(END_SIGNAL)} "
                      f"({state.end_reason})[/dim]")
    flags = ", ".join(state.flags) or "none"
    console.print(f"{state.turns} user turns; ended: {state.end_reason or 'no'}; flags: {flags}")
    return state
