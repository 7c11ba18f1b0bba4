from __future__ import annotations

import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def sweep_dir(tmp_path: Path) -> Path:
    """A copy of the two-engine sweep fixture (a crossover, an invalid run,
    ``<script>`` planted in an engine version, a setting and a problem message)."""
    dest = tmp_path / "sweep"
    shutil.copytree(FIXTURES / "two_engines", dest)
    return dest
