"""The sweep's ``transport`` (YAML key, ``crossover sweep --transport``) reaches every
level's run config; a transport nobody has is refused naming where it came from."""

from __future__ import annotations

from pathlib import Path

import pytest

from crossover.errors import UsageError
from crossover.sweep.config import Level, build_sweep_config, load_sweep_config
from crossover.sweep.level import TargetSession
from crossover.sweep.scrape import NVMLSampler

BASE = {
    "concurrency": [4],
    "output_tokens": 4,
    "targets": [{"name": "a", "url": "http://127.0.0.1:9", "model": "m"}],
}


@pytest.mark.parametrize("transport", ["aiohttp", "lean"])
def test_each_level_runs_on_the_sweep_transport(tmp_path: Path, transport: str) -> None:
    cfg = build_sweep_config({**BASE, "transport": transport})
    session = TargetSession(cfg.targets[0], cfg, tmp_path, NVMLSampler())
    run = session.run_config(["http://127.0.0.1:9"], "vllm", "m", Level("concurrency", 4))
    assert run.transport == transport


def test_the_default_is_aiohttp(tmp_path: Path) -> None:
    assert build_sweep_config(dict(BASE)).transport == "aiohttp"


def test_an_unknown_transport_names_the_flag_or_the_key(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="--transport"):
        build_sweep_config({**BASE, "transport": "curl"})
    path = tmp_path / "s.yaml"
    path.write_text("concurrency: [4]\noutput_tokens: 4\ntransport: curl\n"
                    "targets: [{name: a, url: 'http://127.0.0.1:9', model: m}]\n")  # fmt: skip
    with pytest.raises(UsageError, match="transport"):
        load_sweep_config(path)


def test_a_target_s_own_transport_wins_over_the_sweep_s(tmp_path: Path) -> None:
    # two targets on one engine that differ only in the client
    targets = [
        {"name": "a", "url": "http://127.0.0.1:9", "model": "m"},
        {"name": "b", "url": "http://127.0.0.1:9", "model": "m", "transport": "lean"},
    ]
    cfg = build_sweep_config({**BASE, "targets": targets})
    got = {}
    for t in cfg.targets:
        session = TargetSession(t, cfg, tmp_path, NVMLSampler())
        run = session.run_config(["http://127.0.0.1:9"], "vllm", "m", Level("concurrency", 4))
        got[t.name] = run.transport
    assert got == {"a": "aiohttp", "b": "lean"}


def test_a_target_s_unknown_transport_is_refused_naming_the_target(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("concurrency: [4]\noutput_tokens: 4\n"
                    "targets: [{name: a, url: 'http://127.0.0.1:9', model: m, transport: curl}]\n")  # fmt: skip
    with pytest.raises(UsageError, match="transport"):
        load_sweep_config(path)
