"""One run over several identical replicas: request i goes to replica i mod N, in this
process and over worker processes, and each record says which replica served it. Two
real calibration servers; their own request counters are the witness."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from crossover.calibration.config import CalibrationConfig
from crossover.calibration.server import spawn
from crossover.cli.app import main
from crossover.measure import execute
from crossover.records.store import Store
from crossover.spec.run import RunConfig

REQUESTS = 24
WARMUP = 4


@pytest.fixture
def replicas() -> Iterator[list[str]]:
    with (
        spawn(CalibrationConfig(ttft_ms=2.0, itl_ms=2.0)) as a,
        spawn(CalibrationConfig(ttft_ms=2.0, itl_ms=2.0)) as b,
    ):
        yield [a, b]


def served(url: str) -> int:
    with urllib.request.urlopen(url + "/calibration/truth", timeout=5) as resp:
        return int(json.loads(resp.read())["requests_total"])


def _run(bases: list[str], tmp: Path, **kw: object) -> tuple[str, Store]:
    cfg: dict[str, object] = {
        "url": bases[0],
        "urls": bases,
        "model": "calibration",
        "engine": "vllm",
        "concurrency": 4,
        "requests": REQUESTS,
        "output_tokens": 8,
        "input_tokens": 10,
        "warmup_requests": WARMUP,
    }
    cfg.update(kw)
    store = Store(tmp / "r.db")
    out = asyncio.run(execute(RunConfig(**cfg), store))  # type: ignore[arg-type]
    assert out.summary.verdict == "valid", out.summary.problems
    assert out.summary.requests.matched == REQUESTS
    return out.run_id, store


@pytest.mark.parametrize("workers", [1, 2])
def test_round_robin_over_two_replicas(replicas: list[str], tmp_path: Path, workers: int) -> None:
    run_id, store = _run(replicas, tmp_path, workers=workers)
    with store:
        records = store.records(run_id)
    measured = [r for r in records if not r.warmup]
    assert len(measured) == REQUESTS
    assert sum(r.replica == 0 for r in measured) == REQUESTS // 2
    assert sum(r.replica == 1 for r in measured) == REQUESTS // 2
    warm = [r for r in records if r.warmup]
    assert sorted(r.replica for r in warm if r.replica is not None) == [0, 0, 1, 1]
    # the servers saw exactly that: every request served, half each
    assert [served(u) for u in replicas] == [(REQUESTS + WARMUP) // 2] * 2


def test_open_loop_round_robin(replicas: list[str], tmp_path: Path) -> None:
    run_id, store = _run(replicas, tmp_path, concurrency=None, rate_rps=100.0, warmup_requests=0)
    with store:
        measured = store.records(run_id, include_warmup=False)
    assert sorted(r.replica or 0 for r in measured) == [0] * 12 + [1] * 12
    assert [served(u) for u in replicas] == [REQUESTS // 2] * 2


def test_one_url_records_no_replica(replicas: list[str], tmp_path: Path) -> None:
    run_id, store = _run(replicas[:1], tmp_path, urls=[])
    with store:
        assert {r.replica for r in store.records(run_id)} == {None}
    assert served(replicas[0]) == REQUESTS + WARMUP
    assert served(replicas[1]) == 0


def test_url_must_lead_urls() -> None:
    with pytest.raises(ValueError, match="url must be the first of urls"):
        RunConfig(
            url="http://127.0.0.1:1",
            urls=["http://127.0.0.1:2", "http://127.0.0.1:1"],
            model="m",
            concurrency=1,
            output_tokens=1,
        )


def test_cli_run_takes_several_urls(
    replicas: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["run", "--model", "calibration", "--engine", "vllm", "--output-tokens", "8"]
    args += ["--input-tokens", "10", "--concurrency", "2", "--requests", "10", "--warmup", "0"]
    args += ["--out", str(tmp_path), "--quiet", "--client-floor", "off"]
    for u in replicas:
        args += ["--url", u]
    assert main(args) == 0, capsys.readouterr().err
    assert "+1 replica, round robin" in capsys.readouterr().out
    assert [served(u) for u in replicas] == [5, 5]
    with Store(tmp_path / "results.db") as store:
        (run,) = store.runs()
        assert sorted(r.replica or 0 for r in store.records(run.run_id)) == [0] * 5 + [1] * 5


def test_cli_a_bad_second_url_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["run", "--url", "http://127.0.0.1:1", "--url", "http://127.0.0.1:2/v1"]
    args += ["--model", "m", "--output-tokens", "4", "--concurrency", "1"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --url: 'http://127.0.0.1:2/v1' ends in /v1")
    assert len(err.splitlines()) == 1
