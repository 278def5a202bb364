"""Label conversations: rules on every user turn, the annotator in one batch per prompt kind, then
labels combined with their sources into ``LabeledConversation`` records.

Source: ours (the MIMESIS labelling step: behaviours per user turn, private reasoning, scenario).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from itertools import pairwise

from mimesis.behaviors.annotator import Annotator, ConversationView, Produced, TurnView
from mimesis.behaviors.catalog import BEHAVIOR_IDS, TRAIT_IDS
from mimesis.behaviors.learned import PRODUCER as LEARNED
from mimesis.behaviors.learned import TurnInput
from mimesis.behaviors.rules import RuleResult, detect_rules
from mimesis.schemas import Conversation, LabeledConversation, Reject, Scenario, TurnLabel

STAGE = "label"
RULES = "rules"
NONE = "none"
COMBINE_MODES = ("mixed", "learned", "union", "rules", "annotator")
LearnedSets = dict[tuple[int, int], set[str]]  # (conversation k, turn i) -> learned labels
# Traits that describe a habit need to show in a share of the turns; the others once suffice.
HABIT_TRAITS = ("terse", "typo_rich")


class LabelReject(ValueError):
    """A conversation that cannot be labelled; ``reason`` is its reject code."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail


@dataclass
class Prepared:
    """A conversation cut to its labelled part, with rule labels per user turn index."""

    conv: Conversation
    ended: bool
    rules: dict[int, RuleResult]


@dataclass
class Outcome:
    """Result of :func:`label_conversations`."""

    labelled: dict[str, list[LabeledConversation]] = field(default_factory=dict)
    rejects: list[Reject] = field(default_factory=list)
    producers: dict[str, Counter] = field(default_factory=dict)  # kind -> producer -> count
    truncated: Counter = field(default_factory=Counter)  # split -> conversations cut


def prepare(conv: Conversation, max_user_turns: int) -> Prepared:
    """Check turn order, keep the first ``max_user_turns`` user turns (0 = all) with the agent
    reply after the last one, and run the rules on every kept user turn.

    ``ended`` is True only when nothing was cut and the last turn is the agent's: then the real
    user stopped right after it.

    Raises:
        LabelReject: no turns, agent first, or roles not alternating.
    """
    turns = conv.turns
    if not turns:
        raise LabelReject("no_turns")
    if turns[0].role != "user":
        raise LabelReject("assistant_first")
    if any(a.role == b.role for a, b in pairwise(turns)):
        raise LabelReject("roles_not_alternating")
    cut = len(turns)
    if max_user_turns > 0 and len(conv.user_turns()) > max_user_turns:
        cut = 2 * max_user_turns  # alternating, user first: N user turns + N replies
    kept = conv.model_copy(update={"turns": turns[:cut]})
    ended = cut == len(turns) and turns[-1].role == "assistant"
    rules = {i: detect_rules(kept.turns, i) for i, _ in kept.user_turns()}
    return Prepared(kept, ended, rules)


def combine(rule: RuleResult, annotated: Sequence[str] | None, producer: str,
            mode: str = "union", learned: set[str] | None = None,
            rule_traits: Collection[str] = (), rule_behaviors: Collection[str] = ()
            ) -> tuple[list[str], list[str], dict[str, list[str]]]:
    """Behaviours, traits and per-label sources of one turn.

    Args:
        rule: The rule labels.
        annotated: The annotator's behaviour ids, or ``None`` when it gave none.
        producer: The annotator's producer id (``annotator:<backend>:<model>``).
        mode: ``mixed`` (behaviours from the learned labeller, which reads the rule hits as
            features, plus the annotator's behaviour ids when it gives any; traits as
            ``learned`` except those in ``rule_traits``, taken from the rules: each trait goes
            to the labeller better on it; cross-validated on the hand-labelled set the learned
            behaviours are far more precise than the rules'),
            ``learned`` (the learned labeller's behaviours and traits; ``thanks_and_leave``,
            which it has too few examples to learn, from the rules), ``union`` (rules or
            annotator), ``rules`` or ``annotator`` (one source's behaviours; traits from rules).
        learned: The learned labeller's labels (required in ``mixed`` and ``learned`` modes).
        rule_traits: ``mixed`` mode: traits taken from the rules rather than the learned
            labeller (``quality.Quality.rule_traits``, chosen on the dev part).
        rule_behaviors: ``mixed`` mode: behaviours taken from the rules rather than the
            learned labeller (``quality.Quality.rule_behaviors``, chosen on population-like
            development turns outside the packaged set's dev part, where the rules were
            tuned).

    Returns:
        ``(behaviors, traits, sources)``, labels in catalogue order; ``sources[label]`` lists
        every producer that assigned a kept label.
    """
    if mode not in COMBINE_MODES:
        raise ValueError(f"combine mode {mode!r} not in {COMBINE_MODES}")
    if mode == "learned":
        return _combine_learned(rule, learned)
    if mode == "mixed":  # each label group from the labeller measured best on it
        learned_behaviors, traits, learned_sources = _combine_learned(rule, learned)
        from_model = set(annotated or ())
        taken = set(rule_behaviors) & set(rule.behaviors)
        learned_kept = {b for b in learned_behaviors if b not in rule_behaviors}
        behaviors = [b for b in BEHAVIOR_IDS if b in learned_kept | taken | from_model]
        sources = {b: [p for p, got in ((LEARNED, learned_kept), (RULES, taken),
                                        (producer, from_model)) if b in got]
                   for b in behaviors}
        learned_sources.update({t: [RULES] for t in rule_traits if t in rule.traits})
        traits = [t for t in TRAIT_IDS if (t in rule.traits if t in rule_traits else t in traits)]
        return behaviors, traits, {**sources, **{t: learned_sources[t] for t in traits}}
    from_rules, from_model = set(rule.behaviors), set(annotated or ())
    keep = {"union": from_rules | from_model, "rules": from_rules, "annotator": from_model}[mode]
    behaviors = [b for b in BEHAVIOR_IDS if b in keep]
    sources = {b: [p for p, got in ((RULES, from_rules), (producer, from_model)) if b in got]
               for b in behaviors}
    traits = [t for t in TRAIT_IDS if t in rule.traits]
    sources.update({t: [RULES] for t in traits})
    return behaviors, traits, sources


def _combine_learned(rule: RuleResult, learned: set[str] | None
                     ) -> tuple[list[str], list[str], dict[str, list[str]]]:
    if learned is None:
        raise ValueError("combine mode 'learned' needs the learned labeller's labels")
    behaviors = [b for b in BEHAVIOR_IDS if b in learned]
    from_rules = {"thanks_and_leave"} & set(rule.traits)
    traits = [t for t in TRAIT_IDS if t in learned or t in from_rules]
    sources = {x: [LEARNED] for x in behaviors}
    sources.update({t: [LEARNED] if t in learned else [RULES] for t in traits})
    return behaviors, traits, sources


def scenario_traits(labels: Sequence[TurnLabel], min_share: float) -> list[str]:
    """Traits for the scenario: habits (terse, typo_rich) seen in at least ``min_share`` of the
    user turns; the other traits when seen at all."""
    counts = Counter(t for lab in labels for t in lab.traits)
    n = max(1, len(labels))
    return [t for t in TRAIT_IDS
            if counts[t] and (t not in HABIT_TRAITS or counts[t] / n >= min_share)]


def _views(prep: Prepared) -> list[tuple[int, TurnView]]:
    turns = prep.conv.turns
    return [(i, TurnView(utterance=t.text, prev_agent=turns[i - 1].text if i else "",
                         labels=(*prep.rules[i].behaviors, *prep.rules[i].traits), first=i == 0))
            for i, t in prep.conv.user_turns()]


def _conversation_view(prep: Prepared) -> ConversationView:
    users = prep.conv.user_turns()
    last = prep.rules[users[-1][0]]
    agent = prep.conv.turns[-1].text if prep.conv.turns[-1].role == "assistant" else ""
    return ConversationView(tuple(t.text for _, t in users), agent,
                            (*last.behaviors, *last.traits))


@dataclass
class Annotations:
    """The annotator's outputs for a list of prepared conversations, keyed by conversation
    position ``k`` (and user turn index ``i``)."""

    reasons: dict[tuple[int, int], Produced]
    behaviors: dict[tuple[int, int], list[str]]
    goals: list[Produced | None]
    ends: dict[int, Produced]


def annotate(prepared: Sequence[Prepared], annotator: Annotator,
             reasoning_splits: Sequence[str]) -> Annotations:
    """One annotator call per prompt kind over all conversations: reasoning for the user turns
    of ``reasoning_splits``, behaviour ids for all turns (when the annotator gives them), goals
    for all conversations, end reasoning for ended conversations of ``reasoning_splits``."""
    turns = [(k, i, v) for k, p in enumerate(prepared) for i, v in _views(p)]
    wanted = [(k, i, v) for k, i, v in turns if prepared[k].conv.split in reasoning_splits]
    reasons = annotator.reasonings([v for _, _, v in wanted])
    model_ids = annotator.behaviors([v for _, _, v in turns])
    goals = annotator.goals([_conversation_view(p) for p in prepared])
    enders = [k for k, p in enumerate(prepared) if p.ended and p.conv.split in reasoning_splits]
    ends = annotator.end_reasonings([_conversation_view(prepared[k]) for k in enders])
    return Annotations(
        reasons={(k, i): r for (k, i, _), r in zip(wanted, reasons, strict=True)},
        behaviors=({(k, i): ids for (k, i, _), ids in zip(turns, model_ids, strict=True)}
                   if model_ids is not None else {}),
        goals=goals, ends=dict(zip(enders, ends, strict=True)))


def label_conversations(convs: Sequence[Conversation], annotator: Annotator, *,
                        max_user_turns: int, reasoning_splits: Sequence[str], combine_mode: str,
                        trait_min_share: float,
                        learn: Callable[[list[TurnInput]], list[set[str]]] | None = None,
                        rule_traits: Collection[str] = (),
                        rule_behaviors: Collection[str] = ()) -> Outcome:
    """Label ``convs`` (each with its ``split`` set); every input ends labelled or rejected.

    Conversations are prepared (:func:`prepare`), annotated in one batch per prompt kind
    (:func:`annotate`), labelled by ``learn`` in one batch when given (required in ``learned``
    mode), then assembled (``rule_traits``, ``rule_behaviors``: see :func:`combine`); a
    conversation without an acceptable goal is rejected
    (``goal_not_derivable``).
    """
    out = Outcome()
    prepared: list[Prepared] = []
    for conv in convs:
        try:
            prepared.append(prepare(conv, max_user_turns))
        except LabelReject as exc:
            out.rejects.append(Reject(id=conv.id, stage=STAGE, reason=exc.reason, detail=exc.detail))
            continue
        out.truncated[conv.split or "none"] += len(prepared[-1].conv.turns) < len(conv.turns)
    notes = annotate(prepared, annotator, reasoning_splits)
    learned = learned_labels(prepared, learn) if learn is not None else {}
    for k, prep in enumerate(prepared):
        goal = notes.goals[k]
        if goal is None:
            out.rejects.append(Reject(id=prep.conv.id, stage=STAGE, reason="goal_not_derivable",
                                      detail="every goal candidate copied the first user message"))
            continue
        labels = [_turn_label(i, prep.rules[i], notes.behaviors.get((k, i)),
                              notes.reasons.get((k, i)), annotator.producer, combine_mode,
                              learned.get((k, i)), rule_traits, rule_behaviors)
                  for i, _ in prep.conv.user_turns()]
        end = notes.ends.get(k, Produced("", NONE))
        record = _record(prep, labels, goal, end, trait_min_share)
        out.labelled.setdefault(record.split or "none", []).append(record)
        _count(out.producers, labels, goal, end)
    return out


def learned_labels(prepared: Sequence[Prepared],
                   learn: Callable[[list[TurnInput]], list[set[str]]]) -> LearnedSets:
    """The learned labeller's labels for every user turn, from one batched call."""
    keys, items = [], []
    for k, prep in enumerate(prepared):
        turns = prep.conv.turns
        for i, turn in prep.conv.user_turns():
            keys.append((k, i))
            items.append(TurnInput(turn.text, turns[i - 1].text if i >= 1 else "",
                                   turns[i - 2].text if i >= 2 else "", prep.rules[i]))
    return dict(zip(keys, learn(items), strict=True))


def _turn_label(index: int, rule: RuleResult, model_ids: list[str] | None,
                reasoning: Produced | None, producer: str, mode: str,
                learned: set[str] | None, rule_traits: Collection[str] = (),
                rule_behaviors: Collection[str] = ()) -> TurnLabel:
    behaviors, traits, sources = combine(rule, model_ids, producer, mode, learned, rule_traits,
                                         rule_behaviors)
    reasoning = reasoning or Produced("", NONE)
    return TurnLabel(turn_index=index, behaviors=behaviors, traits=traits, sources=sources,
                     reasoning=reasoning.text, reasoning_annotator=reasoning.producer)


def _record(prep: Prepared, labels: list[TurnLabel], goal: Produced, end: Produced,
            trait_min_share: float) -> LabeledConversation:
    seen = {b for lab in labels for b in lab.behaviors}
    scenario = Scenario(goal=goal.text, behaviors=[b for b in BEHAVIOR_IDS if b in seen],
                        traits=scenario_traits(labels, trait_min_share), annotator=goal.producer)
    return LabeledConversation(**prep.conv.model_dump(), scenario=scenario, labels=labels,
                               end_reasoning=end.text, end_reasoning_annotator=end.producer,
                               ended=prep.ended)


def _count(producers: dict[str, Counter], labels: list[TurnLabel], goal: Produced,
           end: Produced) -> None:
    producers.setdefault("reasoning", Counter()).update(lab.reasoning_annotator for lab in labels)
    producers.setdefault("labels", Counter()).update(
        p for lab in labels for ps in lab.sources.values() for p in ps)
    producers.setdefault("goal", Counter())[goal.producer] += 1
    producers.setdefault("end_reasoning", Counter())[end.producer] += 1
