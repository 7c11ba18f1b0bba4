"""``warmup_requests: level`` end to end: each level of a sweep against a real calibration
server is warmed up by one wave of its own concurrency (c requests sent at once), so a
level's first burst is never the first the engine sees, whatever levels ran before."""

from __future__ import annotations

from pathlib import Path

import yaml

from crossover.cli.app import main
from crossover.records.store import Store

from .conftest import Linear, servers

#: a first token after 50 ms: a wave's sends all land before any of its replies ends
SLOW_START = Linear(a_ms=1.0, b_ms=0.0, ttft_ms=50.0)


def test_level_warms_each_level_with_one_wave_of_its_concurrency(tmp_path: Path) -> None:
    with servers(SLOW_START) as (url,):
        config = tmp_path / "sweep.yaml"
        config.write_text(yaml.safe_dump({
            "targets": [{"name": "A", "url": url, "engine": "vllm", "model": "calibration"}],
            # 16 skips 2..8 and is past the default's min(level, 8)
            "concurrency": [1, 16], "requests_per_level": 16, "output_tokens": 4,
            "input_tokens": 8, "warmup_requests": "level", "warmup_every_level": True,
        }))  # fmt: skip
        out = tmp_path / "s"
        assert main(["sweep", "--config", str(config), "--out", str(out), "--no-report"]) == 0
    with Store(out / "sweep.db") as store:
        runs = {r.key: r.run_id for r in store.runs()}
        assert sorted(runs) == ["A|c=16|r=0", "A|c=1|r=0"]
        for c in (1, 16):
            records = store.records(runs[f"A|c={c}|r=0"])
            warm = [r for r in records if r.warmup]
            assert len(warm) == c
            assert all(r.ok for r in warm)
            assert len(records) - len(warm) == 16  # the measured requests are as before
            # one wave: every warm-up request was sent before the first of them ended
            ends = [r.t_done_ns for r in warm if r.t_done_ns is not None]
            assert max(r.t_send_ns for r in warm) < min(ends)


def test_warm_up_requests_ask_for_warmup_output_tokens_and_the_run_stays_valid(
    tmp_path: Path,
) -> None:
    """``warmup_output_tokens``: each warm-up request asks for that many tokens and is
    checked against its own count; the measured ones still ask for ``output_tokens``, and
    the shorter warm-up neither makes the level invalid nor is counted in it."""
    with servers(SLOW_START) as (url,):
        config = tmp_path / "sweep.yaml"
        config.write_text(yaml.safe_dump({
            "targets": [{"name": "A", "url": url, "engine": "vllm", "model": "calibration"}],
            "concurrency": [8], "requests_per_level": 8, "output_tokens": 12,
            "input_tokens": 8, "warmup_requests": "level", "warmup_output_tokens": 3,
        }))  # fmt: skip
        out = tmp_path / "s"
        assert main(["sweep", "--config", str(config), "--out", str(out), "--no-report"]) == 0
    with Store(out / "sweep.db") as store:
        (run,) = store.runs()
        records = store.records(run.run_id)
    warm = [r for r in records if r.warmup]
    measured = [r for r in records if not r.warmup]
    assert len(warm) == 8 and len(measured) == 8
    assert {(r.expected_output_tokens, r.completion_tokens) for r in warm} == {(3, 3)}
    assert {(r.expected_output_tokens, r.completion_tokens) for r in measured} == {(12, 12)}
    assert run.summary is not None
    assert run.summary["verdict"] == "valid", run.summary["problems"]
    assert run.summary["requests"]["matched"] == 8
    assert run.context["config"]["warmup_output_tokens"] == 3
