"""Fit the simulator's view into the engine's prompt budget without losing what matters.

The view is ``[system, assistant(sim turn 0), user(agent reply 0), …, user(last agent turn)]``
(:func:`~mimesis.simulator.runtime.build_view`). The system prompt holds the hidden goal and
the last agent turn is what the user answers: neither is ever cut. Older exchanges are dropped
first, oldest first, one (simulator turn, agent reply) pair at a time so the roles keep
alternating; a view whose system prompt and last agent turn alone do not fit is refused
(:class:`PromptTooLongError`) instead of being cut from the left by the engine.

Cost: O(log k) renders of recent suffixes of at most about twice the kept part (k: exchanges
kept); the dropped part of a long history is never rendered, so the time per request stays
linear in the history (``benchmarks/serve_long_history.py``).
"""

from __future__ import annotations

from collections.abc import Callable

from mimesis.schemas import Messages


class PromptTooLongError(ValueError):
    """The system prompt and the last agent turn alone exceed the prompt budget."""


def fit_view(messages: Messages, count_tokens: Callable[[Messages], int],
             budget: int | None) -> Messages:
    """``messages`` with the oldest exchanges dropped until ``count_tokens`` ≤ ``budget``.

    Args:
        messages: A simulator view (system first).
        count_tokens: Tokens of the rendered prompt of a message list.
        budget: Most prompt tokens (``None``: no limit, ``messages`` unchanged).

    Returns:
        The fitted view: ``messages[0]``, then the most recent exchanges that fit, then the last
        message; the same list when it fits already.

    Raises:
        PromptTooLongError: even ``[system, last message]`` has more than ``budget`` tokens.
    """
    if budget is None:
        return messages
    head, body = messages[:1], messages[1:]
    # Drop whole exchanges: the kept part starts at a simulator turn, as in training views
    # (cut 0 keeps everything).
    cuts = [0] + [c for c in range(1, len(body) - 1) if body[c]["role"] == "assistant"]
    kept = _leftmost_fitting(cuts, lambda c: count_tokens(head + body[c:]) <= budget)
    if kept == 0:
        return messages
    if kept is not None:
        return head + body[kept:]
    minimal = head + body[-1:]
    if count_tokens(minimal) <= budget:
        return minimal
    raise PromptTooLongError(f"the system prompt and the last agent message take "
                             f"{count_tokens(minimal)} tokens; this server's prompt budget is "
                             f"{budget}")


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
