"""commbench without GPUs: sizes, bandwidth math, the timer seam, the environment its
workers inherit, rank 0's figures (on a stand-in torch) written whole or not at all, the
JSON the advisor reads back, and the no-GPU exit."""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from crossover.advise import load_curve
from crossover.cli.app import main
from crossover.commbench import (
    MULTICAST_OFF,
    algbw_gbs,
    busbw_gbs,
    disable_multicast,
    gpu_count,
    message_sizes,
    run_commbench,
    time_calls,
)
from crossover.commbench.runner import _worker, iterations
from crossover.errors import UsageError

KIB, GIB = 1024, 1024**3


def test_message_sizes_1k_to_1g() -> None:
    twos = message_sizes(KIB, GIB, 2)
    assert twos[0] == KIB and twos[-1] == GIB and len(twos) == 21
    fours = message_sizes(KIB, GIB, 4)
    assert fours == [KIB * 4**i for i in range(11)]
    assert message_sizes(KIB, 3 * KIB, 2) == [KIB, 2 * KIB, 3 * KIB]
    with pytest.raises(ValueError, match="factor"):
        message_sizes(KIB, GIB, 3)


def test_bus_bandwidth_is_algbw_times_2_n_minus_1_over_n() -> None:
    # 512 MiB in 1681.47 us on 2x H200 (data/allreduce/h200x2-nvlink.json): 319 GB/s
    size, us = 536870912, 1681.47
    assert algbw_gbs(size, us) == pytest.approx(319.3, rel=1e-3)
    assert busbw_gbs(size, us, 2) == pytest.approx(algbw_gbs(size, us))
    assert busbw_gbs(size, us, 4) == pytest.approx(1.5 * algbw_gbs(size, us))
    assert busbw_gbs(size, us, 8) == pytest.approx(1.75 * algbw_gbs(size, us))


class FakeClock:
    """A device clock that advances 10 us per all-reduce; a CUDA-event-like timer on it."""

    def __init__(self) -> None:
        self.now_us = 0.0
        self.calls = 0
        self._t0 = 0.0

    def call(self) -> None:
        self.calls += 1
        self.now_us += 10.0

    def start(self) -> None:
        self._t0 = self.now_us

    def stop(self) -> float:
        return (self.now_us - self._t0) / 1e3  # ms, as CUDA events report


def test_time_calls_excludes_warmup_and_averages() -> None:
    clock = FakeClock()
    assert time_calls(clock.call, clock, warmup=5, iters=20) == pytest.approx(10.0)
    assert clock.calls == 25
    with pytest.raises(ValueError, match="iters"):
        time_calls(clock.call, clock, warmup=0, iters=0)
    assert iterations(KIB, 50) == 50 and iterations(GIB, 50) == 8 and iterations(8 * GIB, 50) == 5


def _clear_multicast_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # setenv first so that the original state (usually unset) is restored afterwards
    for key in MULTICAST_OFF:
        monkeypatch.setenv(key, "unset-by-test")
        monkeypatch.delenv(key)


def _child_env(keys: list[str]) -> dict[str, str | None]:
    return {k: os.environ.get(k) for k in keys}


def test_spawned_children_inherit_multicast_off(monkeypatch: pytest.MonkeyPatch) -> None:
    _clear_multicast_env(monkeypatch)
    assert disable_multicast() == {
        "NCCL_NVLS_ENABLE": "0",
        "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
        "NVSHMEM_DISABLE_NVLS": "1",
    }
    # a real child started the way torch.multiprocessing.spawn starts them
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        seen = pool.apply(_child_env, (list(MULTICAST_OFF),))
    assert seen == MULTICAST_OFF


def _raw(sizes: list[int]) -> dict[str, Any]:
    rows = [
        {"size_bytes": s, "eager_us": 40.0 + s / 3.0e5, "graph_us": 11.0 + s / 3.2e5} for s in sizes
    ]
    return {"device": "NVIDIA H200", "torch": "2.11.0+cu130", "nccl": "2.28.9", "rows": rows}


def test_run_writes_a_table_the_advisor_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _clear_multicast_env(monkeypatch)
    spawned: dict[str, Any] = {}

    def fake_spawn(fn: Any, args: tuple[Any, ...], nprocs: int) -> None:
        world, _port, opts, out = args
        spawned.update(
            nprocs=nprocs, world=world, env={k: os.environ.get(k) for k in MULTICAST_OFF}
        )
        Path(out).write_text(json.dumps(_raw(opts["sizes"])))

    result = run_commbench(
        min_bytes=KIB, max_bytes=GIB, factor=4, spawn=fake_spawn, count=lambda: 2
    )
    assert spawned == {"nprocs": 2, "world": 2, "env": MULTICAST_OFF}
    assert result.env == MULTICAST_OFF
    assert [p.size_bytes for p in result.points] == message_sizes(KIB, GIB, 4)
    assert "CUDA graph" in result.mode
    s = result.summary
    assert s.floor_us == pytest.approx(11.0, abs=0.3)
    assert s.link_gbs_per_direction == 450.0  # H200 NVLink 900 GB/s both directions
    assert s.peak_at_bytes == GIB
    assert s.peak_link_fraction == pytest.approx(s.peak_busbw_gbs / 450.0, rel=1e-3)
    path = tmp_path / "ar.json"
    result.write(path)
    data = json.loads(path.read_text())
    assert data["schema"] == "crossover.commbench/1"
    curve = load_curve(path)
    assert curve.gpus == 2
    assert curve.latency_us(8192, 2) == pytest.approx(11.0 + 8192 / 3.2e5, rel=0.01)
    # and the advisor takes it as its all-reduce curve
    advice_path = tmp_path / "advice.json"
    args = ["advise", "--gpu", "H200", "--gpus", "2", "--model", "llama-3.1-8b"]
    assert main([*args, "--allreduce-table", str(path), "--json", str(advice_path)]) == 0
    assert json.loads(advice_path.read_text())["allreduce_curve"] == str(path)


def test_eager_only_puts_eager_points_in_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    _clear_multicast_env(monkeypatch)

    def fake_spawn(fn: Any, args: tuple[Any, ...], nprocs: int) -> None:
        raw = _raw(args[2]["sizes"])
        for r in raw["rows"]:
            r["graph_us"] = None
        Path(args[3]).write_text(json.dumps(raw))

    result = run_commbench(max_bytes=4 * KIB, eager_only=True, spawn=fake_spawn, count=lambda: 4)
    assert result.gpus == 4 and "eager" in result.mode
    assert result.points == result.eager_points and result.eager_summary is None


def test_too_few_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    _clear_multicast_env(monkeypatch)
    with pytest.raises(UsageError, match=r"want 2\.\.2"):
        run_commbench(gpus=4, spawn=lambda *a: None, count=lambda: 2)
    monkeypatch.setitem(sys.modules, "torch", None)  # torch not installed
    with pytest.raises(UsageError, match="torch is not installed"):
        gpu_count()
    fake = types.SimpleNamespace(
        cuda=types.SimpleNamespace(is_available=lambda: False, device_count=lambda: 0)
    )
    monkeypatch.setitem(sys.modules, "torch", fake)
    with pytest.raises(UsageError, match="found 0"):
        gpu_count()


def test_cli_without_gpus_exits_2_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)
    _clear_multicast_env(monkeypatch)
    out = tmp_path / "ar.json"
    assert main(["commbench", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: commbench needs >= 2 CUDA GPUs")
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize(
    "args", [["--factor", "3"], ["--min-size", "1X"], ["--min-size", "2M", "--max-size", "1M"]]
)
def test_cli_bad_flags_exit_2(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["commbench", *args]) == 2
    assert "error:" in capsys.readouterr().err


class _StandInEvent:
    """``torch.cuda.Event``: 2 ms between any two records."""

    def __init__(self, enable_timing: bool) -> None:
        assert enable_timing

    def record(self) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: _StandInEvent) -> float:
        return 2.0


def _stand_in_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Just enough of torch and torch.distributed for one rank of a worker, without GPUs
    (the rank's environment is put back afterwards)."""

    def nothing(*args: Any, **kwargs: Any) -> None:
        return None

    cuda = types.SimpleNamespace(
        set_device=nothing,
        synchronize=nothing,
        empty_cache=nothing,
        Event=_StandInEvent,
        get_device_name=lambda dev: "Stand-in GPU",
        nccl=types.SimpleNamespace(version=lambda: (2, 28, 9)),
    )
    torch = types.SimpleNamespace(
        __version__="2.11.0+test",
        bfloat16="bf16",
        float64="f64",
        cuda=cuda,
        device=lambda kind, index: f"{kind}:{index}",
        zeros=lambda n, dtype, device: [0.0] * n,
        tensor=lambda values, dtype, device: types.SimpleNamespace(item=lambda: values[0]),
    )
    dist = types.SimpleNamespace(
        init_process_group=nothing,
        barrier=nothing,
        all_reduce=nothing,
        destroy_process_group=nothing,
        ReduceOp=types.SimpleNamespace(MAX="max"),
    )
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setitem(sys.modules, "torch.distributed", dist)
    _clear_multicast_env(monkeypatch)
    for key in ("MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.setenv(key, "set-by-test")


OPTS = {"sizes": [KIB], "warmup": 1, "iters": 5, "graph_calls": 1, "eager_only": True}


def test_rank_0_writes_its_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _stand_in_torch(monkeypatch)
    out = tmp_path / "rank0.json"
    _worker(0, 2, 29500, OPTS, str(out))
    raw = json.loads(out.read_text("utf-8"))
    assert raw == {
        "device": "Stand-in GPU",
        "torch": "2.11.0+test",
        "nccl": "2.28.9",
        "rows": [{"size_bytes": KIB, "eager_us": 400.0, "graph_us": None}],
    }
    assert [p.name for p in tmp_path.iterdir()] == ["rank0.json"]


def test_an_interrupted_rank_0_leaves_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As ``tests/test_files.py`` checks the other writers: every write gets half its data
    down, then Ctrl-C."""
    _stand_in_torch(monkeypatch)
    out = tmp_path / "rank0.json"
    out.write_text('{"old": true}\n')

    def half(self: Path, data: bytes | str, *args: object, **kwargs: object) -> int:
        raw = data.encode() if isinstance(data, str) else data
        with self.open("wb") as f:
            f.write(raw[: len(raw) // 2])
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(Path, "write_bytes", half)
        m.setattr(Path, "write_text", half)
        with pytest.raises(KeyboardInterrupt):
            _worker(0, 2, 29500, OPTS, str(out))
    assert out.read_text() == '{"old": true}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["rank0.json"]  # no .tmp left behind
