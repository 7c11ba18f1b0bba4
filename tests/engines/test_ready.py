"""An engine's start read back from its log (``crossover.engines.ready``): the real
engines' logs captured on the H200 and here, and the clock's edge cases."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from crossover.cli.app import main
from crossover.engines import registry
from crossover.engines.effective import log_ready
from crossover.engines.launchrec import LaunchRecord, header_line
from crossover.engines.ready import ready_after

LOGS = Path(__file__).parents[1] / "fixtures" / "logs"


def _text(name: str) -> str:
    path = LOGS / name
    if path.suffix == ".gz":
        with gzip.open(path, "rt", encoding="utf-8", errors="replace", newline="") as f:
            return f.read()
    return path.read_text(encoding="utf-8", errors="replace")


@pytest.mark.parametrize(
    ("log", "engine", "seconds", "line"),
    [
        # launch header 15:1x to vLLM's last stamp before uvicorn's startup line
        ("vllm-0.26-h200-vllm.log", "vllm", 96.0, 93),
        ("vllm-0.26.0-h200-qwen3-30b-a3b.log.gz", "vllm", 127.0, 95),
        ("sglang-0.5.17-h200-qwen3-30b-a3b.log.gz", "sglang", 147.0, 60),
        # llama.cpp stamps its own elapsed time: 0.01.237.533 is 1.237533 s
        ("llama-server-cpu-gemma3-270m.log", "llamacpp", 1.237533, 13),
        ("llama-server-cuda-h200-graphs-on.log", "llamacpp", 3.41048, 8),
        # tritonserver hosting vLLM: the launch header to "Started HTTPService" (its own
        # stamps, microseconds)
        ("tritonserver-2.51-h200-vllm-ready.log.gz", "triton", 90.893168, 94),
    ],
)
def test_real_logs(log: str, engine: str, seconds: float, line: int) -> None:
    name, ready = log_ready(_text(log))
    assert name == engine
    assert ready is not None
    assert ready.seconds == pytest.approx(seconds, abs=1e-6)
    assert ready.line == line


def test_a_log_that_never_got_ready_says_nothing() -> None:
    # tritonserver whose vLLM model failed to load: no HTTP service started
    name, ready = log_ready(_text("tritonserver-2.51-h200-vllm-numpy1-scipy.log.gz"))
    assert name == "triton" and ready is None
    # a wall clock needs the launch header: the CPU Triton log has none
    clock = registry.get("triton").ready_clock
    assert clock is not None
    text = _text("tritonserver-2.51-cpu-llamacpp-gemma3-270m.log")
    assert "Started HTTPService at" in text
    assert ready_after(text, clock) is None


def _header(started_at: str, engine: str = "triton") -> str:
    return header_line(
        LaunchRecord(engine=engine, argv=["tritonserver"], env={}, port=1, started_at=started_at)
    )


def _triton(started_at: str, *stamps: str) -> str:
    lines = [_header(started_at).rstrip("\n")]
    lines += [f"I{s} 8158 model_lifecycle.cc:849] \"successfully loaded 'm'\"" for s in stamps[:-1]]
    lines.append(f'I{stamps[-1]} 8158 http_server.cc:4713] "Started HTTPService at 127.0.0.1:1"')
    return "\n".join(lines) + "\n"


def test_glog_stamps_with_their_fraction() -> None:
    clock = registry.get("triton").ready_clock
    assert clock is not None
    ready = ready_after(
        _triton("2026-12-04T18:59:20+00:00", "1204 18:59:21.5", "1204 18:59:30.035768"), clock
    )
    assert ready is not None and ready.seconds == pytest.approx(10.035768)


def test_a_local_clock_off_utc_is_read_by_its_first_stamp() -> None:
    clock = registry.get("triton").ready_clock
    assert clock is not None
    # UTC+5:30: every stamp 5.5 h ahead of the header; the start still 12 s
    text = _triton("2026-12-04T18:59:20+00:00", "1205 00:29:22.0", "1205 00:29:32.0")
    ready = ready_after(text, clock)
    assert ready is not None and ready.seconds == pytest.approx(12.0)
    assert "+5.5 h from UTC" in ready.basis


def test_launched_in_december_ready_in_january() -> None:
    clock = registry.get("triton").ready_clock
    assert clock is not None
    ready = ready_after(
        _triton("2026-12-31T23:59:50+00:00", "1231 23:59:55.0", "0101 00:00:20.0"), clock
    )
    assert ready is not None and ready.seconds == pytest.approx(30.0)


def test_a_reading_before_the_launch_is_refused() -> None:
    clock = registry.get("triton").ready_clock
    assert clock is not None
    # stamps a minute before the header: not a zone (less than a quarter hour), a misread
    assert (
        ready_after(
            _triton("2026-12-04T18:59:20+00:00", "1204 18:58:10.0", "1204 18:58:20.0"), clock
        )
        is None
    )


def test_verify_config_says_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "v.json"
    log = LOGS / "vllm-0.26-h200-vllm.log"
    main(["verify-config", str(log), "--json", str(out), "--allow-unverified"])
    printed = capsys.readouterr().out
    assert "ready 96.0 s after its launch" in printed
    doc = json.loads(out.read_text())
    assert doc["ready"]["seconds"] == pytest.approx(96.0) and doc["ready"]["line"] == 93
