"""``freeze_gc: true``: before each level the sweep POSTs the engine's GC-freeze path
(SGLang's /freeze_gc), over real HTTP to a stand-in that counts the POSTs; a refusal is
one line and the level goes on; an engine without the endpoint is refused by ``--check``
in one line."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from crossover.cli.app import main
from crossover.spec.load import Level
from crossover.sweep.config import build_sweep_config
from crossover.sweep.level import TargetSession
from crossover.sweep.scrape import NVMLSampler
from tests.engines.test_engines_sglang_gc import _Server


class _Engine:
    """A launched engine as the session sees it between levels: up, at ``url``."""

    def __init__(self, url: str) -> None:
        self.url = url

    def alive(self) -> bool:
        return True


def _prepare_levels(url: str, freeze: bool, levels: int) -> list[tuple[str, str]]:
    launch = {"engine": "sglang", "model": "Qwen/Qwen3-30B-A3B", "freeze_gc": freeze}
    cfg = build_sweep_config(
        {"concurrency": [1, 2], "output_tokens": 4, "workers": 1,
         "targets": [{"name": "sglang", "launch": launch}]}
    )  # fmt: skip
    said: list[tuple[str, str]] = []
    session = TargetSession(
        cfg.targets[0], cfg, Path("."), NVMLSampler(), on_engine=lambda n, m: said.append((n, m))
    )
    session.engines = [_Engine(url)]

    async def go() -> None:
        for c in range(1, levels + 1):
            await session.prepare(Level("concurrency", c))

    asyncio.run(go())
    return said


def test_each_level_freezes_once() -> None:
    server = _Server(200)
    try:
        said = _prepare_levels(server.url, True, 3)
    finally:
        server.close()
    assert server.posts == 3 and said == []


def test_off_by_default_nothing_is_posted() -> None:
    server = _Server(200)
    try:
        _prepare_levels(server.url, False, 2)
    finally:
        server.close()
    assert server.posts == 0


def test_a_refused_freeze_is_one_line_and_the_level_goes_on() -> None:
    server = _Server(404)
    try:
        said = _prepare_levels(server.url, True, 1)
    finally:
        server.close()
    ((name, message),) = said
    assert name == "sglang" and server.posts == 1
    assert message == (
        f"warning: POST {server.url}/freeze_gc failed (status 404: "
        '{"detail":"Not Found"}): its garbage collector is not frozen before c=1'
    )


def test_check_refuses_freeze_gc_for_an_engine_without_the_endpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text(
        "concurrency: [1]\noutput_tokens: 8\ninput_tokens: 16\ntargets:\n"
        "  - name: v\n    launch: {engine: vllm, model: m, freeze_gc: true}\n"
    )
    assert main(["sweep", "--config", str(path), "--check"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "freeze_gc: true needs an engine with a GC-freeze endpoint" in err
    assert "vLLM has none" in err
