"""Plain names in ``--help``: ``INTEGER``, ``PATH``, ``TEXT``; none for on/off flags;
arguments as ``DB`` (not typer's ``{db}``); a range as ``at least 1`` (not ``[x>=1]``).

typer 0.29 prints Python annotations (``<bool>``, ``<list[str]>``) in the help's type
column, a required argument as ``{name}`` in the usage line and a range as ``x>=1``, and
offers no setting to change them, so the methods that render those are wrapped here,
once, when the app is built (each only where this typer has it).
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
    "int range": "INTEGER",
    "float range": "FLOAT",
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


def plain_range(text: str | None) -> str | None:
    """``x>=1`` -> ``at least 1``, ``x<=9`` -> ``at most 9``, ``1<=x<=9`` -> ``1 to 9``."""
    if text is None:
        return None
    m = re.fullmatch(r"x>=(\S+)", text)
    if m:
        return f"at least {m.group(1)}"
    m = re.fullmatch(r"x<=(\S+)", text)
    if m:
        return f"at most {m.group(1)}"
    m = re.fullmatch(r"(\S+)<=x<=(\S+)", text)
    return f"{m.group(1)} to {m.group(2)}" if m else text


def _usage_name(self: Any) -> str:
    """An argument in the usage line as click writes it: ``DB``, ``[DB]``, ``DB...``."""
    name = str(self.metavar or self.name).upper()
    if not self.required:
        name = f"[{name}]"
    return name + ("..." if self.nargs != 1 else "")


def _shown_name(self: Any) -> str:
    """An argument in the help's Arguments list: ``DB`` as in the usage line."""
    name = str(self.metavar or self.name).upper()
    return name + ("..." if self.nargs != 1 and self.metavar is None else "")


def _wrap_range(original: Callable[[Any], str | None]) -> Callable[[Any], str | None]:
    def number_range(self: Any) -> str | None:
        return plain_range(original(self))

    number_range.__wrapped__ = original  # type: ignore[attr-defined]
    return number_range


def install() -> None:
    """Idempotent: wrap typer's type column, usage name and range renderers."""
    for cls in (typer.core.TyperOption, typer.core.TyperArgument):
        current = getattr(cls, "display_type_rich", None)
        if current is not None and getattr(current, "__wrapped__", None) is None:
            setattr(cls, "display_type_rich", _wrap(current))  # noqa: B010
        ranged = getattr(cls, "_get_number_range_help_str", None)
        if ranged is not None and getattr(ranged, "__wrapped__", None) is None:
            setattr(cls, "_get_number_range_help_str", _wrap_range(ranged))  # noqa: B010
    shown = getattr(typer.core.TyperArgument, "_rich_display_name", None)
    if shown is not None and getattr(shown, "__wrapped__", None) is None:
        _shown_name.__wrapped__ = shown  # type: ignore[attr-defined]
        setattr(typer.core.TyperArgument, "_rich_display_name", _shown_name)  # noqa: B010
    usage = getattr(typer.core.TyperArgument, "_usage_display_name", None)
    if usage is not None and getattr(usage, "__wrapped__", None) is None:
        _usage_name.__wrapped__ = usage  # type: ignore[attr-defined]
        setattr(typer.core.TyperArgument, "_usage_display_name", _usage_name)  # noqa: B010
