"""Suite-wide settings: keep a client-floor measurement cached on this machine
(``crossover calibrate``) from attaching itself to the CLI runs of the tests."""

from __future__ import annotations

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
