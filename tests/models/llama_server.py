"""A real llama-server on a GGUF for the models tests: start, wait healthy, stop."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from crossover.builds.llamacpp import find_llama_server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def post(url: str, body: dict[str, Any]) -> Any:
    req = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read())


def stream(url: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The SSE events of a streamed request, parsed (``data: [DONE]`` left out)."""
    req = urllib.request.Request(
        url, json.dumps(body | {"stream": True}).encode(), {"Content-Type": "application/json"}
    )
    events = []
    with urllib.request.urlopen(req, timeout=60) as resp:
        for raw in resp:
            line = raw.decode().strip()
            if line.startswith("data: ") and line != "data: [DONE]":
                events.append(json.loads(line[6:]))
    return events


@contextmanager
def llama_server(gguf: Path, log: Path, extra: tuple[str, ...] = ()) -> Iterator[str]:
    """The base URL of a llama-server (2 threads, one slot, ``extra`` arguments)
    serving ``gguf``; its output goes to ``log``."""
    binary = find_llama_server()
    assert binary is not None, "make test builds llama-server first"
    port = free_port()
    args = [str(binary), "-m", str(gguf), "--host", "127.0.0.1", "--port", str(port)]
    args += ["-c", "1024", "-np", "1", "-t", "2", *extra]
    with log.open("w") as log_fh:
        proc = subprocess.Popen(
            args, stdout=log_fh, stderr=subprocess.STDOUT, start_new_session=True
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, f"llama-server exited: {log.read_text()[-2000:]}"
            try:
                with urllib.request.urlopen(base + "/health", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "llama-server did not become healthy"
            time.sleep(0.2)
        yield base
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
