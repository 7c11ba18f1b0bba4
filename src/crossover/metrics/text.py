"""How a run summary's figures read in a terminal: a missing value as ``—`` (never 0),
the mark of a percentile the client could have made, the note of counts that rest on
the server's word alone. ``crossover run``'s table (``cli/render``) and a sweep's lines
(``crossover.report.text``) share them."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from crossover.metrics.summary import RunSummary


def _f(x: float | None, fmt: str = ".1f") -> str:
    return "—" if x is None else format(x, fmt)


#: marks a percentile the client's own event-loop lag could have made
CLIENT_MARK = "*"


def client_mark(s: object, path: str) -> str:
    """``*`` where ``path`` (``itl_ms.p50``) is among the summary's ``client_made``."""
    return CLIENT_MARK if path in (getattr(s, "client_made", None) or ()) else ""


def server_word_note(s: RunSummary) -> str:
    """The verdict line's note of the counts that rest on the server's word alone
    (``""`` when every count had an independent witness)."""
    witnesses = getattr(s, "witnesses", None)  # a summary stored before it had them
    alone = getattr(witnesses, "server_word", None)
    if not alone:
        return ""
    return f"   ({' and '.join(alone)} on the server's word alone: no independent witness)"
