"""``crossover engines install triton --wheels DIR``: a machine without a network (the lent
H200) installs from a folder: the pinned nvidia-pytriton wheel checked against its sha256,
and the stub environment's packages with pip kept off every index."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest

from crossover.builds import triton
from crossover.cli.app import main
from crossover.errors import EngineError, UsageError

pytestmark = pytest.mark.llamacpp  # the pinned wheel, as `make engines` fetched it


def test_wheels_folder_supplies_the_checked_server_wheel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cached = triton.wheel_path(quiet=True)  # the default cache's copy
    monkeypatch.setenv("CROSSOVER_CACHE", str(tmp_path / "cache"))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UsageError, match=re.escape(f"no {triton.WHEEL_NAME} there")):
        triton.wheel_path(quiet=True, wheels=empty)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / triton.WHEEL_NAME).write_bytes(b"not the wheel")
    with pytest.raises(UsageError, match="expected " + triton.WHEEL_SHA256):
        triton.wheel_path(quiet=True, wheels=bad)
    good = tmp_path / "good"
    good.mkdir()
    shutil.copyfile(cached, good / triton.WHEEL_NAME)
    got = triton.wheel_path(quiet=True, wheels=good)
    assert got == tmp_path / "cache" / "src" / triton.WHEEL_NAME
    assert triton._sha256(got) == triton.WHEEL_SHA256


def test_wheels_folder_keeps_pip_off_the_index(tmp_path: Path) -> None:
    # an empty folder: pip must fail to find NumPy 1.26.4 rather than fetch it
    empty = tmp_path / "wheels"
    empty.mkdir()
    with pytest.raises(EngineError, match=re.escape("stub's environment (numpy==1.26.4")) as err:
        triton._make_env(sys.executable, tmp_path / "env", [], None, True, wheels=empty)
    assert "no matching distribution" in (err.value.log_tail or "").lower()


def test_wheels_option_is_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["engines", "install", "llamacpp", "--wheels", str(tmp_path)]) == 2
    assert "--wheels is for triton" in capsys.readouterr().err
    missing = tmp_path / "nope"
    assert main(["engines", "install", "triton", "--no-llamacpp", "--wheels", str(missing)]) == 2
    assert "not a folder" in capsys.readouterr().err
