"""Helpers for the sweep tests: calibration servers with a closed-form latency model,
``crossover sweep`` in-process or as a child process, and the sweep database read back."""

from __future__ import annotations

import contextlib
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crossover.calibration.server import build_config, spawn
from crossover.records.store import RunRow, Store

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Linear:
    """A calibration server whose per-token gap is ``a + b x (other streams in flight)``."""

    a_ms: float
    b_ms: float
    ttft_ms: float = 5.0

    def itl(self, c: float) -> float:
        # a closed loop keeps c requests in flight: each one sees c - 1 others
        return self.a_ms + self.b_ms * (c - 1)

    def request_ms(self, c: float, n: int) -> float:
        """Time of one request of ``n`` tokens: TTFT, then n - 1 gaps."""
        return self.ttft_ms + (n - 1) * self.itl(c)

    def config(self, **kw: Any) -> Any:
        return build_config(
            ttft_ms=self.ttft_ms, itl_ms=self.a_ms, itl_per_stream_ms=self.b_ms, **kw
        )


def itl_crossover(x: Linear, y: Linear) -> float:
    """Where the per-token gaps are equal (TPOT too: it is the mean gap)."""
    return 1.0 + (y.a_ms - x.a_ms) / (x.b_ms - y.b_ms)


def throughput_crossover(x: Linear, y: Linear, n: int) -> float:
    """Where tokens/s are equal. Closed loop: c requests of (prompt + n) tokens every
    request time, so equal throughput means equal request time
    ``ttft + (n - 1) x itl(c)``."""
    return 1.0 + ((y.ttft_ms - x.ttft_ms) / (n - 1) + y.a_ms - x.a_ms) / (x.b_ms - y.b_ms)


@contextlib.contextmanager
def servers(*models: Linear, **kw: Any) -> Iterator[list[str]]:
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(spawn(m.config(**kw))) for m in models]


def target_flags(urls: dict[str, str]) -> list[str]:
    out: list[str] = []
    for name, url in urls.items():
        out += ["--target", f"{name}={url},engine=vllm,model=calibration"]
    return out


def read_sweep(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "sweep.json").read_text())
    return data


def db_runs(out: Path) -> list[RunRow]:
    with Store(out / "sweep.db") as store:
        return store.runs()


def db_records(out: Path, run_id: str) -> int:
    """Measured (not warm-up) requests recorded for ``run_id``."""
    with Store(out / "sweep.db") as store:
        return len(store.records(run_id, include_warmup=False))


def sweep_in(config: Path, out: Path, *extra: str) -> int:
    """``crossover sweep --config CONFIG --out OUT --no-report EXTRA...`` in this process:
    its exit status."""
    from crossover.cli.app import main

    return main(["sweep", "--config", str(config), "--out", str(out), "--no-report", *extra])


def one_error_line(err: str) -> str:
    """The one line ``err`` holds (a refusal), asserted to be one."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    return lines[0]


def crossover_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "crossover", *args]


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env["COLUMNS"] = "200"
    env.pop("FORCE_COLOR", None)
    return env


def done_runs(out: Path) -> int:
    """Runs the sweep finished so far (read while it runs; 0 before its database exists)."""
    if not (out / "sweep.db").exists():
        return 0
    try:
        return sum(r.status == "done" for r in db_runs(out))
    except Exception:  # the child is creating the database right now
        return 0


def start_and_interrupt(
    argv: list[str], out: Path, sig: int, after_done: int, timeout_s: float = 30.0
) -> subprocess.CompletedProcess[str]:
    """Start ``argv``; once ``after_done`` runs are finished and the next has records
    in flight, send ``sig``; return what the child did."""
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env()
    )
    try:
        deadline = time.monotonic() + timeout_s
        while done_runs(out) < after_done:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the sweep did not finish a level in time"
            time.sleep(0.05)
        while not _level_in_flight(out):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the next level did not start"
            time.sleep(0.02)
        proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)


def _level_in_flight(out: Path) -> bool:
    """A run is started and still running 10 ms later: its first requests are in flight
    (a level's records reach the database when it ends, ``RecordSink``, so they cannot
    tell; the SIGINT tests check that cut requests were recorded)."""

    def running() -> list[str]:
        try:
            return [r.run_id for r in db_runs(out) if r.status == "running"]
        except Exception:
            return []

    first = running()
    if not first:
        return False
    time.sleep(0.01)
    return first[-1] in running()


def open_request_ms(x: Linear, rate_rps: float, n: int) -> float:
    """Mean request time of ``n`` tokens under Poisson arrivals at ``rate_rps``.

    A request sees on average L others in flight (L = rate x request time, Little's law;
    arrivals see time averages), so T = ttft + (n - 1)(a + b L), solved for T. Infinite
    past the rate where the queue grows without bound (rate >= 1 / ((n - 1) b))."""
    load = rate_rps * (n - 1) * x.b_ms / 1000.0
    if load >= 1.0:
        return math.inf
    return (x.ttft_ms + (n - 1) * x.a_ms) / (1.0 - load)


def open_tpot_ms(x: Linear, rate_rps: float, n: int) -> float:
    """Mean per-token gap at ``rate_rps``: a + b x (streams in flight)."""
    return x.a_ms + x.b_ms * rate_rps * open_request_ms(x, rate_rps, n) / 1000.0


def capacity_rps(x: Linear, tpot_slo_ms: float, n: int) -> float:
    """The highest rate whose mean per-token gap stays within ``tpot_slo_ms``: with
    gap S, T = ttft + (n - 1) S and L = (S - a) / b = rate x T."""
    return (tpot_slo_ms - x.a_ms) / x.b_ms / ((x.ttft_ms + (n - 1) * tpot_slo_ms) / 1000.0)


#: the calibration server dressed as llama-server (tests/sweep/calib_engine.py)
CALIB_ENGINE = Path(__file__).with_name("calib_engine.py")


def calib_engine_target(
    tmp_path: Path,
    name: str,
    latency: dict[str, float] | None = None,
    env: dict[str, str] | None = None,
    **launch: Any,
) -> dict[str, Any]:
    """A sweep target that launches the calibration engine as llama-server: its latency
    settings in ``tmp_path/NAME.json``, a stand-in GGUF as its model."""
    from tests.ggufs import stand_in_gguf

    settings = tmp_path / f"{name}.json"
    settings.write_text(json.dumps(latency or {"ttft_ms": 2.0, "itl_ms": 2.0}))
    model = tmp_path / f"{name}.gguf"
    stand_in_gguf(model)
    block: dict[str, Any] = {
        "engine": "llamacpp",
        "model": str(model),
        "executable": [sys.executable, str(CALIB_ENGINE)],
        "parallel": 4,
        "health_timeout_s": 30,
        "env": {"CALIB_ENGINE_CONFIG": str(settings), **(env or {})},
        **launch,
    }
    return {"name": name, "model": "calibration", "launch": block}
