"""Errors that reach the user as one clear line and an exit status.

Library code raises these; the CLI maps them to exit codes (contract.md):
2 for a user's mistake, 3 for an invalid or unverified run, 1 for anything else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pydantic is only needed by the caller that has a ValidationError
    from pydantic import ValidationError


class CrossoverError(Exception):
    """Base class: the message is shown to the user as it is, on one line."""

    exit_code = 1


class UsageError(CrossoverError):
    """Bad flag, bad config file, unreachable URL, bad model path: exit 2."""

    exit_code = 2


class EngineError(CrossoverError):
    """An engine failed to start, died, or could not be reached: exit 1.

    ``log_tail`` holds the last lines of the engine's log, shown under the message.
    """

    exit_code = 1

    def __init__(self, message: str, log_tail: str | None = None) -> None:
        super().__init__(message)
        self.log_tail = log_tail


class InvalidRunError(CrossoverError):
    """The run's verdict is invalid or unverified and the user did not allow it: exit 3."""

    exit_code = 3


def validation_line(exc: ValidationError, where: str | None = None, flags: bool = False) -> str:
    """pydantic's errors as one line: ``where: field: message; ...``.

    ``flags`` names fields as command-line flags (``--output-tokens``). Keys may come
    from user files and hold anything, so whitespace is collapsed: one line, always.
    """
    parts = []
    for err in exc.errors():
        loc = ".".join(str(x) for x in err["loc"] if x != "__root__")
        msg = str(err["msg"]).removeprefix("Value error, ")
        if flags and loc:
            loc = "--" + loc.replace("_", "-")
        parts.append(f"{loc}: {msg}" if loc else msg)
    text = "; ".join(parts)
    return " ".join((f"{where}: {text}" if where else text).split())
