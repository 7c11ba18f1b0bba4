"""A sweep attaches the client floor measured by `crossover calibrate` to its runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crossover.cli.app import main

from .conftest import Linear, servers, target_flags


def test_sweep_uses_the_cached_floor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    floor_file = tmp_path / "floor.json"
    monkeypatch.setenv("CROSSOVER_FLOOR", str(floor_file))
    out = tmp_path / "sweep"
    with servers(Linear(1.0, 0.0)) as (url,):
        args = ["sweep", *target_flags({"A": url}), "--concurrency", "1,2",
                "--requests-per-level", "2", "--output-tokens", "4", "--input-tokens", "8",
                "--out", str(out), "--no-report"]  # fmt: skip
        assert main([*args]) == 0
        runs = json.loads((out / "sweep.json").read_text())["runs"]
        assert all(r["summary"]["client_floor"] is None for r in runs)
        assert main(["calibrate", "--concurrency", "1,2", "--output-tokens", "16",
                     "--itl-ms", "5", "--cache", str(floor_file)]) == 0  # fmt: skip
        assert floor_file.is_file()
        assert main([*args[:-3], "--out", str(tmp_path / "sweep2"), "--no-report"]) == 0
    runs = json.loads((tmp_path / "sweep2" / "sweep.json").read_text())["runs"]
    assert runs and all(r["summary"]["client_floor"] is not None for r in runs)
    capsys.readouterr()


def test_bad_floor_file_fails_before_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "s.yaml"
    cfg.write_text(
        "concurrency: [1]\noutput_tokens: 4\nclient_floor: /no/such/floor.json\n"
        "targets: [{name: a, url: 'http://127.0.0.1:9', model: m}]\n"
    )
    assert main(["sweep", "--config", str(cfg), "--out", str(tmp_path / "o")]) == 2
    assert "no such file" in capsys.readouterr().err
