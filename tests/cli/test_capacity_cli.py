"""``crossover capacity --url``: the server is asked for its models first, as ``run``
asks: something that is not an LLM server is one line and exit 2 before any level (it
searched on, each level invalid and seconds long), and ``--model`` may be left out where
the server lists one."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from crossover.calibration.config import CalibrationConfig
from crossover.calibration.server import spawn
from crossover.cli.app import main


@pytest.fixture
def not_llm() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def test_a_server_that_is_not_an_llm_server_is_refused_before_any_level(
    not_llm: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cap.json"
    rc = main(["capacity", "--url", not_llm, "--model", "m", "--output-tokens", "4",
               "--slo", "ttft_ms.p99=100", "--json", str(out)])  # fmt: skip
    assert rc == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "does not answer as an LLM server" in err
    assert "rate " not in err  # no level was measured
    assert not out.exists()


def test_the_model_is_the_one_the_server_lists(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cap.json"
    with spawn(CalibrationConfig(ttft_ms=1.0, itl_ms=1.0)) as url:
        rc = main(["capacity", "--url", url, "--output-tokens", "2", "--slo",
                   "ttft_ms.p99=5000", "--start-rate", "4", "--max-rate", "4",
                   "--duration-s-per-level", "1", "--warmup", "0", "--json", str(out)])  # fmt: skip
    assert rc == 0
    assert f"model: calibration (the one model {url} lists)" in capsys.readouterr().err
    assert json.loads(out.read_text())["target"]["model"] == "calibration"


def test_a_second_search_on_a_folder_being_written_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--out DIR`` has one writer, as a sweep's has: a second search there would resume
    the first's levels and, from a YAML, launch its engines beside the first's."""
    from crossover.records.folder_lock import FolderLock

    out = tmp_path / "res"
    with spawn(CalibrationConfig(ttft_ms=1.0, itl_ms=1.0)) as url:
        args = ["capacity", "--url", url, "--output-tokens", "2", "--slo", "ttft_ms.p99=5000",
                "--start-rate", "4", "--max-rate", "4", "--duration-s-per-level", "1",
                "--warmup", "0", "--out", str(out)]  # fmt: skip
        with FolderLock.take(out, "capacity"):
            assert main(args) == 2
            err = " ".join(capsys.readouterr().err.split())
            assert f"error: {out} is being written by another crossover process (pid " in err
            assert ", crossover capacity since " in err
            assert not (out / "capacity.db").exists()
        assert main(args) == 0  # the folder free again
    assert (out / "capacity.db").exists()
