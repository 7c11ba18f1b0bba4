"""Every command's --help shows an example and only plain names: no typer internals
(``{db}``, ``<int>``, ``INTEGER RANGE``, ``[x>=1]``)."""

from __future__ import annotations

import re

import pytest
import typer.main

from crossover.cli.app import app, main


def _commands() -> list[list[str]]:
    group = typer.main.get_group(app)
    out: list[list[str]] = []
    for name, cmd in group.commands.items():
        subs = getattr(cmd, "commands", None)
        if subs:
            out += [[name, sub] for sub in subs]
        else:
            out.append([name])
    return sorted(out)


COMMANDS = _commands()


def test_the_commands_are_found() -> None:
    assert ["run"] in COMMANDS and ["models", "fetch"] in COMMANDS and len(COMMANDS) > 15


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c))
def test_help_has_an_example_and_plain_names(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*command, "--help"]) == 0
    text = capsys.readouterr().out
    assert re.search(r"^  Examples?\b", text, re.M), text
    assert f"crossover {' '.join(command)}" in text  # the example runs this command
    usage = text.splitlines()[0]
    assert "{" not in usage, usage  # typer's {name} for a required argument
    for internal in ("<int>", "<str>", "<bool>", "<path>", "RANGE", "x>=", "x<="):
        assert internal not in text, (internal, text)
