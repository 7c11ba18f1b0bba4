"""``python -m crossover.calibration [flags]``: the calibration server alone.

The same flags as ``crossover calibration-server``; ``spawn()`` starts the server this way,
without importing the rest of the command line.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    import typer
    from typer.exceptions import TyperException  # typer's own (vendored) click errors

    from crossover.calibration.command import calibration_server
    from crossover.errors import CrossoverError

    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command()(calibration_server)
    try:
        app(args=sys.argv[1:] if argv is None else argv, standalone_mode=False)
    except CrossoverError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except TyperException as exc:
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        print(f"error: {message}".replace("\n", " "), file=sys.stderr)
        return int(getattr(exc, "exit_code", 1))
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except (KeyboardInterrupt, typer.Abort):
        return 130
    return 0


if __name__ == "__main__":
    # its --help and its "listening on" line go to standard output: `| head` ends it
    # quietly with 141, as the other tools, not with typer's silent exit 1
    from crossover.pipes import run_tool

    run_tool(main)
