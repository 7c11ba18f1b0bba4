"""A level's samples end with its load: the counting after it (the re-tokenized witness,
the summary) is no sample of the level, and a slow one never keeps the samplers going."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from crossover.measure import Progress, build_prompts, new_run_id
from crossover.records.store import Store
from crossover.sweep.config import Level, build_sweep_config
from crossover.sweep.level import TargetSession
from crossover.sweep.scrape import NVMLSampler
from tests.sweep.conftest import Linear, servers


class SlowTokenizer:
    """Re-tokenizes slowly: the level's counting after its load takes a while (a c=512
    level's 1,024 streams took 2 s to re-tokenize and 2 s to summarize)."""

    name = "slow"

    def encode(self, text: str) -> list[int]:
        time.sleep(0.05)
        return list(range(max(1, len(text) // 4)))

    def decode(self, ids: list[int]) -> str:
        return "x" * len(ids)


def test_the_samples_end_where_the_load_ends(tmp_path: Path) -> None:
    with servers(Linear(a_ms=2.0, b_ms=0.0)) as (url,):
        cfg = build_sweep_config({
            "concurrency": [4], "output_tokens": 4, "warmup_requests": 0,
            "requests_per_concurrency": 2, "scrape_interval_s": 0.05,
            "targets": [{"name": "A", "url": url, "engine": "vllm", "model": "calibration"}],
        })  # fmt: skip
        session = TargetSession(cfg.targets[0], cfg, tmp_path, NVMLSampler())
        level = Level("concurrency", 4)

        async def go(store: Store) -> tuple[str, float]:
            run_cfg = await session.prepare(level)
            prompts = build_prompts(run_cfg, None, 8)
            run_id = new_run_id()
            t0 = time.perf_counter()
            await session.measure(
                run_cfg, level, store, run_id=run_id, key="A|c=4|r=0", prompts=prompts,
                progress=Progress(total=run_cfg.requests), tokenizer=SlowTokenizer(),
            )  # fmt: skip
            return run_id, time.perf_counter() - t0

        with Store(tmp_path / "sweep.db") as store:
            run_id, took = asyncio.run(go(store))
            samples = [t for s, t, _ in store.samples(run_id) if s == "prometheus"]
    assert samples, "the level was sampled"
    # 8 streams of 4 tokens re-tokenized at 50 ms an encode: over a second after the load
    assert took > 1.5
    assert max(samples) < took - 1.0, (max(samples), took)
