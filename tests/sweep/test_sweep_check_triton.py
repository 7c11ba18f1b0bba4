"""``crossover sweep --check`` on a launched ``triton`` target: without an executable it
uses the tritonserver ``crossover engines install triton`` put in the cache, and says how
to get one when there is none."""

from __future__ import annotations

from pathlib import Path

import pytest

from crossover.cli.app import main


def _config(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    path = tmp_path / "sweep.yaml"
    path.write_text(
        "concurrency: [1]\noutput_tokens: 8\ninput_tokens: 16\ntargets:\n"
        f"  - name: t\n    model: llamacpp\n    launch: {{engine: triton, model: {repo}}}\n"
    )
    return path


def test_no_installed_server_is_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CROSSOVER_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert main(["sweep", "--config", str(_config(tmp_path)), "--check"]) != 0
    out = capsys.readouterr()
    assert "no tritonserver here: `crossover engines install triton`" in out.out + out.err


def test_a_cached_install_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "cache"
    root = cache / "builds" / "triton-2.51.0-py3.11-0123456789abcdef"
    server = root / "server" / "pytriton" / "tritonserver" / "bin" / "tritonserver"
    server.parent.mkdir(parents=True)
    server.write_text("#!/bin/sh\nexit 1\n")
    server.chmod(0o755)
    (root / "install.json").write_text('{"installed_at_unix": 1}')
    monkeypatch.setenv("CROSSOVER_CACHE", str(cache))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert main(["sweep", "--config", str(_config(tmp_path)), "--check"]) == 0
    out = capsys.readouterr().out
    assert "1 target(s) checked" in out
    # the metrics port the launch picks free is shown as such, not as the number this
    # check happened to pick (the sweep gets another)
    assert "--http-port=PORT" in out and "--metrics-port=METRICS_PORT" in out
