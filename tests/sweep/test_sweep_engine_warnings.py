"""When a launched target's levels are done, the sweep says what its engine log warns of
(``crossover verify-config``'s warnings), on the real H200 log of llama.cpp's host prompt
cache stalling its slots; a log with nothing to warn of says nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path

from crossover.engines.effective import EffectiveSettings, effective_settings, read_log
from crossover.sweep.config import build_sweep_config
from crossover.sweep.level import TargetSession
from crossover.sweep.scrape import NVMLSampler

LOGS = Path(__file__).parents[1] / "fixtures" / "logs"


class _Engine:
    """A stopped engine's log: what ``RunningEngine`` gives the session."""

    def __init__(self, log: Path) -> None:
        self.log_path = log
        self.stopped = False

    def effective_settings(self) -> EffectiveSettings:
        return effective_settings(read_log(self.log_path), "llamacpp")

    def stop(self) -> None:
        self.stopped = True


def _stop_with(log: Path, tmp_path: Path) -> tuple[list[tuple[str, str]], _Engine]:
    cfg = build_sweep_config(
        {"concurrency": [1], "output_tokens": 4,
         "targets": [{"name": "llamacpp", "launch": {"engine": "llamacpp", "model": "m.gguf"}}]}
    )  # fmt: skip
    said: list[tuple[str, str]] = []
    session = TargetSession(
        cfg.targets[0], cfg, tmp_path, NVMLSampler(), on_engine=lambda n, m: said.append((n, m))
    )
    engine = _Engine(log)
    session.engines = [engine]
    asyncio.run(session.stop())
    return said, engine


def test_the_host_prompt_cache_warning_is_said_when_the_target_stops(tmp_path: Path) -> None:
    log = LOGS / "llama-server-cuda-h200-prefix-hostcache.log.gz"
    said, engine = _stop_with(log, tmp_path)
    assert engine.stopped
    ((name, message),) = said
    assert name == "llamacpp"
    assert message.startswith("warning: llama-server saved slot state into its full host")
    assert "at least 6 times (280.027 MiB per entry)" in message
    assert "--cache-ram 0" in message
    assert message.endswith(f"({log.name}, line 22)")


def test_a_log_with_nothing_to_warn_of_says_nothing(tmp_path: Path) -> None:
    said, engine = _stop_with(LOGS / "llama-server-cuda-h200-graphs-on.log", tmp_path)
    assert engine.stopped and said == []


def test_a_log_that_cannot_be_read_says_nothing(tmp_path: Path) -> None:
    said, engine = _stop_with(tmp_path / "gone.log", tmp_path)
    assert engine.stopped and said == []
