"""What a new user meets first: --version, bare ``crossover``, the help."""

from __future__ import annotations

import pytest

from crossover import __version__
from crossover.cli.app import main


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"crossover {__version__}"


def test_bare_command_prints_help_without_an_empty_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main([]) in (0, 2)
    captured = capsys.readouterr()
    text = captured.out + captured.err
    assert "Usage" in text
    assert "sweep" in text
    assert "error:" not in text


def test_bare_group_prints_help_without_an_empty_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["engines"]) in (0, 2)
    captured = capsys.readouterr()
    assert "error:" not in captured.out + captured.err


MAIN_COMMANDS = [
    "run",
    "sweep",
    "report",
    "compare",
    "calibration-server",
    "calibrate",
    "advise",
    "plan",
    "demo",
]
EVERY_COMMAND = [
    *MAIN_COMMANDS,
    "summarize",
    "verify-config",
    "commbench",
    "engines install",
    "models list",
]


def _help(command: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert main([*command.split(), "--help"]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("command", ["", *EVERY_COMMAND])
def test_help_names_types_as_users_read_them(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    text = _help(command, capsys)
    assert "Usage:" in text
    for internal in ("<bool>", "<int>", "<str>", "<float>", "<path>", "<list[", "None]"):
        assert internal not in text, (command, internal)


@pytest.mark.parametrize("command", MAIN_COMMANDS)
def test_main_commands_show_an_example(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(command, capsys)
    assert "Example" in text
    assert f"crossover {command}" in text.split("Example", 1)[1]


def test_sweep_help_shows_the_config_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    """The defaults printed by ``sweep --help`` are the sweep config's own."""
    from crossover.sweep.config import SweepConfig

    text = " ".join(_help("sweep", capsys).split())
    fields = SweepConfig.model_fields
    for flag, field, metavar in [
        ("--input-tokens", "input_tokens", "TEXT"),  # a number or a distribution
        ("--repeats", "repeats", "INTEGER"),
        ("--refine-budget", "refine_budget", "INTEGER"),
        ("--seed", "seed", "INTEGER"),
    ]:
        after = text.split(f"{flag} {metavar}", 1)[1][:70]
        assert f"[default: {fields[field].default}]" in after, (flag, after)
    assert "[default: max(16, 4 x level)]" in text
    assert SweepConfig(
        targets=[{"name": "a", "url": "http://h", "model": "m"}],  # type: ignore[list-item]
        concurrency=[1, 8],
        output_tokens=4,
    ).requests_for(8) == max(16, 4 * 8)
