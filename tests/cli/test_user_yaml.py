"""The three YAML files a user hands crossover (a sweep config, the calibration server's
``--config``, the advisor's ``--calibration``) are read by one function: a file that does
not parse, a key given twice or bytes that are not UTF-8 are one line worded the same
way in all three, exit 2. Each was worded its own way before."""

from __future__ import annotations

from pathlib import Path

import pytest

from crossover.calibration.__main__ import main as calibration_main
from crossover.cli.app import main
from tests.errlines import one_line_error

#: what the file holds, and what follows ``error: PATH: `` on standard error
CASES = [
    pytest.param(b"itl_ms: 5\nfaults: [cut\n", "not valid YAML at line 3", id="broken"),
    pytest.param(
        b"itl_ms: 5\nttft_ms: 3\nitl_ms: 50\n",
        "not valid YAML at line 3: key 'itl_ms' given twice",
        id="key-twice",
    ),
    pytest.param(
        b"itl_ms: 5\nfaults:\n  - {name: cut}\n  - {name: stall, name: reset}\n",
        "not valid YAML at line 4: key 'name' given twice",
        id="nested-key-twice",
    ),
    pytest.param(b"itl_ms: 5\nttft_ms: \xff\n", "not UTF-8 text (byte 0xff at line 2)", id="utf8"),
    pytest.param(b"itl_ms: 5\n\nttft_ms: \x00\n", "not valid YAML at line 3", id="control"),
]


def _commands(path: Path, out: Path) -> dict[str, list[str]]:
    p = str(path)
    return {
        "sweep": ["sweep", "--config", p, "--out", str(out)],
        "calibration-server": ["calibration-server", "--port", "0", "--config", p],
        "advise": ["advise", "--gpu", "H100", "--model", "llama-3.1-8b", "--calibration", p],
    }


@pytest.mark.parametrize("command", ["sweep", "calibration-server", "advise"])
@pytest.mark.parametrize(("content", "why"), CASES)
def test_a_users_bad_yaml_is_one_line_worded_alike(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, content: bytes, why: str
) -> None:
    path = tmp_path / "c.yaml"
    path.write_bytes(content)
    out = tmp_path / "o"
    assert main(_commands(path, out)[command]) == 2
    assert one_line_error(capsys) == f"error: {path}: {why}"
    assert not out.exists()


@pytest.mark.parametrize(("content", "why"), CASES)
def test_the_calibration_servers_own_command_words_it_alike(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, why: str
) -> None:
    """``python -m crossover.calibration`` reads its config through the same function."""
    path = tmp_path / "c.yaml"
    path.write_bytes(content)
    assert calibration_main(["--port", "0", "--config", str(path)]) == 2
    assert one_line_error(capsys) == f"error: {path}: {why}"
