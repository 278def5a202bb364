"""Let a simulator write the user turn at every evaluation position, and label every turn.

Both simulators read the runtime's own view (:func:`mimesis.simulator.runtime.build_view`: system
prompt, role-flipped history); only the system prompt differs (trained: ``user_simulator``,
baseline: ``prompted_user``). Real history user turns carry empty reasoning (held-out
conversations have no annotated reasoning). Outputs are parsed with the runtime's parser, but the
runtime's guards (resampling, deferred ends) are *not* applied: the table measures the model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mimesis.eval.protocol import EvalItem, clip_history, fit_history
from mimesis.eval.realism import TurnRecord
from mimesis.models.generation import ChatGenerator, GenerationConfig
from mimesis.schemas import Messages, Scenario, Turn
from mimesis.simulator.baseline import render_prompted_user_messages
from mimesis.simulator.parsing import parse_turn
from mimesis.simulator.prompts import render_system_prompt
from mimesis.simulator.roles import clip
from mimesis.simulator.runtime import UserState, build_view

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


def prompts_for(items: Sequence[EvalItem], view: ViewFn, count_tokens: Callable[[Messages], int],
                max_prompt_tokens: int, max_user_chars: int,
                max_agent_chars: int) -> list[Messages]:
    """One prompt per item: clipped real history, oldest turns dropped to fit the token budget."""
    out = []
    for item in items:
        history = clip_history(item.history, max_user_chars, max_agent_chars)
        out.append(fit_history(lambda h, s=item.scenario: view(s, h), history, count_tokens,
                               max_prompt_tokens))
    return out


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


def simulate_fn(generate_fn: Callable[[Sequence[Messages]], list[str]], view: ViewFn,
                items: Sequence[EvalItem], max_user_chars: int, max_agent_chars: int,
                batch_size: int, desc: str) -> list[Generated]:
    """Generate and parse one user turn per item with any ``generate_fn`` (batch of chats ->
    raw texts: an endpoint, a local model), ``batch_size`` chats per call, with a progress bar.
    History is clipped by characters only (no token budget: the endpoint's own limit holds).

    Raises:
        ValueError: ``generate_fn`` returned another number of texts than chats.
    """
    from tqdm.auto import tqdm

    prompts = prompts_for(items, view, lambda m: 0, 0, max_user_chars, max_agent_chars)
    raws: list[str] = []
    with tqdm(total=len(prompts), desc=desc, unit="turn") as bar:
        for start in range(0, len(prompts), batch_size):
            chunk = prompts[start:start + batch_size]
            texts = list(generate_fn(chunk))
            if len(texts) != len(chunk):
                raise ValueError(f"{desc}: {len(texts)} texts for {len(chunk)} chats")
            raws += texts
            bar.update(len(chunk))
    return parse_all(raws)


def simulate(generator: ChatGenerator, view: ViewFn, items: Sequence[EvalItem], seed: int,
             max_user_chars: int, max_agent_chars: int, desc: str) -> list[Generated]:
    """Generate and parse one user turn per item with ``generator`` (one batched pass).

    Prompts are fitted to ``generator.config.max_prompt_tokens`` by dropping the oldest history
    (never the system prompt).
    """
    tok = generator.tokenizer

    def count_tokens(messages: Messages) -> int:
        return len(tok(generator.render(messages), add_special_tokens=False)["input_ids"])

    prompts = prompts_for(items, view, count_tokens, generator.config.max_prompt_tokens,
                          max_user_chars, max_agent_chars)
    return parse_all(generator.generate(prompts, desc=desc, seed=seed))


def make_generator(model, tokenizer, name: str, max_new_tokens: int, temperature: float,
                   top_p: float, batch_size: int, max_prompt_tokens: int) -> ChatGenerator:
    """A ``ChatGenerator`` with the evaluation's sampling settings."""
    config = GenerationConfig(max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p,
                              batch_size=batch_size, max_prompt_tokens=max_prompt_tokens)
    return ChatGenerator(model, tokenizer, config, name=name)


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
    private reasoning in its own field, flags and labels."""
    return [{"simulator": name, "model": model_id, "conv_id": it.conv_id, "half": it.half,
             "kind": it.kind, "turn_index": it.turn_index, "utterance": g.utterance,
             "reasoning": g.reasoning, "ended": g.ended, "flags": list(g.flags), "raw": g.raw,
             "behaviors": list(r.behaviors), "real_text": it.real_text,
             "real_ended": it.real_ended, "real_labels": list(it.real_labels)}
            for it, g, r in zip(items, outputs, records, strict=True)]
