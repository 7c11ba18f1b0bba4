"""Plain type names in ``--help``: ``INTEGER``, ``PATH``, ``TEXT``; none for on/off flags.

typer 0.29 prints Python annotations (``<bool>``, ``<list[str]>``) in the help's type
column and offers no setting to change it, so the one method that renders that column is
wrapped here, once, when the app is built.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import typer.core

#: typer's label (inside ``<...>``) -> the name a user reads
NAMES = {
    "int": "INTEGER",
    "float": "FLOAT",
    "str": "TEXT",
    "bool": "BOOLEAN",
    "path": "PATH",
    "file": "FILE",
    "directory": "DIR",
    "int range": "INTEGER RANGE",
    "float range": "FLOAT RANGE",
}


def plain_type(label: str | None) -> str | None:
    """``<list[str]>...`` -> ``TEXT...``, ``<int>`` -> ``INTEGER``; other text unchanged."""
    if label is None:
        return None
    m = re.fullmatch(r"<(?:list\[)?([^\]>]+)\]?>(\.\.\.)?", label)
    if m is None:
        return label
    inner = m.group(1)
    return NAMES.get(inner.lower(), inner.upper()) + (m.group(2) or "")


def _wrap(original: Callable[[Any, Any], str | None]) -> Callable[[Any, Any], str | None]:
    def display_type_rich(self: Any, ctx: Any) -> str | None:
        if getattr(self, "is_flag", False) and self.metavar is None:
            return None  # --refine/--no-refine says it all
        return plain_type(original(self, ctx))

    display_type_rich.__wrapped__ = original  # type: ignore[attr-defined]
    return display_type_rich


def install() -> None:
    """Idempotent: wrap typer's type column renderer for options and arguments."""
    for cls in (typer.core.TyperOption, typer.core.TyperArgument):
        current = getattr(cls, "display_type_rich", None)
        if current is None:
            continue  # another typer version: its own labels, nothing to tidy
        if getattr(current, "__wrapped__", None) is None:
            setattr(cls, "display_type_rich", _wrap(current))  # noqa: B010
