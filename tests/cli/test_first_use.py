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
