"""``import_transformers`` leaves out transformers' misleading "PyTorch was not found"
line and restores the environment it changed."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("transformers")

LINE = "PyTorch was not found"


def _stderr(code: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "TRANSFORMERS_NO_ADVISORY_WARNINGS"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_no_pytorch_line_and_the_environment_restored() -> None:
    if LINE not in _stderr("import transformers"):
        pytest.skip("PyTorch is installed here: transformers prints no such line to leave out")
    err = _stderr(
        "import os\n"
        "from crossover.optional import import_transformers\n"
        "t = import_transformers()\n"
        "assert t.__name__ == 'transformers'\n"
        "assert 'TRANSFORMERS_NO_ADVISORY_WARNINGS' not in os.environ\n"
    )
    assert LINE not in err
