"""Let a simulator write the user turn at every evaluation position, and label every turn.

Every simulator is driven through the run-time path agents meet in RL, agent evaluation and
``mimesis serve``: :class:`~mimesis.simulator.runtime.UserSimulator` (its view, parser and guards,
with their resamples) over a ``generate_fn`` — for a local model the RL sampler
(:meth:`mimesis.models.engine.sampling.TokenSampler.chat`), for an endpoint its client
(:func:`simulate_runtime`). So the realism table scores the simulator as it is deployed: a turn
a guard resamples is counted (``resampled:<flag>`` flags), one it refuses (an empty turn after
its resample) is a lost turn. The trained and prompted simulators differ only by their system
prompt (``user_simulator`` / ``prompted_user``). Real history user turns carry empty reasoning
(held-out conversations have no annotated reasoning).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mimesis.eval.realism.metrics import TurnRecord
from mimesis.eval.realism.protocol import NEXT, EvalItem, clip_history, fit_turns
from mimesis.schemas import Messages, Scenario, Turn
from mimesis.simulator.baseline import (
    render_prompted_system_prompt,
    render_prompted_user_messages,
)
from mimesis.simulator.guards import GuardParams
from mimesis.simulator.parsing import parse_turn
from mimesis.simulator.prompts import render_system_prompt
from mimesis.simulator.runtime import GenerateFn, UserSimulator, UserState, build_view
from mimesis.text import clip

LabelFn = Callable[[Sequence[Turn], int], Sequence[str]]
ViewFn = Callable[[Scenario, list[Turn]], Messages]


@dataclass(frozen=True)
class Generated:
    """One simulator output at one position: the raw text and its parse."""

    raw: str
    reasoning: str
    utterance: str
    ended: bool
    flags: tuple[str, ...]
    first_raw: str = ""  # the position's first draw, before any guard redrew it
    first_flags: tuple[str, ...] = ()  # its parse and private-text flags (first_draw_flags)


def trained_messages(scenario: Scenario, history: list[Turn]) -> Messages:
    """The trained simulator's view of ``history`` (its training system prompt)."""
    state = UserState(scenario=scenario, system_prompt=render_system_prompt(scenario),
                      history=history, private=[""] * sum(t.role == "user" for t in history))
    return build_view(state)


def baseline_messages(scenario: Scenario, history: list[Turn]) -> Messages:
    """The prompted baseline's view of ``history`` (same base model, prompted as a user)."""
    return render_prompted_user_messages(scenario, history)


VIEWS: dict[str, ViewFn] = {"trained": trained_messages, "baseline": baseline_messages}
# The same two views named by prompt style (the ``prompt_style`` of an HF or endpoint simulator).
STYLE_VIEWS: dict[str, ViewFn] = {"user_simulator": trained_messages,
                                  "prompted_user": baseline_messages}
# The prompt style of each row name, and the runtime's system prompt of each style.
VIEW_STYLES = {"trained": "user_simulator", "baseline": "prompted_user"}
SYSTEM_PROMPTS: dict[str, Callable[[Scenario], str]] = {
    "user_simulator": render_system_prompt, "prompted_user": render_prompted_system_prompt}


def parse_all(raws: Sequence[str]) -> list[Generated]:
    """Parse raw generations into reasoning / utterance / end decision.

    A turn counts as an end decision whenever it carries the end signal, with or without a
    closing utterance ("thanks! <|end_conversation|>").
    """
    out = []
    for raw in raws:
        p = parse_turn(raw)
        out.append(Generated(raw, p.reasoning, p.utterance, p.ended, tuple(p.flags)))
    return out


def first_draw_flags(state: UserState, guards: GuardParams | None = None) -> tuple[str, ...]:
    """Flags of the position's first raw draw (``state.raw[0]``) as the runtime assessed it
    before any guard redrew it: the parser's flags
    (:func:`~mimesis.simulator.parsing.parse_turn`) plus the runtime's private-text rule 0 on
    the parsed utterance, ``directive_copy``
    (:func:`~mimesis.simulator.guards.strip_directive_copies`) and ``hidden_fact``
    (:func:`~mimesis.simulator.hidden_facts.hidden_facts_said`), over the text public before
    this turn. ``()`` when nothing was drawn (an ended state the runtime never asked).

    ``state`` is the state after the step: the user turn a step sent is the last of its
    history and is not public before it.
    """
    from mimesis.simulator.guards import strip_directive_copies
    from mimesis.simulator.hidden_facts import hidden_facts_said

    if not state.raw:
        return ()
    g = guards or GuardParams()
    parsed = parse_turn(state.raw[0])
    flags = list(parsed.flags)
    sent = not state.ended and state.history and state.history[-1].role == "user"
    before = state.history[:-1] if sent else state.history
    public = "\n".join(t.text for t in before if t.role == "assistant")
    kept, cut = strip_directive_copies(parsed.utterance, state.scenario.directives,
                                       g.directive_min_words, public)
    if cut:
        flags.append("directive_copy")
    if hidden_facts_said(kept, state.scenario, "\n".join(t.text for t in before)):
        flags.append("hidden_fact")
    return tuple(flags)


def runtime_generated(reply: str, state: UserState,
                      guards: GuardParams | None = None) -> Generated:
    """The :class:`Generated` of one runtime step: what was sent (or why nothing was), the
    private reasoning of the turn, every flag of the step (resamples included), and the first
    draw with its :func:`first_draw_flags` (``guards``: the runtime's, default
    :class:`GuardParams`)."""
    flags = list(state.flags)
    raw = state.raw[-1] if state.raw else ""
    first = state.raw[0] if state.raw else ""
    first_flags = first_draw_flags(state, guards)
    if state.ended:
        if state.end_reason:
            flags.append(f"end:{state.end_reason}")
        # An empty turn refused after its resample is a lost turn, not an end decision.
        return Generated(raw, state.end_reasoning, "", state.end_reason != "empty_turn",
                         tuple(flags), first, first_flags)
    # A turn with an utterance and the end signal is sent (the runtime defers the end, flag
    # ``end_deferred``): the user spoke here, so it is scored as a spoken turn.
    return Generated(raw, state.private[-1], reply, False, tuple(flags), first, first_flags)


def simulate_runtime(generate_fn: GenerateFn, prompt_style: str, items: Sequence[EvalItem],
                     count_tokens: Callable[[Messages], int] | None, max_prompt_tokens: int,
                     max_user_chars: int, max_agent_chars: int, chunk_size: int, desc: str,
                     guards: GuardParams | None = None) -> list[Generated]:
    """One user turn per item, generated through the run-time simulator (module docstring).

    Each position becomes an episode state holding the real history before the last agent
    reply (clipped by characters, then oldest pairs dropped to fit ``max_prompt_tokens`` when
    ``count_tokens`` is given; the system prompt is never cut) and that reply as the agent's
    message; :meth:`UserSimulator.next_messages` answers ``chunk_size`` positions per call.

    Args:
        generate_fn: Batch of chats -> raw continuations (a sampler's ``chat``, an endpoint).
        prompt_style: ``user_simulator`` (trained) or ``prompted_user`` (the baseline).
        count_tokens: Prompt length in tokens of a message list (``None``: no token budget,
            the endpoint's own limit holds).

    Raises:
        KeyError: an unknown ``prompt_style``.
        ValueError: ``generate_fn`` returned another number of texts than chats.
    """
    from tqdm.auto import tqdm

    sim = UserSimulator(generate_fn, max_turns=10**9, system_prompt_fn=SYSTEM_PROMPTS[prompt_style],
                        guards=guards)

    def state_of(scenario: Scenario, history: list[Turn],
                 reasoning: Sequence[str] = ()) -> UserState:
        # history is a suffix of the item's (fit_turns drops the oldest pairs), so its user
        # turns are the last n_user of the item's and take the last n_user reasonings
        n_user = sum(t.role == "user" for t in history)
        private = ([""] * n_user + list(reasoning))[-n_user:] if n_user else []
        return UserState(scenario=scenario, system_prompt=sim.system_prompt_fn(scenario),
                         history=history, private=private, turns=n_user,
                         turn_flags=[[] for _ in range(n_user)], goal_overlap=[0.0] * n_user)

    pairs = []
    for item in items:
        history = clip_history(item.history, max_user_chars, max_agent_chars)
        if count_tokens is not None:
            history = fit_turns(
                lambda h, s=item.scenario, r=item.history_reasoning: build_view(state_of(s, h, r)),
                history, count_tokens, max_prompt_tokens)
        if item.kind == NEXT and history and history[-1].role == "assistant":
            pairs.append((history[-1].text,
                          state_of(item.scenario, history[:-1], item.history_reasoning)))
        else:
            pairs.append((None, state_of(item.scenario, [])))
    out: list[Generated] = []
    with tqdm(total=len(pairs), desc=desc, unit="turn") as bar:
        for start in range(0, len(pairs), chunk_size):
            out += [runtime_generated(reply, state, sim.guards)
                    for reply, state in sim.next_messages(pairs[start:start + chunk_size])]
            bar.update(len(pairs[start:start + chunk_size]))
    return out


def sampler_token_counter(tokenizer) -> Callable[[Messages], int]:
    """Prompt length in tokens of a chat as :meth:`TokenSampler.chat` renders it."""
    from mimesis.models.engine.tokens import encode, render

    return lambda messages: len(encode(tokenizer, render(tokenizer, messages,
                                                         add_generation_prompt=True)))


def simulate_local(model, tokenizer, prompt_style: str, items: Sequence[EvalItem], params,
                   desc: str, prefill: str | None = None) -> list[Generated]:
    """:func:`simulate_runtime` with a local model behind the RL sampler (``TokenSampler``,
    seeded with ``params.seed``): the generation path of train_agent's frozen user.

    ``params``: a :class:`~mimesis.eval.realism.run.RealismParams` (sampling, budgets, batch
    size). ``prefill``: written in front of each turn (default: the trained simulator's
    :data:`~mimesis.format.TURN_PREFILL` for ``prompt_style`` ``user_simulator``, none for a
    prompted model; a frozen folder's own is :func:`~mimesis.simulator.frozen.turn_prefill`)."""
    from mimesis.format import TURN_PREFILL
    from mimesis.models.engine.sampling import SamplingParams, TokenSampler

    # the trained simulator is sampled as its runtime samples it (its turns open with <think>);
    # the prompted baseline was never taught that contract, so it gets no prefill
    if prefill is None:
        prefill = TURN_PREFILL if prompt_style == "user_simulator" else ""
    sampler = TokenSampler(model, tokenizer, SamplingParams(
        temperature=params.temperature, top_p=params.top_p, max_new_tokens=params.max_new_tokens,
        batch_size=params.batch_size, prefill=prefill), seed=params.seed)
    return simulate_runtime(sampler.chat, prompt_style, items, sampler_token_counter(tokenizer),
                            params.max_prompt_tokens, params.max_user_chars,
                            params.max_agent_chars, params.batch_size * 2, desc)


def behaviors_of(history: Sequence[Turn], text: str, label_fn: LabelFn) -> tuple[str, ...]:
    """Behaviours the shared labeler sees in ``text`` written after ``history``."""
    if not text.strip():
        return ()
    turns = [*history, Turn(role="user", text=text)]
    return tuple(label_fn(turns, len(history)))


def simulated_records(items: Sequence[EvalItem], outputs: Sequence[Generated],
                      label_fn: LabelFn, max_turn_chars: int = 0) -> list[TurnRecord]:
    """Records of a simulator's turns (labelled in their real context), utterances cut to
    ``max_turn_chars`` (0 = no cut) exactly as :func:`real_records` cuts the real ones."""
    out = []
    for item, g in zip(items, outputs, strict=True):
        text = "" if g.ended else clip(g.utterance, max_turn_chars)
        out.append(TurnRecord(item, text, g.ended,
                              () if g.ended else behaviors_of(item.history, text, label_fn),
                              reasoning=g.reasoning))
    return out


def real_records(items: Sequence[EvalItem], label_fn: LabelFn,
                 max_turn_chars: int = 0) -> list[TurnRecord]:
    """Records of what the real users wrote at the positions (ended positions have none), cut
    to ``max_turn_chars`` (0 = no cut): the same cap as the simulated turns, so no feature
    (length, embeddings, style) separates the rows by the cap alone."""
    out = []
    for item in items:
        if item.real_text is not None:
            text = clip(item.real_text, max_turn_chars)
            out.append(TurnRecord(item, text, False, behaviors_of(item.history, text, label_fn)))
    return out


def generation_rows(name: str, model_id: str, items: Sequence[EvalItem],
                    outputs: Sequence[Generated],
                    records: Sequence[TurnRecord]) -> list[dict]:
    """Audit rows for ``generations.jsonl``: position, real turn, simulator output with its
    private reasoning in its own field, flags and labels; ``raw`` is the draw that was used,
    ``first_raw`` the position's first (they differ where a guard drew the turn again)."""
    return [{"simulator": name, "model": model_id, "conv_id": it.conv_id, "half": it.half,
             "kind": it.kind, "turn_index": it.turn_index, "utterance": g.utterance,
             "reasoning": g.reasoning, "ended": g.ended, "flags": list(g.flags), "raw": g.raw,
             "first_raw": g.first_raw,
             "behaviors": list(r.behaviors), "real_text": it.real_text,
             "real_ended": it.real_ended, "real_labels": list(it.real_labels)}
            for it, g, r in zip(items, outputs, records, strict=True)]
