"""The API key comes from the environment only and is never written anywhere:
every artifact of a run, a sweep and its report is searched for it."""

from __future__ import annotations

from pathlib import Path

import pytest

from crossover.calibration.config import CalibrationConfig
from crossover.calibration.server import spawn
from crossover.cli.app import main

SECRET = "sk-crossover-test-7f3a9c1e5b"


def artifacts(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def test_api_key_never_lands_in_any_artifact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MY_KEY", SECRET)
    with spawn(CalibrationConfig(ttft_ms=2.0, itl_ms=1.0)) as url:
        rc = main(
            [
                "run",
                "--url",
                url,
                "--engine",
                "vllm",
                "--model",
                "calibration",
                "--concurrency",
                "2",
                "--requests",
                "4",
                "--output-tokens",
                "8",
                "--input-tokens",
                "8",
                "--api-key-env",
                "MY_KEY",
                "--out",
                str(tmp_path / "run"),
                "--json",
                str(tmp_path / "run" / "s.json"),
            ]
        )
        assert rc == 0
        # a sweep reads the key from CROSSOVER_API_KEY
        monkeypatch.setenv("CROSSOVER_API_KEY", SECRET)
        rc = main(
            [
                "sweep",
                "--target",
                f"A={url},engine=vllm,model=calibration",
                "--concurrency",
                "1,2",
                "--requests-per-level",
                "4",
                "--output-tokens",
                "8",
                "--input-tokens",
                "8",
                "--out",
                str(tmp_path / "sweep"),
            ]
        )
        assert rc == 0
    captured = capsys.readouterr()
    assert SECRET not in captured.out + captured.err
    files = artifacts(tmp_path)
    assert any(f.suffix == ".db" for f in files) and any(f.suffix == ".html" for f in files)
    for f in files:
        assert SECRET.encode() not in f.read_bytes(), f


def test_missing_key_variable_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(
        [
            "run",
            "--url",
            "http://127.0.0.1:9",
            "--model",
            "m",
            "--concurrency",
            "1",
            "--output-tokens",
            "4",
            "--api-key-env",
            "NO_SUCH_VAR_XYZ",
            "--out",
            str(tmp_path),
        ]
    )
    assert rc == 2
    assert "NO_SUCH_VAR_XYZ" in capsys.readouterr().err
