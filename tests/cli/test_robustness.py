"""Bad input found by a robustness pass over every command: one clear line, a non-zero
exit, and nothing the user gave changed or lost."""

from __future__ import annotations

from pathlib import Path

import pytest

from crossover.cli.app import main
from tests.cli.test_bad_input import one_line_error


@pytest.mark.parametrize("content", [b"", b"not a database at all\n"])
def test_summarize_leaves_a_file_that_is_no_database_as_it_was(
    tmp_path: Path, content: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    """An empty file was opened as a results database, given its tables, and summarized
    as holding no run (exit 0): the file read was rewritten as an SQLite database."""
    path = tmp_path / "results.db"
    path.write_bytes(content)
    assert main(["summarize", str(path)]) == 2
    assert "not a crossover results database" in one_line_error(capsys)
    assert path.read_bytes() == content
