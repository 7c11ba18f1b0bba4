"""Is it an LLM server? Each dialect's listing asked before anything is measured: a plain
web server is refused with one line (its status and the start of its body, never its
HTML over several lines); the one model a server lists is picked when none is named."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from crossover.calibration.config import CalibrationConfig
from crossover.calibration.server import spawn
from crossover.cli.app import main
from crossover.dialects.discovery import (
    NotAnLLMServerError,
    one_line,
    pick_model,
    served_models,
)
from crossover.engines.registry import dialect
from crossover.errors import UsageError


@contextlib.contextmanager
def serve(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


class Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def json_server(routes: dict[tuple[str, str], Any]) -> type[BaseHTTPRequestHandler]:
    class Handler(Quiet):
        def _answer(self, verb: str) -> None:
            doc = routes.get((verb, self.path))
            body = json.dumps(doc).encode()
            self.send_response(200 if doc is not None else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self._answer("GET")

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self._answer("POST")

    return Handler


def test_a_plain_web_server_is_refused_on_one_line() -> None:
    with serve(Quiet) as url, pytest.raises(NotAnLLMServerError) as exc:
        served_models(url, dialect("openai"), "m")
    line = str(exc.value)
    assert "\n" not in line
    assert "GET /v1/models answered 404" in line
    assert "not a model list" in line
    assert "<!DOCTYPE HTML" in line or "<html" in line.lower()
    quoted = line.split("not a model list: ", 1)[1]
    assert len(quoted) <= 80


def test_each_dialect_asks_its_own_listing() -> None:
    routes = {
        ("GET", "/v1/models"): {"object": "list", "data": [{"id": "a"}, {"id": "b"}]},
        ("GET", "/v2/models/ens"): {"name": "ens", "versions": ["1"]},
        ("POST", "/v2/repository/index"): [{"name": "ens", "state": "READY"}],
    }
    with serve(json_server(routes)) as url:
        assert served_models(url, dialect("vllm"), None) == ["a", "b"]
        assert served_models(url, dialect("triton"), "ens") == ["ens"]
        assert served_models(url, dialect("triton"), None) == ["ens"]
        with pytest.raises(NotAnLLMServerError, match="GET /v2/models/other answered 404"):
            served_models(url, dialect("triton"), "other")
    # llama.cpp without /v1/models: /props names the model it loaded
    props = {("GET", "/props"): {"default_generation_settings": {}, "model_path": "/m.gguf"}}
    with serve(json_server(props)) as url:
        assert served_models(url, dialect("llamacpp"), None) == ["/m.gguf"]
        with pytest.raises(NotAnLLMServerError):
            served_models(url, dialect("sglang"), None)


def test_nothing_listening_is_cannot_reach() -> None:
    with serve(Quiet) as url:
        pass
    with pytest.raises(UsageError, match="cannot reach"):
        served_models(url, dialect("openai"), None)


def test_pick_model() -> None:
    assert pick_model("u", ["x"], "given") == ("given", None)
    name, said = pick_model("u", ["only"], None)
    assert name == "only" and said is not None and "only" in said
    with pytest.raises(UsageError, match="lists 2 models: a, b"):
        pick_model("u", ["a", "b"], None)
    with pytest.raises(UsageError, match="lists no model"):
        pick_model("u", [], None)
    assert one_line(b"<html>\n  <body>\n") == "<html> <body>"


def test_run_refuses_a_web_server_before_measuring(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with serve(Quiet) as url:
        rc = main(["run", "--url", url, "--model", "m", "--output-tokens", "4",
                   "--concurrency", "1", "--requests", "2", "--quiet",
                   "--out", str(tmp_path / "res")])  # fmt: skip
    err = capsys.readouterr()
    text = err.out + err.err
    assert rc == 2, text
    lines = [ln for ln in text.splitlines() if ln.strip()]
    assert len(lines) == 1, text
    assert "does not answer as an LLM server" in lines[0] and "404" in lines[0]
    assert not (tmp_path / "res" / "results.db").exists()


def test_capacity_refuses_a_web_server_before_measuring(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every request failed at a server that is none, and the search halved its rate down
    to the minimum, each level longer than the last (minutes), before it ended."""
    with serve(Quiet) as url:
        rc = main(["capacity", "--url", url, "--model", "m", "--output-tokens", "4",
                   "--slo", "ttft_ms.p99=500", "--duration-s-per-level", "1",
                   "--out", str(tmp_path / "res")])  # fmt: skip
    err = capsys.readouterr()
    text = err.out + err.err
    assert rc == 2, text
    lines = [ln for ln in text.splitlines() if ln.strip()]
    assert len(lines) == 1, text
    assert "does not answer as an LLM server" in lines[0] and "404" in lines[0]


def test_run_picks_the_one_listed_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    summary = tmp_path / "s.json"
    with spawn(CalibrationConfig(ttft_ms=1.0, itl_ms=1.0)) as url:
        rc = main(["run", "--url", url, "--engine", "vllm", "--output-tokens", "4",
                   "--concurrency", "1", "--requests", "2", "--warmup", "0", "--quiet",
                   "--out", str(tmp_path / "res"), "--json", str(summary)])  # fmt: skip
    text = " ".join(capsys.readouterr().err.split())
    assert rc == 0, text
    assert "model: calibration (the one model" in text
    assert json.loads(summary.read_text())["verdict"] == "valid"


SWEEP = ["--concurrency", "1,2", "--requests-per-level", "3", "--warmup", "0",
         "--output-tokens", "4", "--input-tokens", "8", "--no-report"]  # fmt: skip


def test_a_sweep_refuses_a_web_server_target_before_it_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The sweep's check (as for a URL nothing answers at): one line, exit 2, nothing made."""
    out = tmp_path / "sweep"
    with serve(Quiet) as web, spawn(CalibrationConfig(ttft_ms=1.0, itl_ms=1.0)) as llm:
        rc = main(["sweep", "--target", f"web={web},engine=vllm,model=calibration",
                   "--target", f"llm={llm},engine=vllm,model=calibration",
                   "--out", str(out), *SWEEP])  # fmt: skip
    err = capsys.readouterr()
    lines = [ln for ln in (err.out + err.err).splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1, lines
    assert "target web:" in lines[0] and "does not answer as an LLM server" in lines[0]
    assert not out.exists()


def test_a_sweep_whose_check_cannot_ask_fails_the_target_and_measures_the_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the check cannot reach the URLs (a Ray sweep's are the nodes'), the target's
    first level asks: it fails, and the other targets are measured."""
    from crossover.sweep import check

    remote = check._check_url_target
    monkeypatch.setattr(check, "_check_url_target", lambda c, t, local: remote(c, t, False))
    out = tmp_path / "sweep"
    with serve(Quiet) as web, spawn(CalibrationConfig(ttft_ms=1.0, itl_ms=1.0)) as llm:
        rc = main(["sweep", "--target", f"web={web},engine=vllm,model=calibration",
                   "--target", f"llm={llm},engine=vllm,model=calibration",
                   "--out", str(out), *SWEEP])  # fmt: skip
    err = capsys.readouterr()
    text = err.out + err.err
    assert rc == 3, text
    runs = json.loads((out / "sweep.json").read_text())["runs"]
    assert {r["target"] for r in runs} == {"llm"}
    flat = " ".join(text.split())
    assert "does not answer as an LLM server" in flat
    assert "web: not run, it is not an LLM server" in flat
    assert "<body>" not in text and "Traceback" not in text


def test_a_sweep_url_target_without_model_gets_the_one_its_server_lists(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "sweep"
    with spawn(CalibrationConfig(ttft_ms=1.0, itl_ms=1.0)) as llm:
        rc = main(["sweep", "--target", f"llm={llm},engine=vllm", "--out", str(out), *SWEEP])
    err = capsys.readouterr()
    assert rc == 0, err.err
    assert "model: calibration (the one model" in " ".join(err.err.split())
    runs = json.loads((out / "sweep.json").read_text())["runs"]
    assert {r["summary"]["engine"]["model"] for r in runs} == {"calibration"}


def test_capacity_stops_where_every_request_breaks_the_protocol(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A server that lists its models but streams events that are no JSON failed every
    request at every rate: the search halved down to the minimum rate, minutes of ever
    longer levels, before it said so."""

    class Garbled(Quiet):
        def do_GET(self) -> None:
            body = json.dumps({"object": "list", "data": [{"id": "m"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            self.wfile.write(b"data: {not json\n\ndata: [DONE]\n\n")

    with serve(Garbled) as url:
        rc = main(["capacity", "--url", url, "--model", "m", "--output-tokens", "4",
                   "--slo", "ttft_ms.p99=500", "--duration-s-per-level", "1", "--warmup", "0",
                   "--out", str(tmp_path / "res")])  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 1, err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert "every request at 1 requests/s failed" in last and "malformed event" in last
