"""The host facts a CPU expert-offload speed model needs, read on the device machine.

    python3 scripts/h200/host_facts.py > host.json

Prints one JSON object: the CPU (model, logical CPUs, threads per core, sockets, NUMA
nodes, flags that matter to llama.cpp's CPU matmuls), host memory, the GPU's PCIe link
(generation and width, current and maximum, from nvidia-smi) and three measured rates:
host memory read and copy bandwidth with every core (torch on the CPU, 2 GiB buffers,
best of 5 after a first touch) and host-to-device / device-to-host copies from pinned
memory (1 GiB, best of 5). Each figure is None where the tool that reads it is missing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from typing import Any


def _run(argv: list[str]) -> str:
    if shutil.which(argv[0]) is None:
        return ""
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def cpu() -> dict[str, Any]:
    text = _run(["lscpu"])
    fields = dict(
        (k.strip(), v.strip()) for k, _, v in (ln.partition(":") for ln in text.splitlines())
    )
    flags = set(fields.get("Flags", "").split())
    wanted = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_int8", "amx_bf16", "avx_vnni")
    return {
        "model": fields.get("Model name"),
        "logical_cpus": os.cpu_count(),
        "threads_per_core": _int(fields.get("Thread(s) per core")),
        "cores_per_socket": _int(fields.get("Core(s) per socket")),
        "sockets": _int(fields.get("Socket(s)")),
        "numa_nodes": _int(fields.get("NUMA node(s)")),
        "l3": fields.get("L3 cache"),
        "hypervisor": fields.get("Hypervisor vendor"),
        "flags": [f for f in wanted if f in flags],
    }


def memory() -> dict[str, Any]:
    info = {}
    with open("/proc/meminfo") as f:
        for line in f:
            key, _, rest = line.partition(":")
            info[key] = int(rest.split()[0]) * 1024
    return {
        "mem_total_gib": round(info["MemTotal"] / 2**30, 1),
        "mem_available_gib": round(info.get("MemAvailable", 0) / 2**30, 1),
        "numactl": _run(["numactl", "-H"]).strip() or None,
    }


def pcie() -> dict[str, Any]:
    q = "name,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max"
    out = _run(["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader"]).strip()
    parts = [p.strip() for p in out.splitlines()[0].split(",")] if out else []
    keys = ("gpu", "gen_current", "gen_max", "width_current", "width_max")
    facts: dict[str, Any] = dict.fromkeys(keys)
    for k, v in zip(keys, parts, strict=False):
        facts[k] = _int(v) if k != "gpu" else v
    # what `nvidia-smi -q | grep -A3 -i link` shows (generation and width, max and current)
    lines = _run(["nvidia-smi", "-q"]).splitlines()
    keep = [i for i, ln in enumerate(lines) if re.search("link", ln, re.I)]
    rows = sorted({j for i in keep for j in range(i, min(i + 4, len(lines)))})
    facts["nvidia_smi_link"] = [lines[j].strip() for j in rows] or None
    return facts


def rates() -> dict[str, Any]:
    try:
        import torch
    except ImportError:
        return {}
    torch.set_num_threads(os.cpu_count() or 1)
    n = 2 << 30
    src = torch.ones(n // 4, dtype=torch.float32)
    dst = torch.empty_like(src)
    dst.copy_(src)  # first touch: the VM's memory grows as it is used

    def copy() -> None:
        dst.copy_(src)

    def read() -> None:
        src.sum()

    out: dict[str, Any] = {
        "threads": torch.get_num_threads(),
        # read + write bytes over the copy's time, read bytes over the sum's
        "host_copy_gb_s": round(2 * n / min(_timed(copy) for _ in range(5)) / 1e9, 1),
        "host_read_gb_s": round(n / min(_timed(read) for _ in range(5)) / 1e9, 1),
    }
    if torch.cuda.is_available():
        m = 1 << 30
        h = torch.empty(m, dtype=torch.uint8).pin_memory()
        d = torch.empty(m, dtype=torch.uint8, device="cuda")

        def h2d() -> None:
            d.copy_(h, non_blocking=True)
            torch.cuda.synchronize()

        def d2h() -> None:
            h.copy_(d, non_blocking=True)
            torch.cuda.synchronize()

        h2d()
        out["h2d_pinned_gb_s"] = round(m / min(_timed(h2d) for _ in range(5)) / 1e9, 1)
        out["d2h_pinned_gb_s"] = round(m / min(_timed(d2h) for _ in range(5)) / 1e9, 1)
    return out


def _timed(fn: Any) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def _int(s: str | None) -> int | None:
    try:
        return int(str(s).split()[0])
    except (ValueError, IndexError):
        return None


if __name__ == "__main__":
    idle = pcie()  # an idle GPU may show a lower link generation than under a copy
    measured = rates()
    facts = {"cpu": cpu(), "memory": memory(), "pcie": pcie(), "pcie_idle": idle}
    print(json.dumps(facts | {"rates": measured}, indent=1))
