"""Helpers shared by command modules: async entry, option parsing, output."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from pydantic import ValidationError

from crossover.errors import UsageError

T = TypeVar("T")


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run on uvloop when it is installed (faster event loop), else asyncio's."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a core dependency on Linux
        return asyncio.run(coro)
    return uvloop.run(coro)


def validation_message(exc: ValidationError) -> str:
    """One line from pydantic's errors, naming the field as a flag."""
    parts = []
    for err in exc.errors():
        loc = ".".join(str(x) for x in err["loc"] if x != "__root__")
        msg = str(err["msg"]).removeprefix("Value error, ")
        parts.append(f"--{loc.replace('_', '-')}: {msg}" if loc else msg)
    return "; ".join(parts)


def validated(schema: type[T], **values: Any) -> T:
    try:
        return schema(**values)
    except ValidationError as exc:
        raise UsageError(validation_message(exc)) from None


def parse_list(text: str, what: str, cast: type[int] | type[float] = int) -> list[Any]:
    try:
        out = [cast(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(
            f"{what}: expected a comma-separated list of numbers, got {text!r}"
        ) from None
    if not out:
        raise UsageError(f"{what}: empty list")
    return out
