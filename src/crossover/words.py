"""How a count reads in a message: ``1 request``, ``2 requests``, never ``1 requests``."""

from __future__ import annotations


def plural(n: float, noun: str, many: str | None = None, fmt: str = "") -> str:
    """``n`` (formatted with ``fmt``) and ``noun``, in the plural unless ``n`` reads as 1
    (``many`` where it is not ``noun`` + ``s``: ``plural(n, "request's", "requests'")``)."""
    text = format(n, fmt)
    return f"{text} {noun if text == '1' else (many or noun + 's')}"


def verb(n: float, one: str, many: str) -> str:
    """The verb that agrees with a count: ``verb(n, "reports", "report")``."""
    return one if n == 1 else many
