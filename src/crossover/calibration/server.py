"""Public API of the calibration server: build it, serve it in-process, or spawn it.

* ``build_app(config)``: the aiohttp application.
* ``serve(config)``: async context manager, in this process's event loop (tests).
* ``spawn(config)``: sync context manager, a separate process in its own process group
  (``python -m crossover.calibration``), for CPU-isolated measurement.
* ``run_server(config, host, port)``: blocking, on uvloop when available (the CLI).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

from aiohttp import web

from crossover.calibration.config import CalibrationConfig, FaultSpec, build_config, parse_fault
from crossover.calibration.handlers import CLOSING_KEY, CONFIG_KEY, STATE_KEY, Handlers
from crossover.calibration.state import ServerState
from crossover.errors import EngineError, UsageError

__all__ = [
    "CalibrationConfig",
    "FaultSpec",
    "build_app",
    "build_config",
    "parse_fault",
    "run_server",
    "serve",
    "spawn",
]

# in-flight handlers (never_answer, long streams) are cancelled after this on shutdown
_SHUTDOWN_TIMEOUT_S = 0.1


def build_app(config: CalibrationConfig) -> web.Application:
    """The calibration server as an aiohttp application (state lives in the app)."""
    app = web.Application(client_max_size=64 * 1024 * 1024)
    state = ServerState(config.truth_max_requests)
    h = Handlers(config, state)
    app[CONFIG_KEY] = config
    app[STATE_KEY] = state
    app[CLOSING_KEY] = asyncio.Event()

    async def _closing(app: web.Application) -> None:
        app[CLOSING_KEY].set()

    app.on_shutdown.append(_closing)
    app.router.add_get("/health", h.health)
    app.router.add_get("/v1/models", h.models)
    if config.version is not None:
        app.router.add_get("/version", h.version)
    app.router.add_post("/tokenize", h.tokenize)
    app.router.add_post("/detokenize", h.detokenize)
    app.router.add_get("/metrics", h.metrics)
    app.router.add_get("/calibration/truth", h.truth)
    app.router.add_post("/calibration/reset", h.reset)
    app.router.add_post("/v1/completions", h.completions)
    app.router.add_post("/v1/chat/completions", h.chat)
    return app


@contextlib.asynccontextmanager
async def serve(
    config: CalibrationConfig, host: str = "127.0.0.1", port: int = 0, backlog: int = 4096
) -> AsyncIterator[str]:
    """Serve in the running event loop; yields the base URL (``http://host:port``).

    The listen backlog is large so that thousands of clients connecting at once are not
    dropped (aiohttp's default of 128 makes the kernel drop SYNs and clients retry 1 s later).
    """
    runner = web.AppRunner(
        build_app(config),
        access_log=None,
        handle_signals=False,
        shutdown_timeout=_SHUTDOWN_TIMEOUT_S,
    )
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port, backlog=backlog)
        try:
            await site.start()
        except OSError as exc:
            raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
        bound = runner.addresses[0][1]
        url_host = f"[{host}]" if ":" in host else host
        yield f"http://{url_host}:{bound}"
    finally:
        await runner.cleanup()


def _new_event_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    return loop


def run_server(
    config: CalibrationConfig,
    host: str = "127.0.0.1",
    port: int = 8000,
    announce: bool = True,
) -> None:
    """Serve until SIGINT/SIGTERM (uvloop when available)."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        async with serve(config, host, port) as url:
            # the long-lived objects made so far never need collecting again: fewer and
            # shorter GC pauses while thousands of streams are in flight
            gc.freeze()
            if announce:
                print(f"calibration server listening on {url}", flush=True)
            await stop.wait()

    with asyncio.Runner(loop_factory=_new_event_loop) as runner:
        runner.run(main())


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


@contextlib.contextmanager
def spawn(
    config: CalibrationConfig,
    host: str = "127.0.0.1",
    port: int | None = None,
    cpu: int | None = None,
    startup_timeout_s: float = 15.0,
) -> Iterator[str]:
    """Run the server in a separate process group; yields its base URL, kills it on exit.

    ``cpu`` pins the server to one core (Linux), so its timing is not disturbed by the
    client it is measuring.
    """
    port = _free_port(host) if port is None else port
    with tempfile.TemporaryDirectory(prefix="crossover-calib-") as tmp:
        cfg_path = Path(tmp) / "calibration.json"
        cfg_path.write_text(json.dumps(config.model_dump(mode="json")))
        log_path = Path(tmp) / "server.log"
        argv = [sys.executable, "-m", "crossover.calibration", "--config", str(cfg_path)]
        argv += ["--host", host, "--port", str(port)]
        if cpu is not None:
            argv += ["--cpu", str(cpu)]
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        try:
            url_host = f"[{host}]" if ":" in host else host
            url = f"http://{url_host}:{port}"
            _wait_healthy(proc, url, startup_timeout_s, log_path)
            yield url
        finally:
            _stop_group(proc)


def _wait_healthy(proc: subprocess.Popen[bytes], url: str, timeout_s: float, log: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise EngineError(
                f"calibration server exited with status {proc.returncode} at start", _tail(log)
            )
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=1.0) as r:  # noqa: S310
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise EngineError(f"calibration server not healthy after {timeout_s:g} s at {url}", _tail(log))


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
