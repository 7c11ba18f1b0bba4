"""The client floor: measured against a spawned calibration server, cached, looked up."""

from __future__ import annotations

from pathlib import Path

import pytest

from crossover.errors import UsageError
from crossover.metrics.client_floor import (
    FloorCache,
    load_cache,
    lookup,
    measure_floor,
    resolve_client_floor,
    save_results,
)


@pytest.fixture(scope="module")
def low_load() -> object:
    return measure_floor(4, itl_ms=5.0, output_tokens=24, ttft_ms=2.0)


def test_floor_is_small_at_low_load(low_load: object) -> None:
    r = low_load
    assert r.concurrency == 4 and r.requests == 4 and r.succeeded == 4  # type: ignore[attr-defined]
    d = r.delivery_ms  # type: ignore[attr-defined]
    assert d.count == 4 * 24
    # delivery is arrival minus the server's emission stamp: same clock, never negative
    assert 0.0 <= d.p50 < 5.0
    assert d.p99 is not None and d.max is not None and d.max >= d.p99 >= d.p50


def test_floor_fields(low_load: object) -> None:
    r = low_load
    assert r.send_lag_ms.count == 4 and r.send_lag_ms.p50 >= 0  # type: ignore[attr-defined]
    assert r.loop_lag_ms.count > 0  # type: ignore[attr-defined]
    assert r.client_cpu_s > 0 and r.tokens == 4 * 24  # type: ignore[attr-defined]
    assert r.tokens_per_s > 0 and r.tokens_per_cpu_s > 0  # type: ignore[attr-defined]
    assert r.tpot_p50_ms == pytest.approx(5.0, rel=0.1)  # type: ignore[attr-defined]
    assert r.tpot_error_pct < 10  # type: ignore[attr-defined]
    assert r.server.configured_gap_p50_ms == pytest.approx(5.0)  # type: ignore[attr-defined]
    assert r.server.emitted_gap_p50_ms == pytest.approx(5.0, rel=0.1)  # type: ignore[attr-defined]
    floor = r.client_floor()  # type: ignore[attr-defined]
    assert floor.delivery_p50_ms == r.delivery_ms.p50  # type: ignore[attr-defined]


def test_cache_lookup_nearest_level(low_load: object, tmp_path: Path) -> None:
    base = low_load.model_dump()  # type: ignore[attr-defined]
    levels = []
    for c, p50 in ((1, 0.1), (64, 1.0), (512, 9.0)):
        m = type(low_load).model_validate({**base, "concurrency": c})
        m.delivery_ms.p50 = p50
        levels.append(m)
    path = save_results(levels, tmp_path / "floor.json")
    cache = load_cache(path)
    assert [m.concurrency for m in cache.measurements] == [1, 64, 512]
    assert lookup(cache, 48).concurrency == 64  # type: ignore[union-attr]
    assert lookup(cache, 2).concurrency == 1  # type: ignore[union-attr]
    assert lookup(cache, 5000).concurrency == 512  # type: ignore[union-attr]
    assert lookup(cache, None).concurrency == 512  # type: ignore[union-attr]
    assert lookup(FloorCache(), 4) is None
    # a new measurement at a level replaces the old one
    save_results([levels[0]], path)
    assert len(load_cache(path).measurements) == 3

    floor, note = resolve_client_floor(str(path), 300)
    assert floor is not None and floor.delivery_p50_ms == 9.0
    assert "concurrency 512" in note
    assert resolve_client_floor("off", 4) == (None, "client floor: off")
    none, why = resolve_client_floor("auto", 4, tmp_path / "missing.json")
    assert none is None and "crossover calibrate" in why
    with pytest.raises(UsageError):
        resolve_client_floor(str(tmp_path / "nope.json"), 4)
    (tmp_path / "bad.json").write_text("[1, 2")
    with pytest.raises(UsageError):
        resolve_client_floor(str(tmp_path / "bad.json"), 4)
    # a broken cache does not stop a run that only asked for "auto"
    none, why = resolve_client_floor("auto", 4, tmp_path / "bad.json")
    assert none is None and "ignored" in why


def test_each_transport_has_its_own_floor(low_load: object, tmp_path: Path) -> None:
    """A lean run compares with lean's floor; where only aiohttp's was measured, with
    that one (the higher: the cautious side). An old cache entry is aiohttp's."""
    base = low_load.model_dump()  # type: ignore[attr-defined]
    assert base["transport"] == "aiohttp"
    old = {k: v for k, v in base.items() if k != "transport"}
    assert type(low_load).model_validate(old).transport == "aiohttp"  # type: ignore[attr-defined]
    aio = type(low_load).model_validate({**base, "concurrency": 64})
    aio.delivery_ms.p50 = 2.0
    path = save_results([aio], tmp_path / "floor.json")
    floor, note = resolve_client_floor(str(path), 64, transport="lean")
    assert floor is not None and floor.delivery_p50_ms == 2.0 and "aiohttp" in note
    lean = type(low_load).model_validate({**base, "concurrency": 64, "transport": "lean"})
    lean.delivery_ms.p50 = 0.5
    save_results([lean], path)
    assert len(load_cache(path).measurements) == 2  # one per transport at the level
    floor, note = resolve_client_floor(str(path), 64, transport="lean")
    assert floor is not None and floor.delivery_p50_ms == 0.5 and "lean" in note
    floor, _ = resolve_client_floor(str(path), 64)
    assert floor is not None and floor.delivery_p50_ms == 2.0


def test_the_lean_client_measures_its_floor() -> None:
    r = measure_floor(4, itl_ms=5.0, output_tokens=24, ttft_ms=2.0, transport="lean")
    assert r.transport == "lean" and r.succeeded == 4 and r.tokens == 4 * 24
    assert r.delivery_ms.p50 is not None and 0.0 <= r.delivery_ms.p50 < 5.0
