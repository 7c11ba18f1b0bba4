"""``libllama.so`` from the pinned llama.cpp source, for llama-cpp-python inside Triton.

crossover's ``llama-server`` is linked statically (``BUILD_SHARED_LIBS=OFF``), and its
objects are not position-independent (llama.cpp sets ``POSITION_INDEPENDENT_CODE`` only
for shared builds), so they cannot be relinked into the shared library llama-cpp-python
loads with ``ctypes``. This is a second build of the same tree with the same CMake flags
but ``BUILD_SHARED_LIBS=ON`` and only the ``llama`` target (no server, no common, no
tools): ``libllama.so``, ``libggml.so``, ``libggml-base.so`` and ``libggml-cpu.so`` (plus
``libggml-cuda.so`` on a CUDA build) in ``<cache>/builds/libllama-<source>-<label>-<key>/
build/bin``. llama-cpp-python finds them through ``LLAMA_CPP_LIB_PATH``.

The Python half of llama-cpp-python (``llama_cpp/``, pure Python over ``ctypes``) comes
from the same sdist, so the bindings and the library are one version by construction.
"""

from __future__ import annotations

import json
import os
import shutil
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

from crossover.builds.cache import cache_dir, cache_subdir, file_lock
from crossover.builds.llamacpp import BuildConfig, build_config, build_key
from crossover.builds.llamacpp_source import (
    LLAMA_CPP_PYTHON_VERSION,
    SDIST_SHA256,
    llamacpp_source_dir,
    sdist_path,
    source_version,
)
from crossover.builds.plan import BuildPlan
from crossover.builds.progress import run_build_command
from crossover.errors import EngineError

TARGET = "llama"
LIBRARY = "libllama.so"


@dataclass(frozen=True)
class SharedBuild:
    """The shared-library build matching one ``llama-server`` build configuration."""

    base: BuildConfig

    @property
    def cmake_flags(self) -> tuple[str, ...]:
        flags = [f for f in self.base.cmake_flags if not f.startswith("-DBUILD_SHARED_LIBS=")]
        return (*flags, "-DBUILD_SHARED_LIBS=ON")

    @property
    def key(self) -> str:
        return build_key(self.cmake_flags, TARGET)

    @property
    def build_dir(self) -> Path:
        return (
            cache_dir()
            / "builds"
            / f"libllama-{LLAMA_CPP_PYTHON_VERSION}-{self.base.label}-{self.key}"
        )

    @property
    def lib_dir(self) -> Path:
        return self.build_dir / "build" / "bin"

    @property
    def stamp(self) -> Path:
        return self.build_dir / "build.json"

    @property
    def python_dir(self) -> Path:
        """Holds ``llama_cpp/`` (the bindings of the same sdist): put it on sys.path."""
        return self.build_dir / "python"


def shared_build(cuda: bool | None = None, cuda_arch: str | None = None) -> SharedBuild:
    return SharedBuild(build_config(cuda, cuda_arch))


def _complete(sb: SharedBuild) -> bool:
    return (
        sb.stamp.is_file()
        and (sb.lib_dir / LIBRARY).is_file()
        and (sb.python_dir / "llama_cpp" / "llama_cpp.py").is_file()
    )


def _extract_bindings(sb: SharedBuild, quiet: bool) -> None:
    """``llama_cpp/`` from the pinned sdist into ``python_dir`` (no compile: pure Python)."""
    prefix = f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}/"
    staging = sb.build_dir / ".python-part"
    if staging.exists():
        shutil.rmtree(staging)
    with tarfile.open(sdist_path(quiet=quiet), "r:gz") as tar:
        members = []
        for member in tar.getmembers():
            if not member.name.startswith(prefix + "llama_cpp/"):
                continue
            member.name = member.name[len(prefix) :]
            members.append(member)
        tar.extractall(staging, members=members, filter="data")
    if sb.python_dir.exists():
        shutil.rmtree(sb.python_dir)
    staging.rename(sb.python_dir)


def _build(sb: SharedBuild, jobs: int, progress: bool) -> None:
    src = llamacpp_source_dir(quiet=not progress)
    build = sb.build_dir / "build"
    log = sb.build_dir / "build.log"
    sb.build_dir.mkdir(parents=True, exist_ok=True)
    cmake = shutil.which("cmake")
    if cmake is None:
        raise EngineError("building llama.cpp needs cmake on PATH")
    if build.exists():  # no stamp: an interrupted build; start clean (see llamacpp._build)
        shutil.rmtree(build)
    configure = [cmake, "-S", str(src), "-B", str(build), *sb.cmake_flags]
    compile_ = [cmake, "--build", str(build), "--target", TARGET, "-j", str(jobs)]
    started = time.monotonic()
    label = sb.base.label
    with log.open("w", buffering=1) as log_fh:
        run_build_command(
            configure, log_fh, f"configuring llama.cpp shared ({label})", progress, False
        )
        plan = BuildPlan.read(build, TARGET)
        run_build_command(
            compile_, log_fh, f"building libllama.so ({label}, -j{jobs})", progress, True, plan
        )
    if not (sb.lib_dir / LIBRARY).is_file():
        raise EngineError(
            f"the build finished but {sb.lib_dir / LIBRARY} is missing", log.read_text()[-4000:]
        )
    _extract_bindings(sb, quiet=not progress)
    stamp = {
        "source": source_version(),
        "sdist_sha256": SDIST_SHA256,
        "label": label,
        "cmake_flags": list(sb.cmake_flags),
        "key": sb.key,
        "lib_dir": str(sb.lib_dir),
        "python_dir": str(sb.python_dir),
        "build_s": round(time.monotonic() - started, 1),
        "built_at_unix": int(time.time()),
    }
    tmp = sb.stamp.with_suffix(".json.part")
    tmp.write_text(json.dumps(stamp, indent=2) + "\n")
    tmp.replace(sb.stamp)


def ensure_libllama(
    cuda: bool | None = None,
    progress: bool = True,
    *,
    cuda_arch: str | None = None,
    jobs: int | None = None,
) -> SharedBuild:
    """The cached shared build (library and bindings), building it first if needed."""
    sb = shared_build(cuda, cuda_arch)
    if _complete(sb):
        return sb
    cache_subdir("builds")
    with file_lock(sb.build_dir.with_name(sb.build_dir.name + ".lock")):
        if _complete(sb):
            return sb
        _build(sb, jobs or os.cpu_count() or 1, progress)
    return sb


def find_libllama(cuda: bool | None = None) -> SharedBuild | None:
    """The shared build for this machine if it is complete, without building."""
    try:
        sb = shared_build(cuda)
    except Exception:
        return None
    return sb if _complete(sb) else None
