"""Small text helpers shared by labelling, the user simulator and the evaluation."""


def clip(text: str, max_chars: int) -> str:
    """Cut ``text`` to ``max_chars`` at a word boundary, marking the cut with ``[…]``."""
    if max_chars <= 0 or len(text) <= max_chars:
        return text
    cut = text[:max_chars].rsplit(" ", 1)[0]
    return cut + " […]"
