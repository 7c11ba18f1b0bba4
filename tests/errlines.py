"""The one-line error the CLI owes bad input, as the tests read it."""

from __future__ import annotations

import pytest


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    """The one non-blank line on standard error, ``error: ...``, with no traceback."""
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("error:")
    return lines[0]
