"""Flags and config files: bad ones are one-line usage errors (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from crossover.calibration.__main__ import main as module_main
from crossover.calibration.config import build_config, load_config_file, parse_fault
from crossover.errors import UsageError


@pytest.mark.parametrize(
    "argv",
    [
        ["--fault", "nope"],
        ["--fault", "stall:1.5"],
        ["--fault", "stall:x"],
        ["--itl-ms", "-1"],
        ["--tokens-per-chunk", "zero"],
        ["--tokens-per-chunk", "0"],
        ["--port", "70000"],
        ["--config", "/nonexistent/calib.yaml"],
        ["--bogus"],
    ],
)
def test_bad_flags_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert module_main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error")
    assert "Traceback" not in err
    assert err.count("\n") == 1


def test_the_crossover_command_maps_bad_flags_to_exit_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from crossover.cli.app import main as cli_main  # imports every command module

    assert cli_main(["calibration-server", "--fault", "nope"]) == 2
    assert cli_main(["calibration-server", "--itl-ms", "-1"]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_parse_fault() -> None:
    assert parse_fault("cut").fraction == 1.0
    spec = parse_fault("reset:0.1")
    assert spec.name == "reset"
    assert spec.fraction == 0.1
    assert sum(spec.applies_to(i) for i in range(100)) == 10


def test_config_file_with_flag_overrides(tmp_path: Path) -> None:
    path = tmp_path / "calib.yaml"
    path.write_text("itl_ms: 7\nttft_ms: 30\nfaults: ['cut:0.5', {name: stall}]\n")
    cfg = build_config(load_config_file(path), ttft_ms=12.0, itl_ms=None)
    assert cfg.itl_ms == 7
    assert cfg.ttft_ms == 12.0
    assert [(f.name, f.fraction) for f in cfg.faults] == [("cut", 0.5), ("stall", 1.0)]
    path.write_text("itl_ms: 7\nunknown_key: 1\n")
    with pytest.raises(UsageError, match="unknown_key"):
        build_config(load_config_file(path))


def test_a_config_with_a_key_given_twice_is_refused(tmp_path: Path) -> None:
    """PyYAML kept the last: the server ran with one of two latencies, nothing said."""
    path = tmp_path / "c.yaml"
    path.write_text("itl_ms: 5\nitl_ms: 50\n")
    with pytest.raises(UsageError, match="key 'itl_ms' given twice"):
        load_config_file(path)
