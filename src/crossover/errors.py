"""Errors that reach the user as one clear line and an exit status.

Library code raises these; the CLI maps them to exit codes (docs/architecture.md):
2 for a user's mistake, 3 for an invalid or unverified run, 1 for anything else.
"""

from __future__ import annotations

import difflib
import math
import types
import typing
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:  # pydantic is only needed by the caller that has a ValidationError
    import argparse

    from pydantic import BaseModel, ValidationError


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

    @property
    def cause(self) -> str | None:
        """The log's last non-blank line (what an engine said as it died), at most 200 chars.

        A sweep's one-line failure names it: ``transformers serve exited with status 1``
        alone does not say that the serving extra is missing; the traceback's last line does.
        """
        lines = [ln.strip() for ln in (self.log_tail or "").splitlines() if ln.strip()]
        if not lines:
            return None
        last = lines[-1]
        return last if len(last) <= 200 else last[:199] + "…"


class TargetUnreachableError(EngineError):
    """A URL target stopped answering during a sweep: its remaining levels are not run
    this time (the same command resumes them) while the sweep goes on with the other
    targets; the sweep then exits non-zero, naming what was not measured."""

    #: why the target's remaining levels were not run, as the sweep's last lines say it
    left_reason = "its server stopped answering (the same command resumes them)"


class NotLLMServerTargetError(TargetUnreachableError):
    """A URL target answers HTTP but not as an LLM server of its dialect: none of its
    levels is measured; the other targets are."""

    left_reason = "it is not an LLM server of its dialect (fix its url or engine)"


class NodeLostError(EngineError):
    """The Ray node running a target's work (its engine, its load) died or left the
    cluster: the level in flight fails (``node_lost``) and is redone on resume."""


class EngineVersionChangedError(EngineError):
    """A launched engine started at another version than the one its target's kept runs
    were measured with (an engine upgraded between two sessions): its levels are not
    measured, so none mixes two versions; the sweep goes on with its other targets."""

    exit_code = 2
    #: why the target's remaining levels were not run, as the sweep's last lines say it
    left_reason = "its engine is another version than its kept runs' (said above)"


class FieldError(ValueError):
    """A mistake in one field, found by a validator of the whole model (pydantic places
    such errors nowhere): ``validation_line`` puts it at ``field``, so a compact form read
    before the fields (``output_tokens: uniform:9``) is still named by its key or flag."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class InvalidRunError(CrossoverError):
    """The run's verdict is invalid or unverified and the user did not allow it: exit 3."""

    exit_code = 3


def argument_parser(prog: str, description: str | None = None) -> argparse.ArgumentParser:
    """An argparse parser (the ``python -m crossover.advise.*`` tools) whose usage error
    is one line and exit 2, as the CLI's: argparse printed its usage block first."""
    import argparse

    class OneLineParser(argparse.ArgumentParser):
        def error(self, message: str) -> NoReturn:
            self.exit(2, f"error: {message} (see {self.prog} --help)\n")

    return OneLineParser(prog=prog, description=description)


def first_line(exc: BaseException) -> str:
    """An exception's first line for a one-line message, its type's name where it says
    nothing."""
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The valid name nearest to a mistyped one (difflib), or None when none is close."""
    found = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return found[0] if found else None


def unknown_choice(what: str, value: str, choices: Iterable[str]) -> str:
    """``unknown endpoint 'chta'; did you mean 'chat'? (known: ...)``: one line."""
    names = sorted(choices)
    near = closest(value, names)
    hint = f"; did you mean {near!r}?" if near else ""
    return f"unknown {what} {value!r}{hint} (known: {', '.join(names)})"


def check_port(port: int, flag: str = "--port", *, free: bool = False) -> None:
    """A TCP port given by the user, 1 to 65535 (with ``free``, 0 too: the system picks
    a free one, as a server started here may ask); else one line naming ``flag``."""
    low = 0 if free else 1
    if not low <= port <= 65535:
        picks = " (0 picks a free one)" if free else ""
        raise UsageError(f"{flag} {port}: not a TCP port; give {low} to 65535{picks}")


def parse_list(
    text: str, what: str, cast: type[int] | type[float] = int, *, zero: bool = False
) -> list[Any]:
    """A flag's comma list of levels or rates (``1,2,4``): each item a number above 0
    (with ``zero``, 0 or above: a count that may be none), finite; ``1,,2``, ``1,`` and
    ``0,2`` are refused, not read as ``1,2``; a level given twice is kept once, in its
    first place (a sweep file's list keeps it once too). ``what`` names the flag."""
    kind = "integers" if cast is int else "numbers"
    items = [x.strip() for x in text.split(",")]
    if not any(items):
        raise UsageError(f"{what}: empty list")
    if not all(items):
        raise UsageError(f"{what}: empty item in {text!r}; give {kind} separated by commas")
    try:
        out = [cast(x) for x in items]
    except ValueError:
        raise UsageError(
            f"{what}: expected a comma-separated list of {kind}, got {text!r}"
        ) from None

    def fits(v: float) -> bool:  # nan fits neither
        return (v >= 0 if zero else v > 0) and v < math.inf

    bad = next((x for x, v in zip(items, out, strict=True) if not fits(v)), None)
    if bad is not None:
        least = "0 or above" if zero else "above 0"
        raise UsageError(f"{what}: each item must be {least}, got {bad} in {text!r}")
    return list(dict.fromkeys(out))


def parse_names(text: str, what: str, *, lower: bool = False) -> list[str]:
    """A flag's comma list of names or ``KEY=VALUE`` items (``vllm,sglang``), each
    stripped (with ``lower``, lower-cased); ``vllm,,sglang``, ``vllm,`` and ``,`` are
    refused, not read as ``vllm,sglang`` (as :func:`parse_list` refuses ``1,,2``); an item
    given twice is kept once, in its first place. ``what`` names the flag."""
    items = [x.strip().lower() if lower else x.strip() for x in text.split(",")]
    if not any(items):
        raise UsageError(f"{what}: empty list")
    if not all(items):
        raise UsageError(f"{what}: empty item in {text!r}; give names separated by commas")
    return list(dict.fromkeys(items))


def _model_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The pydantic model that holds the field at ``loc`` (list indexes skipped)."""
    from pydantic import BaseModel

    current: type[BaseModel] = model
    for part in loc:
        if isinstance(part, int):
            continue
        field = current.model_fields.get(part)
        if field is None:
            return None
        nested = _nested_model(field.annotation)
        if nested is None:
            return None
        current = nested
    return current if issubclass(current, BaseModel) else None


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    from pydantic import BaseModel

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = typing.get_origin(annotation)
    if origin in (list, typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = _nested_model(arg)
            if found is not None:
                return found
    return None


def validation_line(
    exc: ValidationError,
    where: str | None = None,
    flags: bool = False,
    model: type[BaseModel] | None = None,
    loc_prefix: str = "",
    limit: int | None = None,
    names: dict[str, str] | None = None,
) -> str:
    """pydantic's errors as one line: ``where: field: message; ...``.

    ``flags`` names fields as command-line flags (``--output-tokens``). Keys may come
    from user files and hold anything, so whitespace is collapsed: one line, always.
    With ``model``, an unknown key is named with the closest valid one; ``loc_prefix``
    places the model inside a bigger file (``targets.0.launch``); ``limit`` keeps the
    first errors of a long list (a malformed results file) and counts the rest.
    ``names`` maps a field (its dotted place) to what the user typed for it, where that
    is not the field's name (``rate_rps`` is ``--rate``); it wins over ``flags``.
    """
    parts = []
    errors = exc.errors()
    for err in errors[:limit]:
        cause = (err.get("ctx") or {}).get("error")
        where_in = [str(x) for x in err["loc"] if x != "__root__"]
        if isinstance(cause, FieldError):
            where_in.append(cause.field)
        loc = ".".join([*([loc_prefix] if loc_prefix else []), *where_in])
        msg = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "extra_forbidden" and err["loc"]:
            msg = "unknown key"
            holder = _model_at(model, err["loc"][:-1]) if model is not None else None
            near = closest(str(err["loc"][-1]), holder.model_fields) if holder else None
            if near is not None:
                msg += f"; did you mean {near!r}?"
        if names and loc in names:
            loc = names[loc]
        elif flags and loc:
            loc = "--" + loc.replace("_", "-")
        parts.append(f"{loc}: {msg}" if loc else msg)
    if limit is not None and len(errors) > limit:
        parts.append(f"and {len(errors) - limit} more")
    text = "; ".join(parts)
    return " ".join((f"{where}: {text}" if where else text).split())
