"""Suite-wide settings: keep a client-floor measurement cached on this machine
(``crossover calibrate``) from attaching itself to the CLI runs of the tests."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from crossover.transport import TRANSPORTS, TransportName


@pytest.fixture(autouse=True)
def _isolated_client_floor(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CROSSOVER_FLOOR", str(tmp_path / "no-floor.json"))


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> TransportName:
    """Each transport in turn (``--transport``), for the tests that must pass on both:
    any difference in what they record fails a test."""
    value: TransportName = request.param
    return value


@pytest.fixture
def temp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where ``tempfile`` makes its folders during the test (a committed sweep.db.xz's
    decompressed copy): a test checks it empty afterwards."""
    root = tmp_path / "temp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root
