"""Measure NCCL all-reduce across the local GPUs: one process per GPU, eager and graphed.

Each size is timed with CUDA events, after a warm-up, twice: called eagerly from Python
(what a framework without graphs pays, host launch overhead included) and replayed from
a CUDA graph that captured ``graph_calls`` all-reduces (what decode pays, since engines
run decode in graphs). A rank's figure is its mean per call; the reported figure is the
slowest rank's (MAX across ranks).

NVLink multicast (NVLS, symmetric-memory multicast, NVSHMEM NVLS) stays OFF: it can take
down GPUs shared with others. ``MULTICAST_OFF`` is set in this process's environment
before any child starts, so every spawned worker inherits it, and again in each worker
before NCCL initialises; nothing here calls a multicast API.
"""

from __future__ import annotations

import importlib
import json
import os
import socket
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from crossover.commbench.results import CommbenchResult, Point, message_sizes, summarize
from crossover.errors import UsageError
from crossover.files import write_atomic
from crossover.multicast import MULTICAST_OFF

# Fewer timed calls for big messages: about this many bytes per size and mode.
BYTES_PER_SIZE = 8 * 1024**3


def disable_multicast(environ: Any = None) -> dict[str, str]:
    """Set ``MULTICAST_OFF`` in ``environ`` (default: this process's, so children inherit)."""
    env = os.environ if environ is None else environ
    for key, value in MULTICAST_OFF.items():
        env[key] = value
    return dict(MULTICAST_OFF)


class Timer(Protocol):
    """Elapsed device time around a block of work (CUDA events; a fake in tests)."""

    def start(self) -> None: ...

    def stop(self) -> float:
        """Milliseconds since ``start``, after the work finished."""
        ...


def time_calls(call: Callable[[], None], timer: Timer, *, warmup: int, iters: int) -> float:
    """Mean microseconds per ``call()``: ``warmup`` untimed calls, then ``iters`` timed."""
    if iters < 1 or warmup < 0:
        raise ValueError("want iters >= 1 and warmup >= 0")
    for _ in range(warmup):
        call()
    timer.start()
    for _ in range(iters):
        call()
    return timer.stop() * 1e3 / iters


def iterations(size_bytes: int, iters: int) -> int:
    """``iters`` for small messages, fewer for large ones (at least 5)."""
    return max(5, min(iters, BYTES_PER_SIZE // max(size_bytes, 1)))


def link_budget(device_name: str) -> tuple[float | None, str | None]:
    """Per-direction NVLink GB/s of the GPU from the advisor's data file (None if unknown)."""
    from crossover.advise.hardware import find_gpu

    try:
        gpu = find_gpu(device_name)
    except UsageError:
        return None, None
    if gpu.nvlink is None:
        return None, None
    # gpus.yaml states NVLink per GPU with both directions summed
    return gpu.nvlink.bandwidth_gbs / 2, f"gpus.yaml {gpu.id}: {gpu.source}"


def gpu_count() -> int:
    """Local CUDA GPUs through PyTorch; a one-line UsageError when there are too few."""
    try:
        torch = _torch()
    except ImportError as exc:
        msg = "commbench needs >= 2 CUDA GPUs and PyTorch; torch is not installed"
        raise UsageError(msg) from exc
    n = int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
    if n < 2:
        raise UsageError(f"commbench needs >= 2 CUDA GPUs; found {n}")
    return n


def _torch(module: str = "torch") -> Any:
    """PyTorch is optional (not a crossover dependency): import it only where needed."""
    return importlib.import_module(module)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _CudaTimer:
    def __init__(self, torch: Any) -> None:
        self._torch = torch
        self._a = torch.cuda.Event(enable_timing=True)
        self._b = torch.cuda.Event(enable_timing=True)

    def start(self) -> None:
        self._a.record()

    def stop(self) -> float:
        self._b.record()
        self._b.synchronize()
        return float(self._a.elapsed_time(self._b))


def _worker(rank: int, world: int, port: int, opts: dict[str, Any], out: str) -> None:
    """One GPU's process (spawned); rank 0 writes the raw per-size figures to ``out``."""
    disable_multicast()
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch = _torch()
    dist = _torch("torch.distributed")

    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=dev)
    timer = _CudaTimer(torch)
    graph_calls = int(opts["graph_calls"])
    rows: list[dict[str, Any]] = []

    def align() -> None:
        # start every rank's timer together, so no rank times the other's lag
        torch.cuda.synchronize()
        dist.barrier(device_ids=[rank])
        torch.cuda.synchronize()

    def slowest(us: float) -> float:
        t = torch.tensor([us], dtype=torch.float64, device=dev)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return float(t.item())

    try:
        for size in opts["sizes"]:
            # zeros: a sum of ones would overflow bf16 to inf after ~130 calls
            x = torch.zeros(size // 2, dtype=torch.bfloat16, device=dev)
            n_iter = iterations(size, int(opts["iters"]))

            def call(x: Any = x) -> None:
                dist.all_reduce(x)

            align()
            eager = slowest(time_calls(call, timer, warmup=int(opts["warmup"]), iters=n_iter))
            graph: float | None = None
            if not opts["eager_only"]:
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    for _ in range(3):
                        dist.all_reduce(x)
                torch.cuda.current_stream().wait_stream(side)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    for _ in range(graph_calls):
                        dist.all_reduce(x)
                replays = max(3, n_iter // graph_calls)
                align()
                per_replay = time_calls(g.replay, timer, warmup=2, iters=replays)
                graph = slowest(per_replay / graph_calls)
                del g
            rows.append({"size_bytes": size, "eager_us": eager, "graph_us": graph})
            del x
            torch.cuda.empty_cache()
            dist.barrier()
        if rank == 0:
            v = torch.cuda.nccl.version()
            nccl = ".".join(str(p) for p in v) if isinstance(v, tuple) else str(v)
            meta = {
                "device": torch.cuda.get_device_name(dev),
                "torch": str(torch.__version__),
                "nccl": nccl,
                "rows": rows,
            }
            # whole or not at all: a rank interrupted mid-write leaves the file as it was
            write_atomic(Path(out), json.dumps(meta))
    finally:
        dist.destroy_process_group()


def _torch_spawn(fn: Callable[..., None], args: tuple[Any, ...], nprocs: int) -> None:
    _torch("torch.multiprocessing").spawn(fn, args=args, nprocs=nprocs, join=True)


def run_commbench(
    *,
    gpus: int | None = None,
    min_bytes: int = 1024,
    max_bytes: int = 1024**3,
    factor: int = 2,
    warmup: int = 5,
    iters: int = 50,
    graph_calls: int = 20,
    eager_only: bool = False,
    device_name: str | None = None,
    spawn: Callable[[Callable[..., None], tuple[Any, ...], int], None] | None = None,
    count: Callable[[], int] = gpu_count,
) -> CommbenchResult:
    """Spawn one worker per GPU, collect rank 0's figures, and build the result."""
    env = disable_multicast()  # before anything starts a child or touches NCCL
    available = count()
    n = available if gpus is None else gpus
    if n < 2 or n > available:
        raise UsageError(f"--gpus {n}: want 2..{available} (GPUs found: {available})")
    sizes = message_sizes(min_bytes, max_bytes, factor)
    opts = {
        "sizes": sizes,
        "warmup": warmup,
        "iters": iters,
        "graph_calls": graph_calls,
        "eager_only": eager_only,
    }
    with tempfile.TemporaryDirectory(prefix="xo-commbench-") as tmp:
        out = str(Path(tmp) / "rank0.json")
        (spawn or _torch_spawn)(_worker, (n, _free_port(), opts, out), n)
        raw = json.loads(Path(out).read_text("utf-8"))
    return build_result(raw, n, graph_calls, env, device_name)


def build_result(
    raw: dict[str, Any],
    gpus: int,
    graph_calls: int,
    env: dict[str, str],
    device_name: str | None = None,
) -> CommbenchResult:
    """Rank 0's raw rows -> points with bandwidths, link fractions and summaries."""
    device = device_name or str(raw.get("device") or "unknown")
    link, link_src = link_budget(device)
    rows = raw["rows"]
    eager = [Point.of(int(r["size_bytes"]), float(r["eager_us"]), gpus, link) for r in rows]
    graphed = [
        Point.of(int(r["size_bytes"]), float(r["graph_us"]), gpus, link)
        for r in rows
        if r.get("graph_us") is not None
    ]
    points = graphed or eager
    mode = (
        f"CUDA graph replay ({graph_calls} all-reduces per graph), GPU time per all-reduce"
        if graphed
        else "eager calls from Python, GPU time per all-reduce (host launch gaps included)"
    )
    return CommbenchResult(
        gpus=gpus,
        device=device,
        torch=raw.get("torch"),
        nccl=raw.get("nccl"),
        mode=mode,
        source=(
            "crossover commbench: torch.distributed NCCL all_reduce (sum) of bf16, one "
            "process per GPU, CUDA events, slowest rank; NVLink multicast off"
        ),
        env=env,
        points=points,
        eager_points=eager,
        graph_calls=graph_calls,
        summary=summarize(points, link, link_src),
        eager_summary=summarize(eager, link, link_src) if graphed else None,
    )
