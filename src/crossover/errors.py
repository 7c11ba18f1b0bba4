"""Errors that reach the user as one clear line and an exit status.

Library code raises these; the CLI maps them to exit codes (contract.md):
2 for a user's mistake, 3 for an invalid or unverified run, 1 for anything else.
"""

from __future__ import annotations


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
