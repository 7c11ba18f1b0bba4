"""``crossover.measure.probes.url_version``: a URL target's server version, read by the
HTTP probes of its engine's adapter (``GET /version`` where none is known), as the runs
measured there keep it; a server that answers none has none."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from crossover.calibration.server import build_config, spawn
from crossover.measure.probes import url_version


def test_a_calibration_server_with_a_version_answers_as_vllm_does() -> None:
    with spawn(build_config(version="0.26.0")) as url:
        assert url_version(url, "vllm", {}) == "0.26.0"
        assert url_version(url, None, {}) == "0.26.0"  # no engine named: GET /version
        assert url_version(url + "/", "sglang", {}) == "0.26.0"  # its second probe
        assert url_version(url, "llamacpp", {}) is None  # /props: not there
    with spawn(build_config()) as url:
        assert url_version(url, "vllm", {}) is None  # 404


@contextmanager
def _answering(routes: dict[str, tuple[int, bytes]]) -> Iterator[str]:
    """A plain HTTP server answering GETs from ``routes`` (path: status, body)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status, body = routes.get(self.path, (404, b""))
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("routes", "engine", "expected"),
    [
        # SGLang's first probe, then its second
        ({"/get_server_info": (200, b'{"version": "0.5.17"}')}, "sglang", "0.5.17"),
        ({"/get_server_info": (401, b""), "/version": (200, b'{"version": "0.5.17"}')},
         "sglang", "0.5.17"),
        # llama.cpp's /props: a build without git metadata says no version
        ({"/props": (200, b'{"build_info": "b4567-abc1234"}')}, "llamacpp", "b4567-abc1234"),
        ({"/props": (200, b'{"build_info": "b0-unknown"}')}, "llamacpp", None),
        # not JSON, an empty value, a value far too long: untrusted, cut
        ({"/version": (200, b"<html>")}, "vllm", None),
        ({"/version": (200, b'{"version": ""}')}, "vllm", None),
        ({"/version": (200, json.dumps({"version": "9" * 5000}).encode())}, "vllm", "9" * 200),
    ],
)  # fmt: skip
def test_each_engine_s_probes_in_order(
    routes: dict[str, tuple[int, bytes]], engine: str, expected: str | None
) -> None:
    with _answering(routes) as url:
        assert url_version(url, engine, {}) == expected


def test_nothing_answering_is_no_version() -> None:
    assert url_version("http://127.0.0.1:9", "vllm", {}, timeout_s=0.5) is None


def test_a_number_given_as_the_calibration_server_s_version_is_its_text() -> None:
    with spawn(build_config(version=0.7)) as url:  # version: 0.7 in its YAML
        assert url_version(url, "vllm", {}) == "0.7"
