"""``crossover calibrate --json`` and ``crossover run --workers 2 --client-floor``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from crossover.calibration.config import CalibrationConfig
from crossover.calibration.server import spawn
from crossover.cli.app import main


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with spawn(CalibrationConfig(ttft_ms=2.0, itl_ms=3.0)) as url:
        yield url


def test_calibrate_json_then_run_with_the_floor(
    server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CROSSOVER_FLOOR", raising=False)
    monkeypatch.setenv("CROSSOVER_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "floor.json"
    rc = main(
        ["calibrate", "--concurrency", "1,4", "--itl-ms", "3", "--output-tokens", "12",
         "--json", str(out)]
    )  # fmt: skip
    assert rc == 0
    doc = orjson.loads(out.read_bytes())
    assert doc["schema"] == "crossover.floor/1"
    levels = doc["measurements"]
    assert [m["concurrency"] for m in levels] == [1, 4]
    for m in levels:
        assert m["delivery_ms"]["p50"] is not None and m["delivery_ms"]["count"] == m["tokens"]
        assert m["send_lag_ms"]["count"] >= 1 and m["loop_lag_ms"]["count"] >= 1
        assert m["client_cpu_s"] > 0 and m["tokens_per_s"] > 0
    assert (tmp_path / "cache" / "floor.json").is_file()

    summary = tmp_path / "run.json"
    rc = main(
        ["run", "--url", server, "--model", "calibration", "--engine", "vllm",
         "--concurrency", "4", "--requests", "12", "--output-tokens", "8",
         "--input-tokens", "5", "--workers", "2", "--quiet", "--out", str(tmp_path / "res"),
         "--json", str(summary)]
    )  # fmt: skip
    assert rc == 0
    s = orjson.loads(summary.read_bytes())
    assert s["load"]["workers"] == 2 and s["requests"]["sent"] == 12
    assert s["client_floor"]["delivery_p50_ms"] == levels[1]["delivery_ms"]["p50"]


def test_run_without_a_cached_floor_says_so(
    server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("CROSSOVER_FLOOR", raising=False)
    monkeypatch.setenv("CROSSOVER_CACHE", str(tmp_path / "empty"))
    summary = tmp_path / "run.json"
    rc = main(
        ["run", "--url", server, "--model", "calibration", "--engine", "vllm",
         "--concurrency", "2", "--requests", "4", "--output-tokens", "4", "--input-tokens", "5",
         "--quiet", "--out", str(tmp_path / "res"), "--json", str(summary)]
    )  # fmt: skip
    assert rc == 0
    assert "crossover calibrate" in capsys.readouterr().err
    assert orjson.loads(summary.read_bytes())["client_floor"] is None


@pytest.mark.parametrize("bad", ["0", "many"])
def test_run_rejects_bad_workers(server: str, tmp_path: Path, bad: str) -> None:
    rc = main(
        ["run", "--url", server, "--model", "calibration", "--concurrency", "2",
         "--output-tokens", "4", "--workers", bad, "--out", str(tmp_path)]
    )  # fmt: skip
    assert rc == 2


def test_calibrate_names_the_run_option_that_reads_its_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--cache PATH`` is read by ``run --client-floor PATH``, not ``auto`` (which reads
    the default cache): the closing line names the option that finds what was written."""
    monkeypatch.delenv("CROSSOVER_FLOOR", raising=False)
    monkeypatch.setenv("CROSSOVER_CACHE", str(tmp_path / "cache"))
    args = ["calibrate", "--concurrency", "1", "--itl-ms", "3", "--output-tokens", "4"]
    other = tmp_path / "mine.json"
    assert main([*args, "--cache", str(other)]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert f"floor cached in {other} (crossover run --client-floor {other})" in err
    assert main(args) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "(crossover run --client-floor auto)" in err
