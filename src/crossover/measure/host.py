"""The machine crossover runs on (:class:`crossover.metrics.host.HostFacts`): read by
``crossover run`` for its summary and by a sweep when it starts or resumes (kept in its
database, ``meta`` key ``hosts``, and ``sweep.json``), so a result says which GPUs,
driver and CPU it was measured with, and a sweep resumed on another kind of machine
says so.

GPUs come from NVML (``pynvml``, the ``gpu`` extra) or, without it, ``nvidia-smi``; CPU
and memory from ``/proc`` (Linux); each is ``None`` where it cannot be read, never a
guess."""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from crossover.metrics.host import HostFacts, HostGpu


def _nvml() -> tuple[list[HostGpu], str | None, str | None] | None:
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # no driver, no GPU: NVMLError_* and kin
        return None
    try:
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(h)
            total = pynvml.nvmlDeviceGetMemoryInfo(h).total
            gpus.append(
                HostGpu(
                    name=name.decode() if isinstance(name, bytes) else str(name),
                    memory_gib=round(total / 2**30, 1),
                )
            )
        driver = pynvml.nvmlSystemGetDriverVersion()
        driver = driver.decode() if isinstance(driver, bytes) else str(driver)
        cuda: str | None = None
        try:
            v = int(pynvml.nvmlSystemGetCudaDriverVersion())
            cuda = f"{v // 1000}.{v % 1000 // 10}"
        except Exception:
            cuda = None
        return gpus, driver, cuda
    except Exception:
        return None
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


def _nvidia_smi() -> tuple[list[HostGpu], str | None, str | None] | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run(
            [exe, "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=15,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    gpus, driver = [], None
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 3 or not parts[0]:
            continue
        try:
            memory: float | None = round(float(parts[1]) / 1024, 1)  # MiB
        except ValueError:
            memory = None
        gpus.append(HostGpu(name=parts[0], memory_gib=memory))
        driver = parts[2] or driver
    return gpus, driver, None


def _cpu(cpuinfo: Path) -> str | None:
    try:
        for line in cpuinfo.read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model Name") and value.strip():
                return " ".join(value.split())
    except OSError:
        return None
    return platform.processor() or None


def _memory_gib(meminfo: Path) -> float | None:
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)  # kB
    except (OSError, ValueError, IndexError):
        return None
    return None


def read_host(proc: Path = Path("/proc"), gpus: Any = None) -> HostFacts:
    """This machine's facts now (``proc`` and ``gpus``, a ``(gpus, driver, cuda)``
    reading, are for tests)."""
    from crossover import __version__

    reading = gpus if gpus is not None else (_nvml() or _nvidia_smi())
    found, driver, cuda = reading if reading is not None else ([], None, None)
    return HostFacts(
        seen_at=datetime.now(UTC).isoformat(timespec="seconds"),
        gpus=found,
        driver=driver,
        cuda=cuda,
        cpu=_cpu(proc / "cpuinfo"),
        cpus=os.cpu_count(),
        memory_gib=_memory_gib(proc / "meminfo"),
        os=f"{platform.system()} {platform.release()}".strip() or None,
        python=sys.version.split()[0],
        crossover=__version__,
    )


def kept_hosts(stored: Any) -> list[HostFacts]:
    """The ``hosts`` a database keeps, each one that reads as one (an entry edited by hand
    into something else is left out here, and left as it is in the database)."""
    out = []
    for h in stored if isinstance(stored, list) else []:
        try:
            out.append(HostFacts.model_validate(h))
        except ValueError:  # pydantic's ValidationError is one
            continue
    return out


def note_host(stored: Any, now: HostFacts) -> tuple[list[Any], HostFacts | None]:
    """The ``hosts`` meta list with ``now`` added where it is another kind of machine
    than the last one the sweep ran on (or the first), and that last one when ``now``
    differs from it (the sweep resumed on another machine), else ``None``."""
    stored = stored if isinstance(stored, list) else []
    known = kept_hosts(stored)
    if known and known[-1].machine() == now.machine():
        return stored, None
    return [*stored, now.model_dump(mode="json")], (known[-1] if known else None)
