"""Build ``llama-server`` from the pinned llama.cpp source, once per (source, flags).

Builds live in ``<cache>/builds/llamacpp-<source>-<cpu|cuda-smNN>-<key>/`` where
``key`` hashes the source version, its sdist digest and every CMake flag, so a
different flag set never reuses a stale binary. A ``build.json`` stamp written
last marks a build complete; a per-build lock makes concurrent callers wait for
one build instead of starting a second on a machine with two cores.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from crossover.builds.cache import cache_dir, cache_subdir, file_lock
from crossover.builds.llamacpp_source import (
    LLAMA_CPP_PYTHON_VERSION,
    SDIST_SHA256,
    llamacpp_source_dir,
    pack_source_subset,
    source_version,
    vocab_gguf,
)
from crossover.builds.plan import BuildPlan
from crossover.builds.progress import run_build_command
from crossover.errors import EngineError, UsageError

__all__ = [
    "BuildConfig",
    "build_config",
    "cpu_flags",
    "ensure_llama_server",
    "find_llama_server",
    "llamacpp_source_dir",
    "pack_source_subset",
    "vocab_gguf",
]

BINARY = "llama-server"
# Env override: a llama-server built elsewhere (find_llama_server returns it as is).
BINARY_ENV = "CROSSOVER_LLAMA_SERVER"

# The flags that built llama-server on the CPU machine and the H200 (docs/engines.md,
# llama-server notes).
# Static libraries make the cached binary self-contained (no rpath into the build tree).
BASE_CMAKE_FLAGS: tuple[str, ...] = (
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
)

# A CPU build is -march=native, except where the CPU lists AMX: ggml's AMX matmul then
# segfaulted at llama-server's warm-up (a Sapphire-Rapids-class CPU in a Firecracker VM,
# whose kernel does not hand the tile state to guests), so those builds name every other
# instruction set the CPU lists instead and leave AMX out. (cpuinfo flag, ggml option)
_X86_ISA: tuple[tuple[str, str], ...] = (
    ("sse4_2", "GGML_SSE42"),
    ("avx", "GGML_AVX"),
    ("avx2", "GGML_AVX2"),
    ("fma", "GGML_FMA"),
    ("f16c", "GGML_F16C"),
    ("bmi2", "GGML_BMI2"),
    ("avx_vnni", "GGML_AVX_VNNI"),
    ("avx512f", "GGML_AVX512"),
    ("avx512vbmi", "GGML_AVX512_VBMI"),
    ("avx512_vnni", "GGML_AVX512_VNNI"),
    ("avx512_bf16", "GGML_AVX512_BF16"),
)


def cpu_flags(cpuinfo: str | None = None) -> tuple[str, ...]:
    """The CMake flags that pick a CPU build's instruction sets from ``/proc/cpuinfo``:
    none (ggml's -march=native) unless the CPU lists AMX, then native off and every
    other listed set named, AMX off."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            return ()
    line = next((ln for ln in cpuinfo.splitlines() if ln.startswith("flags")), "")
    have = set(line.partition(":")[2].split())
    if not any(flag.startswith("amx") for flag in have):
        return ()
    flags = ["-DGGML_NATIVE=OFF"]
    flags += [f"-D{opt}={'ON' if cpu in have else 'OFF'}" for cpu, opt in _X86_ISA]
    flags += ["-DGGML_AMX_TILE=OFF", "-DGGML_AMX_INT8=OFF", "-DGGML_AMX_BF16=OFF"]
    return tuple(flags)


def build_key(cmake_flags: tuple[str, ...], target: str) -> str:
    """A build's cache key: the pinned source, its sdist, the CMake flags and the target."""
    payload = json.dumps(
        {
            "source": source_version(),
            "sdist_sha256": SDIST_SHA256,
            "flags": list(cmake_flags),
            "target": target,
        },
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class BuildConfig:
    """One build's identity: the source and the CMake flags (jobs do not change output)."""

    cuda: bool
    cuda_arch: str | None
    cmake_flags: tuple[str, ...]

    @property
    def key(self) -> str:
        return build_key(self.cmake_flags, BINARY)

    @property
    def label(self) -> str:
        return f"cuda-sm{self.cuda_arch}" if self.cuda else "cpu"

    @property
    def build_dir(self) -> Path:
        return (
            cache_dir() / "builds" / f"llamacpp-{LLAMA_CPP_PYTHON_VERSION}-{self.label}-{self.key}"
        )

    @property
    def binary(self) -> Path:
        return self.build_dir / "build" / "bin" / BINARY

    @property
    def stamp(self) -> Path:
        return self.build_dir / "build.json"


def gpu_compute_capability() -> str | None:
    """The first GPU's compute capability as CMake wants it (``"90"``), or None."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        out = subprocess.run(
            [smi, "--query-gpu=compute_cap", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    first = out.stdout.strip().splitlines()[0].strip() if out.stdout.strip() else ""
    if out.returncode != 0 or not first.replace(".", "").isdigit():
        return None
    return first.replace(".", "")


def build_config(
    cuda: bool | None = None, cuda_arch: str | None = None, extra_flags: tuple[str, ...] = ()
) -> BuildConfig:
    """Resolve the build: CUDA when asked, or (``cuda=None``) when nvcc and a GPU are present.

    Auto mode needs a GPU to read the compute capability from (or ``cuda_arch``); with
    nvcc but no GPU it builds for the CPU, since a CUDA binary could not run here.
    """
    if cuda_arch is not None:
        cuda_arch = cuda_arch.replace(".", "").strip()
        if not cuda_arch.isdigit():
            raise UsageError(
                f"--cuda-arch must be a compute capability like 90 or 8.9, got {cuda_arch!r}"
            )
    nvcc = shutil.which("nvcc")
    if cuda is None:
        arch = cuda_arch or (gpu_compute_capability() if nvcc else None)
        cuda = nvcc is not None and arch is not None
        cuda_arch = arch if cuda else None
    elif cuda:
        if nvcc is None:
            raise UsageError(
                "a CUDA build needs nvcc on PATH (install the CUDA toolkit or build for CPU)"
            )
        cuda_arch = cuda_arch or gpu_compute_capability()
        if cuda_arch is None:
            raise UsageError(
                "no GPU visible to read its compute capability: pass --cuda-arch (e.g. 90)"
            )
    else:
        cuda_arch = None
    flags = list(BASE_CMAKE_FLAGS)
    if cuda:
        flags += ["-DGGML_CUDA=ON", f"-DCMAKE_CUDA_ARCHITECTURES={cuda_arch}"]
    else:
        flags += cpu_flags()
    flags += list(extra_flags)
    return BuildConfig(cuda=bool(cuda), cuda_arch=cuda_arch, cmake_flags=tuple(flags))


def _complete(cfg: BuildConfig) -> bool:
    return cfg.stamp.is_file() and cfg.binary.is_file() and os.access(cfg.binary, os.X_OK)


def _build(cfg: BuildConfig, jobs: int, progress: bool) -> None:
    src = llamacpp_source_dir(quiet=not progress)
    build = cfg.build_dir / "build"
    log = cfg.build_dir / "build.log"
    cfg.build_dir.mkdir(parents=True, exist_ok=True)
    cmake = shutil.which("cmake")
    if cmake is None:
        raise EngineError("building llama.cpp needs cmake on PATH")
    # no stamp: an earlier build was interrupted, and a compiler killed mid-write can leave
    # an object file newer than its source that make takes for done (seen: a llama-server
    # that segfaulted at its warm-up after a killed build was resumed); start clean
    if build.exists():
        shutil.rmtree(build)
    configure = [cmake, "-S", str(src), "-B", str(build), *cfg.cmake_flags]
    compile_ = [cmake, "--build", str(build), "--target", BINARY, "-j", str(jobs)]
    started = time.monotonic()
    with log.open("w", buffering=1) as log_fh:  # line-buffered: the log is live
        run_build_command(
            configure, log_fh, f"configuring llama.cpp ({cfg.label})", progress, False
        )
        plan = BuildPlan.read(build, BINARY)
        run_build_command(
            compile_, log_fh, f"building llama-server ({cfg.label}, -j{jobs})", progress, True, plan
        )
    if not cfg.binary.is_file():
        raise EngineError(
            f"the build finished but {cfg.binary} is missing", log.read_text()[-4000:]
        )
    stamp = {
        "source": source_version(),
        "sdist_sha256": SDIST_SHA256,
        "label": cfg.label,
        "cuda": cfg.cuda,
        "cuda_arch": cfg.cuda_arch,
        "cmake_flags": list(cfg.cmake_flags),
        "key": cfg.key,
        "binary": str(cfg.binary),
        "build_s": round(time.monotonic() - started, 1),
        "built_at_unix": int(time.time()),
    }
    tmp = cfg.stamp.with_suffix(".json.part")
    tmp.write_text(json.dumps(stamp, indent=2) + "\n")
    tmp.replace(cfg.stamp)


def ensure_llama_server(
    cuda: bool | None = None,
    progress: bool = True,
    *,
    cuda_arch: str | None = None,
    jobs: int | None = None,
    extra_flags: tuple[str, ...] = (),
) -> Path:
    """The cached ``llama-server`` for this configuration, building it first if needed.

    Instant when cached. ``cuda=None`` picks CUDA when nvcc and a GPU are present.
    Raises EngineError (with the build log's tail) if the build fails.
    """
    cfg = build_config(cuda, cuda_arch, extra_flags)
    if _complete(cfg):
        return cfg.binary
    if progress and cuda is None and not cfg.cuda and shutil.which("nvcc"):
        print("nvcc found but no GPU visible: building for the CPU (--cuda-arch N forces CUDA)")
    cache_subdir("builds")
    with file_lock(cfg.build_dir.with_name(cfg.build_dir.name + ".lock")):
        if _complete(cfg):  # another process built it while we waited
            return cfg.binary
        _build(cfg, jobs or os.cpu_count() or 1, progress)
    return cfg.binary


def _stamps() -> list[dict[str, object]]:
    builds = cache_dir() / "builds"
    found: list[dict[str, object]] = []
    for stamp in sorted(builds.glob(f"llamacpp-{LLAMA_CPP_PYTHON_VERSION}-*/build.json")):
        try:
            data = json.loads(stamp.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and Path(str(data.get("binary", ""))).is_file():
            found.append(data)
    return found


def find_llama_server(cuda: bool | None = None) -> Path | None:
    """A built ``llama-server`` if there is one, without building; None otherwise.

    ``$CROSSOVER_LLAMA_SERVER`` wins if set. Otherwise the build matching this machine
    (as ``ensure_llama_server(cuda)`` would resolve it) is preferred, then the newest
    build of the pinned source (CUDA or CPU as ``cuda`` asks, any if None).
    """
    override = os.environ.get(BINARY_ENV)
    if override:
        path = Path(override).expanduser()
        return path if path.is_file() else None
    try:
        cfg = build_config(cuda)
    except UsageError:
        cfg = None
    if cfg is not None and _complete(cfg):
        return cfg.binary
    stamps = [s for s in _stamps() if cuda is None or bool(s.get("cuda")) == cuda]
    if not stamps:
        return None
    newest = max(stamps, key=lambda s: int(str(s.get("built_at_unix", 0))))
    return Path(str(newest["binary"]))


#: other programs of the pinned source that crossover builds on demand, in the same
#: build folder as llama-server (its libraries are reused: a tool takes seconds)
TOOLS = ("llama-quantize",)


def ensure_llama_tool(
    name: str, cuda: bool | None = False, progress: bool = True, jobs: int | None = None
) -> Path:
    """The cached llama.cpp tool ``name`` (e.g. ``llama-quantize``), built next to the
    llama-server of this configuration (which is built first if needed)."""
    if name not in TOOLS:
        raise UsageError(f"unknown llama.cpp tool {name!r} ({', '.join(TOOLS)})")
    ensure_llama_server(cuda, progress, jobs=jobs)
    cfg = build_config(cuda)
    tool = cfg.binary.with_name(name)
    if tool.is_file() and os.access(tool, os.X_OK):
        return tool
    cmake = shutil.which("cmake")
    if cmake is None:
        raise EngineError(f"building {name} needs cmake on PATH")
    build = cfg.build_dir / "build"
    with file_lock(cfg.build_dir.with_name(cfg.build_dir.name + ".lock")):
        if tool.is_file():
            return tool
        with (cfg.build_dir / f"{name}.build.log").open("w", buffering=1) as log_fh:
            cmd = [
                cmake,
                "--build",
                str(build),
                "--target",
                name,
                "-j",
                str(jobs or os.cpu_count() or 1),
            ]
            plan = BuildPlan.read(build, name)
            run_build_command(cmd, log_fh, f"building {name} ({cfg.label})", progress, True, plan)
    if not tool.is_file():
        raise EngineError(f"the build finished but {tool} is missing")
    return tool
