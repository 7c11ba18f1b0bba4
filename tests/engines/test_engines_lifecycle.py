"""Lifecycle against a real subprocess (tests/engines/fake_engine.py, a llama-server
stand-in): health, version, effective settings, failures, death watch, no orphans.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from crossover.engines import EngineConfig, alaunch, launch
from crossover.engines.processes import group_members
from crossover.errors import EngineError, UsageError

Make = Callable[..., EngineConfig]


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def test_launch_health_version_settings_stop(fake_config: Make, tmp_path: Path) -> None:
    log = tmp_path / "results" / "engine.log"
    engine = launch(fake_config(), log)
    try:
        assert engine.alive()
        assert engine.url == f"http://127.0.0.1:{engine.port}"
        assert engine.version == "b9999-fake0001"  # from /props build_info
        assert engine.metrics_url == engine.url + "/metrics"
        assert engine.log_path == log
        settings = engine.effective_settings()
        assert settings.value("parallel_slots") == 8
        assert settings.value("context_tokens") == 512
        assert log.read_text().startswith("# crossover-launch: ")
        assert engine.launch.argv[-1] == "--metrics"
    finally:
        engine.stop()
    assert not engine.alive()
    assert gone(engine.pid)
    assert group_members(engine.pgid) == []
    assert engine.stop() == engine.returncode  # idempotent


def test_a_build_without_git_metadata_is_named_by_crossovers_stamp(
    fake_config: Make, tmp_path: Path
) -> None:
    """llama-cpp-python's sdist has no git metadata: the server says b0-unknown and
    "commit unknown" (the 0.3.36 tree's --version); the build.json crossover wrote beside its build names it."""
    import json
    import sys

    from .conftest import FAKE_ENGINE

    build = tmp_path / "llamacpp-0.3.36-cpu-abc"
    (build / "build" / "bin").mkdir(parents=True)
    exe = build / "build" / "bin" / "llama-server"
    exe.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = --version ]; then echo "version: 0.5.0-dev (build 0, commit unknown)" >&2; exit 0; fi\n'
        f'exec {sys.executable} {FAKE_ENGINE} "$@"\n'
    )
    exe.chmod(0o755)
    (build / "build.json").write_text(
        json.dumps({"source": "llama-cpp-python-0.3.36", "label": "cpu"})
    )
    with launch(fake_config("unknown_build", executable=[str(exe)]), tmp_path / "e.log") as e:
        assert e.version == "llama.cpp of llama-cpp-python-0.3.36 (built by crossover: cpu)"


def test_graphs_off_reaches_the_engine_and_the_record(fake_config: Make, tmp_path: Path) -> None:
    with launch(fake_config(cuda_graphs=False), tmp_path / "e.log") as engine:
        assert "fake: cuda graphs off" in (tmp_path / "e.log").read_text()
        fact = engine.effective_settings().facts["cuda_graphs"]
        assert (fact.value, fact.verified) == (False, True)
    assert not engine.alive()


def test_crash_at_start_fails_fast_with_the_log_tail(fake_config: Make, tmp_path: Path) -> None:
    t0 = time.monotonic()
    with pytest.raises(EngineError) as info:
        launch(fake_config("crash_at_start"), tmp_path / "e.log")
    assert time.monotonic() - t0 < 5.0
    assert str(info.value) == "llama-server exited with status 1 before becoming healthy"
    tail = info.value.log_tail or ""
    assert "failed to load model" in tail
    assert len(tail.splitlines()) == 20
    assert "crossover-launch" not in tail


def test_slow_engine_is_waited_for(fake_config: Make, tmp_path: Path) -> None:
    with launch(fake_config("slow=1.0"), tmp_path / "e.log") as engine:
        assert engine.check_health()


def test_health_deadline(fake_config: Make, tmp_path: Path) -> None:
    with pytest.raises(EngineError, match=r"did not become healthy within 1 s"):
        launch(fake_config("never_healthy"), tmp_path / "e.log", health_timeout_s=1.0)


def test_busy_port_is_a_usage_error(fake_config: Make, tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(UsageError, match=f"port {port} on 127.0.0.1 is not free"):
            launch(fake_config(port=port), tmp_path / "e.log")
    assert not (tmp_path / "e.log").exists()  # refused before launching


def test_missing_binary_and_model_are_usage_errors(fake_config: Make, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="executable '/nope/llama-server' not found"):
        launch(fake_config(executable=["/nope/llama-server"]), tmp_path / "e.log")
    with pytest.raises(UsageError, match="model path not found"):
        launch(fake_config(model=str(tmp_path / "missing.gguf")), tmp_path / "e.log")


def test_engine_killed_mid_run_is_detected(fake_config: Make, tmp_path: Path) -> None:
    seen: list[EngineError] = []
    with launch(fake_config(), tmp_path / "e.log") as engine:
        engine.add_exit_callback(seen.append)
        os.kill(engine.pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while engine.alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not engine.alive()
        with pytest.raises(EngineError, match="llama-server was killed by SIGKILL during the run"):
            engine.raise_if_dead()
    assert len(seen) == 1


def test_async_launch_and_death_event(fake_config: Make, tmp_path: Path) -> None:
    async def scenario() -> tuple[str, int | None]:
        async with alaunch(fake_config("crash_after=0.5"), tmp_path / "e.log") as engine:
            assert engine.alive()
            assert engine.version
            err = await asyncio.wait_for(engine.wait_died(), timeout=10)
            return str(err), engine.returncode

    message, rc = asyncio.run(scenario())
    assert message == "llama-server exited with status 3 during the run"
    assert rc == 3


def test_async_launch_failure_raises_and_cleans_up(fake_config: Make, tmp_path: Path) -> None:
    async def scenario() -> None:
        async with alaunch(fake_config("crash_at_start"), tmp_path / "e.log"):
            pytest.fail("should not get here")

    with pytest.raises(EngineError, match="before becoming healthy"):
        asyncio.run(scenario())


def test_stop_escalates_to_sigkill(fake_config: Make, tmp_path: Path) -> None:
    engine = launch(fake_config("ignore_term"), tmp_path / "e.log")
    t0 = time.monotonic()
    rc = engine.stop(timeout_s=0.5)
    assert rc == -signal.SIGKILL
    assert time.monotonic() - t0 < 5
    assert gone(engine.pid)


def test_stop_takes_the_whole_process_group(fake_config: Make, tmp_path: Path) -> None:
    engine = launch(fake_config("spawn_child"), tmp_path / "e.log")
    members = group_members(engine.pgid)
    assert len(members) >= 2  # the engine and its grandchild
    engine.stop()
    assert group_members(engine.pgid) == []
    assert all(gone(pid) for pid in members)


def test_version_from_the_binary_when_props_is_missing(fake_config: Make, tmp_path: Path) -> None:
    with launch(fake_config("no_props"), tmp_path / "e.log") as engine:
        assert engine.version == "9999 (build 9999, commit fake0001)"  # llama-server --version


PARENT = """
import sys, time
from crossover.engines import engine_config, launch
cfg = engine_config(engine="llamacpp", model=sys.argv[1], executable=[sys.executable, sys.argv[2]])
engine = launch(cfg, sys.argv[3])
print(engine.pid, flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_no_orphan_when_the_parent_is_killed(sig: int, fake_model: Path, tmp_path: Path) -> None:
    """SIGTERM: the handler turns it into SystemExit and atexit stops the engine.
    SIGKILL: nothing runs in the parent; PR_SET_PDEATHSIG takes the engine down."""
    import subprocess
    import sys

    from .conftest import FAKE_ENGINE

    argv = [
        sys.executable,
        "-c",
        PARENT,
        str(fake_model),
        str(FAKE_ENGINE),
        str(tmp_path / "e.log"),
    ]
    parent = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        engine_pid = int(parent.stdout.readline())
        parent.send_signal(sig)
        assert parent.wait(timeout=15) == (128 + signal.SIGTERM if sig == signal.SIGTERM else -sig)
        deadline = time.monotonic() + 5
        while not gone(engine_pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert gone(engine_pid)
    finally:
        parent.kill()
        parent.wait()


def test_multicast_guard_stops_the_engine_at_once(fake_config: Make, tmp_path: Path) -> None:
    """An engine whose log shows an NVLink-multicast all-reduce while NCCL_NVLS_ENABLE=0
    forbids it is killed and reported, naming the line (shared GPUs: docs/engines.md)."""
    env = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1"}

    async def scenario() -> str:
        config = fake_config("multicast=0.5", env=env)
        async with alaunch(config, tmp_path / "e.log") as engine:
            err = await asyncio.wait_for(engine.wait_died(), timeout=10)
            assert not engine.alive()
            return str(err)

    message = asyncio.run(scenario())
    assert "NVLink-multicast all-reduce" in message
    assert "backend: mnnvl" in message
    assert "stopped at once" in message


def test_multicast_guard_reads_engine_lines_not_the_launch_header(
    fake_config: Make, tmp_path: Path
) -> None:
    # the header names TORCH_SYMM_MEM_DISABLE_MULTICAST; an engine that never uses
    # multicast runs on
    env = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1"}
    with launch(fake_config("ok", env=env), tmp_path / "e.log") as engine:
        time.sleep(1.0)
        assert engine.alive()
    # and where multicast is allowed, the guard does not run
    with launch(fake_config("multicast=0", env={"NCCL_NVLS_ENABLE": "1"}), tmp_path / "f.log") as e:
        time.sleep(1.0)
        assert e.alive()
