"""Fit the simulator's view into the engine's prompt budget without losing what matters.

The view is ``[system, assistant(sim turn 0), user(agent reply 0), …, user(last agent turn)]``
(:func:`~mimesis.simulator.runtime.build_view`). The system prompt holds the hidden goal and
is never cut; the last agent turn is what the user answers. Older exchanges are dropped first,
oldest first, one (simulator turn, agent reply) pair at a time so the roles keep alternating.
When the system prompt and the last agent turn alone still do not fit, the middle of that turn
is left out (its head and tail kept around :func:`left_out_marker`), as little as fits; only a
view whose system prompt alone (with the marker) does not fit is refused
(:class:`PromptTooLongError`) instead of being cut from the left by the engine.

Cost: O(log k) renders of recent suffixes of at most about twice the kept part (k: exchanges
kept); the dropped part of a long history is never rendered, so the time per request stays
linear in the history (``benchmarks/serve_long_history.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mimesis.schemas import Messages

Counter = Callable[[Messages], int]


class PromptTooLongError(ValueError):
    """The system prompt alone (with the last agent turn shortened to nothing) exceeds the
    prompt budget."""


@dataclass(frozen=True)
class Fit:
    """A view fitted into the prompt budget.

    Attributes:
        messages: The fitted view.
        dropped_messages: Older messages left out (whole exchanges).
        left_out_chars: Characters left out of the middle of the last agent turn (0: whole).
    """

    messages: Messages
    dropped_messages: int = 0
    left_out_chars: int = 0


def left_out_marker(chars: int) -> str:
    """What stands in the middle of a shortened agent turn for its ``chars`` left-out
    characters."""
    return f"[… {chars} characters left out …]"


def shorten_middle(text: str, keep: int) -> str:
    """``text`` with its middle replaced by :func:`left_out_marker`, keeping ``keep`` characters
    (head and tail, about half each); ``text`` itself when it has at most ``keep``.

    >>> shorten_middle("abcdefghij", 4)
    'ab [… 6 characters left out …] ij'
    """
    if keep >= len(text):
        return text
    tail = keep // 2
    return (f"{text[:keep - tail]} {left_out_marker(len(text) - keep)} "
            f"{text[len(text) - tail:]}")


def fit(messages: Messages, count_tokens: Counter, budget: int | None) -> Fit:
    """``messages`` with the oldest exchanges dropped until ``count_tokens`` ≤ ``budget``, and
    the middle of the last agent turn left out when even ``[system, last message]`` is over.

    Args:
        messages: A simulator view (system first).
        count_tokens: Tokens of the rendered prompt of a message list.
        budget: Most prompt tokens (``None``: no limit, ``messages`` unchanged).

    Returns:
        The :class:`Fit`: ``messages[0]``, then the most recent exchanges that fit, then the last
        message (shortened only when it does not fit on its own, to the most characters that
        do); the same list when it fits already.

    Raises:
        PromptTooLongError: ``messages[0]`` with at most the marker after it has more than
            ``budget`` tokens.
    """
    if budget is None:
        return Fit(messages)
    head, body = messages[:1], messages[1:]
    # Drop whole exchanges: the kept part starts at a simulator turn, as in training views
    # (cut 0 keeps everything).
    cuts = [0] + [c for c in range(1, len(body) - 1) if body[c]["role"] == "assistant"]
    kept = _leftmost_fitting(cuts, lambda c: count_tokens(head + body[c:]) <= budget)
    if kept == 0:
        return Fit(messages)
    if kept is not None:
        return Fit(head + body[kept:], dropped_messages=kept)
    minimal = head + body[-1:]
    if count_tokens(minimal) <= budget:
        return Fit(minimal, dropped_messages=len(body) - 1)
    if not body or body[-1]["role"] != "user":  # nothing of the agent's to shorten
        raise PromptTooLongError(f"the system prompt (the scenario) takes {count_tokens(minimal)}"
                                 f" tokens; this server's prompt budget is {budget}")
    return _shortened(head, body, count_tokens, budget)


def _shortened(head: Messages, body: Messages, count_tokens: Counter, budget: int) -> Fit:
    """``[system, last agent turn]`` with the most characters of that turn that fit.

    Bisects the characters kept: O(log n) renders of the two messages (n: the turn's length).
    """
    last = body[-1]
    text = last["content"]

    def view(keep: int) -> Messages:
        return head + [{**last, "content": shorten_middle(text, keep)}]

    bare = count_tokens(view(0))
    if bare > budget:
        raise PromptTooLongError(f"the system prompt (the scenario) takes {bare} tokens with the "
                                 f"agent's last message shortened to nothing; this server's "
                                 f"prompt budget is {budget}")
    good, bad = 0, len(text)  # keeping ``good`` characters fits, keeping ``bad`` does not
    while bad - good > 1:
        mid = (good + bad) // 2
        good, bad = (mid, bad) if count_tokens(view(mid)) <= budget else (good, mid)
    return Fit(view(good), dropped_messages=len(body) - 1, left_out_chars=len(text) - good)


def _leftmost_fitting(cuts: list[int], fits: Callable[[int], bool]) -> int | None:
    """The first cut in ``cuts`` (ascending) for which ``fits``, or ``None``.

    Dropping messages never adds tokens, so ``fits`` is monotone along ``cuts``. Galloping from
    the newest end, then bisecting, renders O(log k) suffixes of at most about twice the kept
    part (k exchanges), instead of the whole history once per dropped exchange (quadratic: a
    20,000-message request held a core for over 40 minutes) or even once (a real tokenizer
    took about 1.4 s for 20,000 short messages). Should a chat template break
    monotonicity, the cut returned still fits; it may keep a little less than it could.
    """
    good, bad = len(cuts), -1  # smallest index known to fit (len: none), largest known not to
    step = 1
    while good - bad > 1:
        probe = max(good - step, bad + 1)
        if not fits(cuts[probe]):
            bad = probe
            break
        good, step = probe, step * 2
    while good - bad > 1:
        mid = (good + bad) // 2
        good, bad = (mid, bad) if fits(cuts[mid]) else (good, mid)
    return cuts[good] if good < len(cuts) else None
