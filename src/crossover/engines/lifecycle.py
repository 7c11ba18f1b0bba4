"""Start an engine, wait until it is healthy, watch it, and stop its whole process group.

``launch(config, log_path)`` returns a ``RunningEngine`` (also a context manager);
``alaunch(config, log_path)`` is the same as an async context manager. The engine runs
from an argument list in a new session (its own process group), bound to 127.0.0.1 on a
free port unless told otherwise, with stdout and stderr in ``log_path`` after one header
line recording the launch (``crossover.engines.effective.LaunchRecord``).

No engine outlives us: ``stop()`` sends SIGTERM to the group, waits, then SIGKILLs it;
an atexit hook stops whatever is still running, SIGTERM/SIGHUP become ``SystemExit`` (so
``with`` blocks unwind) when their handlers were the defaults, and an engine started from
the main thread gets ``PR_SET_PDEATHSIG`` so that even a SIGKILLed parent takes it down.
A watcher thread notices at once an engine that dies during a run: ``alive()``,
``raise_if_dead()``, ``add_exit_callback(cb)`` and ``await wait_died()`` report it.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType, TracebackType

from crossover.engines import logpatterns as lp
from crossover.engines import registry
from crossover.engines.adapters import launch_spec
from crossover.engines.config import EngineConfig
from crossover.engines.effective import (
    EffectiveSettings,
    LaunchRecord,
    effective_settings,
    header_line,
    keep_earlier_log,
    read_log,
)
from crossover.engines.install import cached_program
from crossover.engines.processes import (
    check_port_free,
    exit_description,
    free_port,
    group_members,
    pdeathsig_preexec,
    signal_group,
)
from crossover.engines.refused import refused_flag_note
from crossover.engines.spec import EngineSpec, LaunchSpec, VersionProbe
from crossover.errors import EngineError, UsageError
from crossover.secrets import redacted_argv, redacted_env

LOG_TAIL_LINES = 20
#: how often the multicast guard reads new log lines
GUARD_INTERVAL_S = 0.2
_MULTICAST = re.compile(lp.MULTICAST_LINE)


def multicast_forbidden(launch_env: dict[str, str | None]) -> bool:
    """NVLink multicast is off for this engine: NCCL_NVLS_ENABLE=0 in its environment
    (crossover's vLLM adapter always sets it; docs/engines.md says why)."""
    value = launch_env.get("NCCL_NVLS_ENABLE", os.environ.get("NCCL_NVLS_ENABLE"))
    return value is not None and value.strip() == "0"


_LIVE: dict[int, RunningEngine] = {}
_LIVE_LOCK = threading.Lock()
_HOOKS = {"atexit": False, "signals": False}


def _resolve_executable(program: str, adapter: EngineSpec) -> str:
    if os.sep in program:
        path = Path(program).expanduser()
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    else:
        found = shutil.which(program)
        if found:
            return found
    raise UsageError(
        f"{adapter.display_name}: executable {program!r} not found "
        "(install it, or set executable in the engine config)"
    )


def _default_cached(adapter: EngineSpec) -> list[str] | None:
    """The program ``crossover engines install`` cached, where the default one is not on
    PATH (None: on PATH, or nothing cached)."""
    if shutil.which(adapter.default_executable[0]):
        return None
    path = cached_program(adapter)
    return [str(path)] if path else None


def _preflight(config: EngineConfig) -> EngineConfig:
    adapter = registry.get(config.engine)
    if adapter.install is not None and config.executable is None:
        built = _default_cached(adapter)
        if built:
            config = config.model_copy(update={"executable": built})
    _resolve_executable(adapter.executable(config)[0], adapter)
    looks_like_path = config.model.startswith(("/", "./", "../", "~"))
    if (adapter.model_is_local or looks_like_path) and not config.model_path().exists():
        raise UsageError(f"{adapter.display_name}: model path not found: {config.model}")
    if config.port:
        check_port_free(config.host, config.port)
    return config


def live_engines() -> list[RunningEngine]:
    """Engines started by this process and not yet stopped."""
    with _LIVE_LOCK:
        return list(_LIVE.values())


def _stop_all() -> None:
    with _LIVE_LOCK:
        engines = list(_LIVE.values())
    for engine in engines:
        with contextlib.suppress(Exception):
            engine.stop(timeout_s=3.0)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def _install_hooks() -> None:
    if not _HOOKS["atexit"]:
        _HOOKS["atexit"] = True
        atexit.register(_stop_all)
    # Signal handlers can only be set from the main thread; try again on a later launch.
    if not _HOOKS["signals"] and threading.current_thread() is threading.main_thread():
        _HOOKS["signals"] = True
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) == signal.SIG_DFL:
                signal.signal(sig, _on_signal)


# --- the running engine --------------------------------------------------------------------
class RunningEngine:
    """A started engine: its URL, pid, log, version, and a watcher for its death."""

    def __init__(
        self,
        config: EngineConfig,
        adapter: EngineSpec,
        spec: LaunchSpec,
        proc: subprocess.Popen[bytes],
        port: int,
        log_path: Path,
        launch: LaunchRecord,
    ) -> None:
        self.config = config
        self.adapter = adapter
        self.spec = spec
        self.port = port
        self.log_path = log_path
        self.launch = launch
        self.version: str | None = None
        self.pid = proc.pid
        self.pgid = proc.pid  # start_new_session: the engine leads its own group
        self._proc = proc
        self._exited = threading.Event()
        self._returncode: int | None = None
        self._healthy = False
        self._stopping = False
        self._stopped = False
        self._stop_lock = threading.Lock()
        self._death: EngineError | None = None
        self._callbacks: list[Callable[[EngineError], None]] = []
        self._cb_lock = threading.Lock()
        connect = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(config.host, config.host)
        self.connect_host = connect
        self.url = f"http://[{connect}]:{port}" if ":" in connect else f"http://{connect}:{port}"
        self._watcher = threading.Thread(
            target=self._watch, name=f"crossover-watch-{self.pid}", daemon=True
        )
        self._watcher.start()
        if multicast_forbidden(launch.env):
            threading.Thread(
                target=self._guard_multicast, name=f"crossover-guard-{self.pid}", daemon=True
            ).start()

    # -- state --
    @property
    def name(self) -> str:
        return self.adapter.display_name

    @property
    def returncode(self) -> int | None:
        return self._returncode

    @property
    def metrics_url(self) -> str | None:
        if self.spec.metrics_port is not None:
            host = f"[{self.connect_host}]" if ":" in self.connect_host else self.connect_host
            return f"http://{host}:{self.spec.metrics_port}/metrics"
        path = self.adapter.metrics_path
        return self.url + path if path else None

    @property
    def health_url(self) -> str:
        return self.url + self.adapter.health_path

    def alive(self) -> bool:
        return not self._exited.is_set()

    def exited_within(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the watcher to see the process exit.

        After a burst of connection errors the process may be gone while its watcher
        thread has not run yet; this closes that race without polling the process
        (``Popen.poll`` cannot see past the watcher's blocking ``wait``).
        """
        return self._exited.wait(timeout_s)

    def raise_if_dead(self) -> None:
        if self._death is not None:
            raise self._death
        if self._exited.is_set() and not self._stopping:
            raise EngineError(f"{self.name} is not running", self.log_tail())

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 64 * 1024))
                text = f.read().decode("utf-8", errors="replace")
        except OSError:
            return ""
        kept = [ln for ln in text.splitlines() if not ln.startswith("# crossover-launch: ")]
        return "\n".join(kept[-lines:])

    def effective_settings(self) -> EffectiveSettings:
        return effective_settings(read_log(self.log_path), self.config.engine)

    # -- death watch --
    def _guard_multicast(self) -> None:
        """Stop the engine at once when its log shows an NVLink-multicast all-reduce while
        the environment forbids it: on shared machines multicast can take every GPU of
        the host out of service (seen: vLLM 0.26 picking FlashInfer ``mnnvl`` for TP=2)."""
        offset, number, rest = 0, 0, b""
        while not self._exited.is_set():
            try:
                with open(self.log_path, "rb") as f:
                    f.seek(offset)
                    data = f.read()
            except OSError:
                data = b""
            offset += len(data)
            *lines, rest = (rest + data).split(b"\n")
            for raw in lines:
                number += 1
                line = raw.decode("utf-8", "replace")
                if not line.startswith("# crossover-launch:") and _MULTICAST.search(line):
                    self._death = EngineError(
                        f"{self.name} turned on an NVLink-multicast all-reduce (log line "
                        f"{number}: {line.strip()[:160]}) although NCCL_NVLS_ENABLE=0 forbids "
                        "multicast; stopped at once",
                        self.log_tail(),
                    )
                    signal_group(self.pgid, signal.SIGKILL)
                    return
            self._exited.wait(GUARD_INTERVAL_S)

    def _watch(self) -> None:
        rc = self._proc.wait()
        self._returncode = rc
        if self._death is None and not self._stopping and self._healthy:
            self._death = EngineError(
                f"{self.name} {exit_description(rc)} during the run", self.log_tail()
            )
        self._exited.set()
        if self._death is not None:
            with self._cb_lock:
                callbacks = list(self._callbacks)
            for cb in callbacks:
                with contextlib.suppress(Exception):
                    cb(self._death)

    def add_exit_callback(self, callback: Callable[[EngineError], None]) -> None:
        """Call ``callback(error)`` (from the watcher thread) if the engine dies unexpectedly."""
        with self._cb_lock:
            if self._death is None:
                self._callbacks.append(callback)
                return
        callback(self._death)

    async def wait_died(self) -> EngineError:
        """Return (never raise) the error once the engine dies unexpectedly; await it in a race."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[EngineError] = loop.create_future()

        def _resolve(err: EngineError) -> None:
            if not future.done():
                future.set_result(err)

        def _from_thread(err: EngineError) -> None:
            with contextlib.suppress(RuntimeError):  # loop already closed
                loop.call_soon_threadsafe(_resolve, err)

        self.add_exit_callback(_from_thread)
        return await future

    # -- health and version --
    def _http_get(self, path: str, timeout_s: float = 2.0) -> tuple[int, bytes] | None:
        conn = http.client.HTTPConnection(self.connect_host, self.port, timeout=timeout_s)
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            return resp.status, resp.read(1 << 20)
        except (OSError, http.client.HTTPException):
            return None
        finally:
            conn.close()

    def check_health(self) -> bool:
        got = self._http_get(self.adapter.health_path)
        return got is not None and got[0] == 200

    def _early_exit(self) -> EngineError:
        if self._death is not None:  # stopped by the multicast guard
            return self._death
        rc = self._returncode if self._returncode is not None else -1
        tail = self.log_tail()
        # a flag this version of the engine does not know: which, and who gave it
        why = refused_flag_note(self.adapter, self.config.extra_args, tail)
        said = f": {why}" if why else ""
        return EngineError(
            f"{self.name} {exit_description(rc)} before becoming healthy{said}", tail
        )

    def _not_healthy(self, timeout_s: float) -> EngineError:
        return EngineError(
            f"{self.name} did not become healthy within {timeout_s:g} s ({self.health_url})",
            self.log_tail(),
        )

    def wait_healthy(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        pause = 0.05
        while True:
            if self._exited.is_set():
                raise self._early_exit()
            if self.check_health():
                self._healthy = True
                return
            if time.monotonic() >= deadline:
                raise self._not_healthy(timeout_s)
            self._exited.wait(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 1.5, 0.5)

    async def await_healthy(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        pause = 0.05
        while True:
            if self._exited.is_set():
                raise self._early_exit()
            if await asyncio.to_thread(self.check_health):
                self._healthy = True
                return
            if time.monotonic() >= deadline:
                raise self._not_healthy(timeout_s)
            await asyncio.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 1.5, 0.5)

    def probe_version(self) -> str | None:
        """The engine's version from its first probe that answers; None if none does."""
        for probe in self.adapter.version_probes:
            text: str | None = None
            if probe.kind == "http":
                got = self._http_get(probe.target[0])
                if got is None or got[0] != 200:
                    continue
                text = http_probe_text(got[1], probe)
            elif probe.kind == "stamp":
                text = _stamp_version(self.adapter.executable(self.config)[0], probe)
            else:
                exe = self.adapter.executable(self.config)
                if probe.kind == "python":
                    argv = [exe[0], "-c", *probe.target]
                else:
                    argv = [*exe, *probe.target]
                # in the engine's own environment (a PYTHONPATH or PATH its launch sets)
                env = {k: v for k, v in os.environ.items() if k not in self.spec.env_unset}
                env.update(self.spec.env_set)
                try:
                    done = subprocess.run(
                        argv, capture_output=True, timeout=20, check=False, env=env
                    )
                except (OSError, subprocess.TimeoutExpired):
                    continue
                text = (done.stdout + done.stderr).decode("utf-8", errors="replace")
            found = probe_result(text, probe)
            if found is not None:
                return found
        return None

    # -- stopping --
    def stop(self, timeout_s: float = 10.0) -> int | None:
        """SIGTERM the process group, wait, SIGKILL what is left; returns the exit status."""
        with self._stop_lock:
            if self._stopped:
                return self._returncode
            self._stopping = True
            signal_group(self.pgid, signal.SIGTERM)
            if not self._exited.wait(timeout_s):
                signal_group(self.pgid, signal.SIGKILL)
                self._exited.wait(10.0)
            deadline = time.monotonic() + min(timeout_s, 5.0)
            while group_members(self.pgid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if group_members(self.pgid):
                signal_group(self.pgid, signal.SIGKILL)
                end = time.monotonic() + 5.0
                while group_members(self.pgid) and time.monotonic() < end:
                    time.sleep(0.02)
            self._stopped = True
            with _LIVE_LOCK:
                _LIVE.pop(self.pid, None)
            return self._returncode

    def __enter__(self) -> RunningEngine:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "alive" if self.alive() else f"exited {self._returncode}"
        return f"<RunningEngine {self.config.engine} pid={self.pid} {self.url} {state}>"


# --- versions ------------------------------------------------------------------------------
#: the longest version kept: a server's answer is untrusted, and a version is a short name
MAX_VERSION_CHARS = 200


def http_probe_text(body: bytes, probe: VersionProbe) -> str | None:
    """An HTTP version probe's answer as text: the body, or its ``json_key`` value."""
    text = body.decode("utf-8", errors="replace")
    if not probe.json_key:
        return text
    try:
        value = json.loads(text).get(probe.json_key)
    except (ValueError, AttributeError):
        return None
    return str(value) if value else None


def probe_result(text: str | None, probe: VersionProbe) -> str | None:
    """The version in a probe's answer (its ``regex``'s group 1 where it has one), cut to
    ``MAX_VERSION_CHARS``; ``None`` where it holds none."""
    if text and probe.regex:
        m = re.search(probe.regex, text, re.MULTILINE)
        text = m.group(1) if m else None
    if not text or not text.strip():
        return None
    return text.strip()[:MAX_VERSION_CHARS]


# --- starting ------------------------------------------------------------------------------
def start(config: EngineConfig, log_path: Path | str) -> RunningEngine:
    """Start the engine without waiting for health (``launch`` and ``alaunch`` wait)."""
    config = _preflight(config)
    adapter = registry.get(config.engine)
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    port = config.port or free_port(config.host)
    spec = launch_spec(config, port, log_path.parent)
    for path, content in spec.files.items():
        path.write_text(content, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in spec.env_unset}
    env.update(spec.env_set)
    record = LaunchRecord(  # the log's header: secrets' values redacted
        engine=config.engine,
        argv=redacted_argv(spec.argv),
        env=redacted_env({**{k: None for k in spec.env_unset}, **spec.env_set}),
        port=port,
        started_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    _install_hooks()
    keep_earlier_log(log_path)  # a resumed sweep's earlier engine: its log stays evidence
    with open(log_path, "wb") as log:
        log.write(header_line(record).encode())
        log.flush()
        try:
            proc = subprocess.Popen(
                spec.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                close_fds=True,
                preexec_fn=pdeathsig_preexec(),  # only a prctl call in the child
            )
        except OSError as exc:
            raise UsageError(
                f"{adapter.display_name}: cannot start {spec.argv[0]}: {exc.strerror}"
            ) from None
    engine = RunningEngine(config, adapter, spec, proc, port, log_path, record)
    with _LIVE_LOCK:
        _LIVE[engine.pid] = engine
    return engine


def launch(
    config: EngineConfig, log_path: Path | str, *, health_timeout_s: float | None = None
) -> RunningEngine:
    """Start the engine and wait until it is healthy; it is stopped again if that fails."""
    engine = start(config, log_path)
    try:
        engine.wait_healthy(health_timeout_s or config.health_timeout_s)
        engine.version = engine.probe_version()
    except BaseException:
        engine.stop()
        raise
    return engine


@contextlib.asynccontextmanager
async def alaunch(
    config: EngineConfig, log_path: Path | str, *, health_timeout_s: float | None = None
) -> AsyncIterator[RunningEngine]:
    """``async with alaunch(cfg, log) as engine:`` healthy inside, stopped on the way out."""
    engine = start(config, log_path)
    try:
        await engine.await_healthy(health_timeout_s or config.health_timeout_s)
        engine.version = await asyncio.to_thread(engine.probe_version)
        yield engine
    finally:
        await asyncio.to_thread(engine.stop)


def _stamp_version(executable: str, probe: VersionProbe) -> str | None:
    """The version a build stamp (``probe.target[0]``, JSON) beside ``executable`` or
    in a folder above it (up to three) gives through ``probe.template``."""
    found = shutil.which(executable)
    if found is None:
        return None
    here = Path(found).resolve().parent
    for folder in (here, *list(here.parents)[:3]):
        path = folder / probe.target[0]
        if path.is_file():
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                return str(probe.template.format(**data)) if probe.template else None
            except (OSError, ValueError, KeyError, AttributeError, TypeError):
                return None
    return None
