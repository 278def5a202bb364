"""Deterministic behaviour checks: regex, lexicon and context rules for B1..B13 and the traits.

``detect_rules(turns, index)`` labels one user turn from its text and the turns before it. It is
pure and fast (regular expressions only), so it runs on every real turn in the ``label`` stage
and on simulated turns in ``evaluate_user`` (behaviour-frequency divergence).

Source: ours, after the MIMESIS paper's deterministic behaviour checks (arXiv 2610.09484) and the
definitions in ``docs/behaviors.md``. The rules fire only on explicit wording, so recall is low
for behaviours that are mostly private (B1, B5) or need world knowledge (B8's false facts); the
annotator covers those.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from mimesis.behaviors import lexicon as lx
from mimesis.behaviors.traits import CODE_LINE, detect_traits, is_pasted
from mimesis.schemas import Turn

LOW_SIGNAL_MAX_WORDS = 10  # B9: longer complaints usually carry a usable correction
STACKING_MAX_WORDS = 60  # B7: longer turns are specs or pasted cases, judged by B12 instead
GOALPOST_MAX_WORDS = 60  # B2 "it must ..." cues: longer turns are fresh specs
REVISION_HEAD_CHARS = 300  # B2 edit requests open the turn
OVERLOAD_ITEMS = 5  # B12: list items typed by the user (constraints or asks)


@dataclass(frozen=True)
class RuleResult:
    """Labels the rules assign to one user turn (catalog order, no duplicates)."""

    behaviors: list[str] = field(default_factory=list)
    traits: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class TurnContext:
    """One user turn seen with what came before it.

    Attributes:
        text: The user turn.
        own: The user's own words (code fences and long pasted tails removed).
        prev_agent: The agent reply right before the turn ("" for an opening turn).
        earlier_user: Earlier user turns, oldest first.
        earlier_agent: Earlier agent replies, oldest first.
    """

    text: str
    own: str
    prev_agent: str
    earlier_user: list[str]
    earlier_agent: list[str]


def _agent_asks(reply: str) -> bool:
    """True when an agent reply asks the user for missing information: a question sentence with a
    clarifying cue, or "please provide/specify…", near its start or end (closing offers such as
    "let me know if…" do not count)."""
    parts = lx.sentences(reply[:400]) + lx.sentences(reply[-400:])
    return any(
        ((s.endswith("?") and lx.CLARIFYING_QUESTION.search(s)) or lx.INFO_REQUEST.search(s))
        and not lx.CLOSING_OFFER.search(s)
        for s in parts
    )


def _statements(text: str) -> str:
    """The sentences of ``text`` that are not questions."""
    return " ".join(s for s in lx.sentences(text) if not s.endswith("?"))


def _refused(reply: str) -> bool:
    return bool(lx.REFUSAL.search(reply[:500]))


def hidden_evaluation_criteria(c: TurnContext) -> bool:
    """B1: rejects an answer by a standard ("too formal", "should have") absent from earlier
    requests. Mostly private in real data, so the rule sees only the explicit cases."""
    m = lx.HIDDEN_CRITERION.search(c.own)
    if not c.prev_agent or not m:
        return False
    criterion = lx.words(m.group(0))[-1]
    return all(criterion not in lx.words(u) for u in c.earlier_user)


def incremental_goalpost_shifting(c: TurnContext) -> bool:
    """B2: after an agent reply, asks to edit what it delivered ("rewrite only the third point",
    "can you ad a channel", "make it shorter", "... instead") or adds or tightens a requirement
    ("also add…", "it must…"; in turns of at most ``GOALPOST_MAX_WORDS`` words, as longer ones
    are fresh specs). "Continue"/"the rest of" asks for more of the same, not a change."""
    head = c.own[:REVISION_HEAD_CHARS]
    if not c.prev_agent or lx.MORE_OF_THE_SAME.search(head):
        return False
    if lx.REVISION_HEAD.search(head):
        return True
    if any(lx.REVISION_CUE.search(s) and not lx.FACT_QUESTION.search(s)
           for s in lx.sentences(head)):
        return True
    return len(lx.words(c.own)) <= GOALPOST_MAX_WORDS and bool(lx.GOALPOST.search(c.own))


def clarification_noncooperation(c: TurnContext) -> bool:
    """B3: the agent asked a clarifying question and the user dodges it ("just pick one")."""
    return _agent_asks(c.prev_agent) and bool(lx.NONCOOPERATION.search(c.own))


def infeasibility_persistence(c: TurnContext) -> bool:
    """B4: the agent said it cannot or may not, and the user asks again (insists, or repeats the
    refused request's content words)."""
    if not _refused(c.prev_agent) or not c.earlier_user:
        return False
    if lx.INSIST.search(c.own):
        return True
    shared = lx.content_stems(c.own) & lx.content_stems(c.earlier_user[-1][:600])
    return len(shared) >= 2


def underspecified_then_blames(c: TurnContext) -> bool:
    """B5: blames the agent for not inferring what was never said ("obviously I meant…"). Usually
    private, so the rule sees only explicit blame."""
    return bool(c.prev_agent) and bool(lx.BLAME_UNDERSPECIFIED.search(c.own))


def abrupt_intent_switching(c: TurnContext) -> bool:
    """B6: an explicit switch to another request ("anyway, different question…", "forget that,
    how do I…") after an earlier exchange. Silent topic changes are left to the annotator: in real
    logs a new topic usually follows a resolved one or answers the agent's open question."""
    return bool(c.prev_agent) and bool(c.earlier_user) and bool(lx.SWITCH.search(c.own))


def artificial_constraint_stacking(c: TurnContext) -> bool:
    """B7: after a proposal, rules out something the proposal relies on ("no apps" after an app
    was suggested), or stacks three or more restrictions in one turn."""
    statements = _statements(c.own)
    if not c.prev_agent or len(lx.words(c.own)) > STACKING_MAX_WORDS:
        return False
    banned = [m.group(1).lower() for m in lx.RESTRICTION.finditer(statements)]
    banned = [w for w in banned if w not in lx.RESTRICTION_NOISE and w not in lx.STOPWORDS]
    proposal = lx.content_stems(c.prev_agent)
    if any(lx.stem(w) in proposal for w in banned):
        return True
    return len(banned) + len(lx.ONLY_CONSTRAINT.findall(statements)) >= 3


def fabricated_or_false_premise(c: TurnContext) -> bool:
    """B8: quotes the agent ("you said…", "as we discussed…") with content the agent never wrote,
    or refers to an earlier exchange that does not exist. False world facts are out of reach."""
    said = set().union(*(lx.content_stems(a) for a in c.earlier_agent)) if c.earlier_agent else set()
    for m in lx.MISQUOTE_CUE.finditer(c.own):
        if not c.earlier_agent:
            return True
        claim = [lx.stem(w) for w in lx.content_words(m.group(1))][:6]
        if claim and sum(s in said for s in claim) / len(claim) < 0.5:
            return True
    return False


def impatient_low_signal_pressure(c: TurnContext) -> bool:
    """B9: a short complaint or urgency ("not what i asked", "faster??") with no usable
    correction (no quote, code or details)."""
    short = len(lx.words(c.own)) <= LOW_SIGNAL_MAX_WORDS and not any(ch in c.own for ch in "\"`:")
    return short and bool(lx.IMPATIENCE.search(c.own))


def unresolved_thread_abandonment(c: TurnContext) -> bool:
    """B10: drops the thread ("never mind, I'll do it myself") without a new request (a new
    request after "forget it" is B6)."""
    if not c.prev_agent or not lx.ABANDON.search(c.own):
        return False
    return "?" not in c.own and not lx.REQUEST_VERB.search(c.own.lower())


def self_contradiction(c: TurnContext) -> bool:
    """B11: a requirement that conflicts with an earlier one (another number for the same unit,
    "with X" after "no X", "formal" after "casual") with no sign of a deliberate change."""
    now = _statements(c.own)
    if not c.earlier_user or not now or lx.CHANGE_ACK.search(c.own):
        return False
    earlier = " \n ".join(_statements(lx.own_words(u)) for u in c.earlier_user)
    numbers_now = {u.lower(): n for n, u in lx.NUMBER_UNIT.findall(now)}
    numbers_then = {u.lower(): n for n, u in lx.NUMBER_UNIT.findall(earlier)}
    if any(numbers_then.get(u, n) != n for u, n in numbers_now.items()):
        return True
    if _polarity_flip(now, earlier) or _polarity_flip(earlier, now):
        return True
    style_now = {w.lower() for w in lx.STYLE_REQUIREMENT.findall(now)}
    style_then = {w.lower() for w in lx.STYLE_REQUIREMENT.findall(earlier)}
    return any((style_now & a and style_then & b) or (style_now & b and style_then & a)
               for a, b in lx.ANTONYMS)


def _polarity_flip(negative_text: str, positive_text: str) -> bool:
    banned = {lx.stem(m.group(1).lower()) for m in lx.RESTRICTION.finditer(negative_text)}
    wanted = {lx.stem(m.group(1).lower()) for m in lx.ENDORSE.finditer(positive_text)}
    noise = {lx.stem(w) for w in lx.RESTRICTION_NOISE | lx.STOPWORDS}
    return bool((banned & wanted) - noise)


def request_overloading(c: TurnContext) -> bool:
    """B12: many asks in one message: three or more questions, four or more questions plus
    imperative requests, six or more asks and constraints together, five or more typed list
    items or "[...]" slots, three "Please ..." instructions, or a pasted exam (12+ option
    lines a.-d.)."""
    # With pasted material only the request around it is the user's own; its head suffices.
    own = lx.own_words(c.text, head_chars=400 if is_pasted(c.text) else 800)
    questions = len([q for q in own.split("?")[:-1] if len(lx.words(q)) >= 2])
    requests = len(lx.REQUEST_VERB.findall(own.lower()))
    constraints = len(lx.CONSTRAINT_MARK.findall(own))
    if questions >= 3 or questions + requests >= 4 or questions + requests + constraints >= 6:
        return True
    typed = lx.own_words(c.text, head_chars=1500)
    code = "```" in c.text or len(CODE_LINE.findall(c.text)) >= 3
    return ((len(lx.LIST_ITEM.findall(typed)) >= OVERLOAD_ITEMS and not code)
            or len(lx.CHOICE_OPTION.findall(c.text)) >= 12
            or len(lx.PLEASE_INSTRUCTION.findall(typed)) >= 3
            or len(lx.BRACKET_SLOT.findall(typed)) >= OVERLOAD_ITEMS)


def belittling_or_entitled_pressure(c: TurnContext) -> bool:
    """B13: insults or entitled pressure ("are you stupid", "do your job", "I'm paying")."""
    return bool(lx.BELITTLING.search(c.own))


DETECTORS: dict[str, Callable[[TurnContext], bool]] = {
    "B1": hidden_evaluation_criteria,
    "B2": incremental_goalpost_shifting,
    "B3": clarification_noncooperation,
    "B4": infeasibility_persistence,
    "B5": underspecified_then_blames,
    "B6": abrupt_intent_switching,
    "B7": artificial_constraint_stacking,
    "B8": fabricated_or_false_premise,
    "B9": impatient_low_signal_pressure,
    "B10": unresolved_thread_abandonment,
    "B11": self_contradiction,
    "B12": request_overloading,
    "B13": belittling_or_entitled_pressure,
}


def turn_context(turns: Sequence[Turn], index: int) -> TurnContext:
    """The context of the user turn at ``index``.

    Raises:
        IndexError: ``index`` is out of range.
        ValueError: ``turns[index]`` is not a user turn.
    """
    if not 0 <= index < len(turns):
        raise IndexError(f"turn index {index} out of range for {len(turns)} turns")
    if turns[index].role != "user":
        raise ValueError(f"turn {index} is a {turns[index].role!r} turn, not a user turn")
    before = turns[:index]
    prev_agent = before[-1].text if before and before[-1].role == "assistant" else ""
    return TurnContext(
        text=turns[index].text, own=lx.own_words(turns[index].text), prev_agent=prev_agent,
        earlier_user=[t.text for t in before if t.role == "user"],
        earlier_agent=[t.text for t in before if t.role == "assistant"],
    )


def detect_rules(turns: Sequence[Turn], index: int) -> RuleResult:
    """Behaviours and traits the rules see in the user turn ``turns[index]``.

    Args:
        turns: The conversation so far (real or simulated), user and assistant turns in order;
            turns after ``index`` are ignored.
        index: Position of the user turn to label.

    Returns:
        ``RuleResult`` with behaviour ids (``B1``..``B13``) and trait names, catalogue order.

    Raises:
        IndexError: ``index`` is out of range.
        ValueError: ``turns[index]`` is not a user turn.

    >>> from mimesis.schemas import Turn
    >>> detect_rules([Turn(role="user", text="thx!!")], 0).traits
    ['terse', 'typo_rich', 'thanks_and_leave']
    """
    ctx = turn_context(turns, index)
    behaviors = [bid for bid, detector in DETECTORS.items() if detector(ctx)]
    return RuleResult(behaviors=behaviors, traits=detect_traits(ctx.text))
