"""Helpers shared by command modules: async entry, option parsing, output."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

from crossover.errors import UsageError, validation_line
from crossover.errors import parse_list as parse_list  # the flags' comma lists
from crossover.errors import parse_names as parse_names
from crossover.files import check_output_file as check_output_file  # python -m tools' too
from crossover.files import write_output as write_output

if TYPE_CHECKING:
    from rich.console import Console

    from crossover.transport import TransportName

T = TypeVar("T")

#: the width of output that goes to a file or a program: no line or table cell is broken
#: or cut at 80 columns, rich's default when it cannot ask a terminal
PIPED_WIDTH = 1000


def console(*, stderr: bool = False, highlight: bool = True) -> Console:
    """A rich console for stdout (or stderr). In a terminal: the terminal's width, text
    lines left to the terminal to wrap (soft wrap: none is broken inside a value). Piped
    or redirected: wide enough that nothing is wrapped or cut (``0.…``), one record per
    line for whatever reads it."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):  # closed or replaced by something odd
        tty = False
    if tty:
        return Console(stderr=stderr, soft_wrap=True, highlight=highlight)
    return Console(stderr=stderr, soft_wrap=True, highlight=highlight, width=PIPED_WIDTH)


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run on uvloop when it is installed (faster event loop), else asyncio's.

    SIGTERM cancels the main task like Ctrl-C does, so ``finally`` blocks run:
    engines are stopped and runs in flight are marked interrupted.
    """

    async def main() -> T:
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        if task is not None:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(signal.SIGTERM, task.cancel)
        return await coro

    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a core dependency on Linux
        return asyncio.run(main())
    return uvloop.run(main())


def default_of(model: type[BaseModel], name: str) -> Any:
    """A flag's default, read from the model field it sets: never restated by hand."""
    return model.model_fields[name].get_default(call_default_factory=True)


def help_of(model: type[BaseModel], name: str, more: str = "", show_default: bool = False) -> str:
    """A flag's help: the description of the model field it sets (capitalized); with
    ``show_default`` its default too, for a flag whose own default is None (a YAML's key
    is kept unless the flag is given), which typer would not show."""
    field = model.model_fields[name]
    text = field.description or ""
    text = text[:1].upper() + text[1:] + more
    if show_default:
        text += f" [default: {field.get_default(call_default_factory=True)}]"
    return text


def validated(schema: type[T], names: dict[str, str] | None = None, **values: Any) -> T:
    """``schema(**values)`` from command-line flags; a mistake is one line naming the flag
    (``names``: fields whose flag is not ``--`` + the field's name, ``rate_rps`` -> ``--rate``)."""
    try:
        return schema(**values)
    except ValidationError as exc:
        raise UsageError(validation_line(exc, flags=True, names=names)) from None


def check_tie_margin(margin: float, flag: str = "--tie-margin") -> float:
    """``--tie-margin M`` (decide, compare, report, sweep): a share, 0 <= M < 1."""
    if not 0.0 <= margin < 1.0:  # NaN too
        raise UsageError(f"{flag} {margin:g}: give a share, 0 <= M < 1 (e.g. 0.03)")
    return margin


def parse_transport(text: str) -> TransportName:
    """``--transport``: one of ``TRANSPORTS``."""
    from crossover.transport import TRANSPORTS

    for name in TRANSPORTS:
        if text == name:
            return name
    raise UsageError(f"--transport: expected {' or '.join(TRANSPORTS)}, got {text!r}")
