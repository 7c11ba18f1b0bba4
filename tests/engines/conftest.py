"""Shared helpers for the engine tests: a fake llama-server and a no-leftovers check."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from crossover.engines import EngineConfig, lifecycle

FAKE_ENGINE = Path(__file__).with_name("fake_engine.py")
LOGS = Path(__file__).parents[1] / "fixtures" / "logs"


def processes_mentioning(text: str) -> list[int]:
    """Pids (not zombies) whose command line contains ``text``, from /proc."""
    found: list[int] = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry.name}/cmdline").read_bytes().replace(b"\0", b" ")
            state = Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and text.encode() in cmdline:
            found.append(int(entry.name))
    return found


@pytest.fixture
def fake_model(tmp_path: Path) -> Path:
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF fake")
    return model


@pytest.fixture
def fake_config(fake_model: Path) -> Callable[..., EngineConfig]:
    def make(mode: str = "ok", **fields: object) -> EngineConfig:
        env = {"FAKE_ENGINE_MODE": mode, **dict(fields.pop("env", {}) or {})}  # type: ignore[call-overload]
        base: dict[str, object] = {
            "engine": "llamacpp",
            "model": str(fake_model),
            "executable": [sys.executable, str(FAKE_ENGINE)],
            "parallel": 8,
            "context_tokens": 512,
            "health_timeout_s": 15.0,
            "env": env,
        }
        base.update(fields)
        return EngineConfig.model_validate(base)

    return make


@pytest.fixture(autouse=True)
def no_process_left(tmp_path: Path) -> Iterator[None]:
    """Every engine a test starts (its command line names tmp_path) is gone afterwards."""
    yield
    deadline = time.monotonic() + 3.0
    while processes_mentioning(str(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_mentioning(str(tmp_path)) == []
    leftover = [e for e in lifecycle.live_engines() if tmp_path in e.log_path.parents]
    assert leftover == []
