"""The ``crossover`` command: one module per command under ``crossover.cli``.

Each command module defines ``register(app: typer.Typer) -> None``. Modules import
their heavy dependencies inside the command functions, so ``crossover --help`` is fast.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import signal
import sys
from typing import Annotated

import typer

from crossover.cli.helpfmt import install as _plain_help_types
from crossover.errors import CrossoverError, EngineError
from crossover.pipes import (
    broken_pipe,
    flush_stdout,
    quiet_stdout_closed,
    stdout_closed,
    watch_stdout,
)

_plain_help_types()

# One line per command module; each module registers its own commands.
COMMAND_MODULES: tuple[str, ...] = (
    "run",
    "summarize",
    "sweep",
    "decide",
    "capacity",
    "demo",
    "advise",
    "gpus",
    "plan",
    "calibration",
    "calibrate",
    "verify",
    "report",
    "engines",
    "models",
    "commbench",
    "quality",
)

app = typer.Typer(
    name="crossover",
    help="Matched-work benchmarks of LLM serving engines: measure, find the crossover, advise.",
    no_args_is_help=True,
    add_completion=False,
    # help texts hold literal brackets ([default: ...], NAME=URL[,engine=E]): no markup
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        from crossover import __version__

        typer.echo(f"crossover {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            help="Print the version and exit.",
            callback=_print_version,
            is_eager=True,
        ),
    ] = False,
) -> None:
    """Matched-work benchmarks of LLM serving engines: measure, find the crossover, advise."""


for _name in COMMAND_MODULES:
    importlib.import_module(f"crossover.cli.{_name}").register(app)


def _fail(message: str, code: int, detail: str | None = None) -> int:
    from rich.console import Console
    from rich.markup import escape

    err = Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        err.print(f"[bold red]error:[/] {escape(message)}")
        if detail:
            err.print(escape(detail.rstrip()), style="dim")
    except SystemExit:  # rich's answer to a broken pipe: stderr's reader is gone too
        pass  # (2>&1 | head); the status still tells
    return code


#: what Ctrl-C leaves, per command: only a sweep (the demo and a live decide: sweeps) resumes
INTERRUPTED = {
    "sweep": "interrupted; results written so far are kept (run the same command again to "
    "resume: finished runs are kept, the one in flight is redone)",
    "decide": "interrupted; results written so far are kept (run the same command again to "
    "resume: finished levels are kept, the one in flight is redone)",
    "demo": "interrupted; results written so far are kept (run it again to resume)",
    "run": "interrupted; the records of requests that finished are kept in the results "
    "database (a run does not resume: run it again to measure it anew)",
    "capacity": "interrupted; the levels measured so far are in --out DIR/capacity.db if "
    "given (the same command with that --out resumes: finished levels are kept)",
}


#: a sweep under --redo: the same command measures its named levels again from the start
#: where neither their settings nor the engine's version changed (an outlier's), and
#: resumes where one did
INTERRUPTED_REDO = (
    "interrupted; results written so far are kept (the same command resumes a --redo of "
    "runs measured with other settings or another engine version, but measures every "
    "level a --redo names again where neither changed: run it without those --redo to "
    "keep what was redone)"
)


def _interrupted(argv: list[str] | None) -> str:
    args = sys.argv[1:] if argv is None else argv
    command = next((a for a in args if not a.startswith("-")), "")
    if command == "sweep" and any(a == "--redo" or a.startswith("--redo=") for a in args):
        return INTERRUPTED_REDO
    return INTERRUPTED.get(command, "interrupted")


def _not_utf8(args: list[str]) -> str | None:
    """The first argument that is not UTF-8 text (Python keeps such bytes as surrogates,
    which a results file cannot hold: a traceback once a run's context was stored)."""
    for arg in args:
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            return arg.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return None


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit status instead of raising (used by tests too)."""
    watch = watch_stdout()
    try:
        return _main(argv, watch)
    finally:
        if watch is not None:
            os.close(watch)


def _main(argv: list[str] | None, watch: int | None) -> int:
    interrupted = _interrupted(argv)
    bad = _not_utf8(sys.argv[1:] if argv is None else argv)
    if bad is not None:
        return _fail(f"argument {bad!r} is not UTF-8 text; crossover takes UTF-8 arguments", 2)
    try:
        rv = app(args=argv, standalone_mode=False)
    except CrossoverError as exc:
        tail = exc.log_tail if isinstance(exc, EngineError) else None
        return _fail(str(exc), exc.exit_code, tail)
    except (KeyboardInterrupt, asyncio.CancelledError):  # Ctrl-C, or SIGTERM (run_async)
        return _fail(interrupted, 130)
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except (SystemExit, BrokenPipeError) as exc:
        # typer and rich turn a broken pipe met while a command ran into a silent exit 1
        if stdout_closed(exc, watch):
            return quiet_stdout_closed()
        pipe = broken_pipe(exc)
        if pipe is None:
            raise
        # typer's exit 1 takes any EPIPE, a socket's too: say which end went away
        return _fail(
            "connection closed by the other end while crossover was writing to it (a "
            f"server's socket or a process's pipe): {pipe}",
            1,
        )
    except Exception as exc:
        # typer bundles its own copy of click: recognise its errors by their shape
        from typer._click import exceptions as tce

        if isinstance(exc, tce.NoArgsIsHelpError):
            # the help is already printed (rich prints it itself); no empty "error:" after it
            text = exc.format_message().strip()
            if text:
                typer.echo(text, err=True)
            return 2
        if isinstance(exc, tce.UsageError):
            return _fail(exc.format_message().replace("\n", " "), 2)
        if isinstance(exc, typer.Abort):
            return _fail("aborted", 130)
        if isinstance(exc, tce.ClickException):
            return _fail(exc.format_message(), exc.exit_code)
        raise
    if rv == 130:
        # typer (0.29, typer/core.py) turns Ctrl-C into a silent Exit(130), returned as the
        # value here: say what happened, as for a KeyboardInterrupt that reaches us
        return _fail(interrupted, 130)
    return rv if isinstance(rv, int) else 0


def entry() -> None:
    # A shell script's background job (`crossover sweep ... &`) starts with SIGINT ignored,
    # and Python then never raises KeyboardInterrupt: `kill -INT` would be lost and a sweep
    # would run on. crossover promises that SIGINT stops it like Ctrl-C (exit 130, results
    # kept, resumable), so restore Python's handler whatever the parent left.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.exit(flush_stdout(main()))
