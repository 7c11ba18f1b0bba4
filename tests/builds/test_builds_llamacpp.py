"""llama.cpp builds: cache keys, cache location, progress parsing, failures, source packing."""

from __future__ import annotations

import os
import shutil
import sys
import tarfile
import time
from pathlib import Path

import pytest

from crossover.builds.cache import cache_dir
from crossover.builds.llamacpp import (
    build_config,
    cpu_flags,
    ensure_llama_server,
    find_llama_server,
    llamacpp_source_dir,
    pack_source_subset,
)
from crossover.builds.progress import parse_progress, run_build_command
from crossover.cli.app import main
from crossover.errors import EngineError, UsageError


@pytest.fixture
def empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CROSSOVER_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("CROSSOVER_LLAMA_SERVER", raising=False)
    return tmp_path / "cache"


@pytest.fixture
def fake_nvcc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An nvcc on PATH (never run: only its presence is checked) and no nvidia-smi."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    nvcc = bin_dir / "nvcc"
    nvcc.write_text("#!/bin/sh\nexit 0\n")
    nvcc.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")


def test_cache_dir_follows_env(empty_cache: Path) -> None:
    assert cache_dir() == empty_cache
    assert empty_cache.is_dir()


def test_cache_key_differs_for_flags(empty_cache: Path) -> None:
    cpu = build_config(cuda=False)
    same = build_config(cuda=False)
    other = build_config(cuda=False, extra_flags=("-DGGML_NATIVE=OFF",))
    assert cpu.key == same.key
    assert cpu.build_dir == same.build_dir
    assert cpu.key != other.key
    assert cpu.build_dir != other.build_dir
    assert "-DLLAMA_CURL=OFF" in cpu.cmake_flags
    assert "-DCMAKE_BUILD_TYPE=Release" in cpu.cmake_flags
    assert cpu.build_dir.parent == empty_cache / "builds"


_SPR = "processor\t: 0\nflags\t\t: fpu sse4_2 avx avx2 fma f16c bmi2 avx512f avx512_vnni amx_tile amx_int8\n"
_ZEN2 = "processor\t: 0\nflags\t\t: fpu sse4_2 avx avx2 fma f16c bmi2\n"


def test_cpu_flags_leave_amx_out_and_name_the_rest() -> None:
    assert cpu_flags(_ZEN2) == ()  # no AMX: ggml's -march=native
    flags = cpu_flags(_SPR)
    assert "-DGGML_NATIVE=OFF" in flags
    assert {"-DGGML_AVX2=ON", "-DGGML_AVX512=ON", "-DGGML_AVX512_VNNI=ON"} <= set(flags)
    assert {"-DGGML_AVX512_BF16=OFF", "-DGGML_AVX_VNNI=OFF"} <= set(flags)
    assert {"-DGGML_AMX_TILE=OFF", "-DGGML_AMX_INT8=OFF", "-DGGML_AMX_BF16=OFF"} <= set(flags)
    assert not any(f.startswith("-DGGML_AMX") and f.endswith("=ON") for f in flags)
    assert cpu_flags("") == ()


def test_cuda_configs_key_by_arch(empty_cache: Path, fake_nvcc: None) -> None:
    sm90 = build_config(cuda=True, cuda_arch="90")
    sm80 = build_config(cuda=True, cuda_arch="8.0")
    assert "-DGGML_CUDA=ON" in sm90.cmake_flags
    assert "-DCMAKE_CUDA_ARCHITECTURES=90" in sm90.cmake_flags
    assert "-DCMAKE_CUDA_ARCHITECTURES=80" in sm80.cmake_flags
    assert sm90.key != sm80.key != build_config(cuda=False).key
    assert sm90.label == "cuda-sm90"
    if shutil.which("nvidia-smi") is None:
        # nvcc without a visible GPU: auto mode builds for the CPU, forced CUDA needs an arch.
        assert build_config(cuda=None).cuda is False
        with pytest.raises(UsageError, match="--cuda-arch"):
            build_config(cuda=True)


def test_bad_cuda_arch_is_a_usage_error(empty_cache: Path) -> None:
    with pytest.raises(UsageError):
        build_config(cuda=True, cuda_arch="hopper")
    assert main(["engines", "install", "llamacpp", "--cuda", "--cuda-arch", "hopper"]) == 2


def test_which_exits_2_when_not_built(empty_cache: Path) -> None:
    assert find_llama_server() is None
    assert main(["engines", "which", "llamacpp"]) == 2


def test_unknown_engine_exits_2(empty_cache: Path) -> None:
    assert main(["engines", "install", "tensorrt"]) == 2
    assert main(["engines", "which", "vllm"]) == 2


def test_binary_env_override(empty_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CROSSOVER_LLAMA_SERVER", sys.executable)
    assert find_llama_server() == Path(sys.executable)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "[ 42%] Building CXX object src/llama.cpp.o",
            (42.0, "Building CXX object src/llama.cpp.o"),
        ),
        ("[100%] Built target llama-server", (100.0, "Built target llama-server")),
        ("[  1%] Building C object ggml.c.o", (1.0, "Building C object ggml.c.o")),
        ("[12/48] Building CXX object x.o", (25.0, "Building CXX object x.o")),
        ("-- Configuring done", None),
        ("In file included from [ 42%]", None),
    ],
)
def test_parse_progress(line: str, expected: tuple[float, str] | None) -> None:
    assert parse_progress(line) == expected


def test_failed_build_command_raises_with_log_tail(tmp_path: Path) -> None:
    log_path = tmp_path / "build.log"
    script = "print('[ 50%] compiling'); print('error: no such header'); raise SystemExit(3)"
    with log_path.open("w") as log, pytest.raises(EngineError) as info:
        run_build_command([sys.executable, "-c", script], log, "building", False, True)
    assert "exit 3" in str(info.value)
    assert info.value.log_tail is not None
    assert "no such header" in info.value.log_tail
    assert "[ 50%] compiling" in log_path.read_text()


def test_pack_source_subset(tmp_path: Path) -> None:
    tree = llamacpp_source_dir(quiet=True)
    assert (tree / "tools" / "server").is_dir()
    archive = pack_source_subset(tmp_path, ["ggml-vocab-llama-bpe.gguf"])
    assert archive.parent == tmp_path
    assert archive.name.endswith(".tar.gz")
    with tarfile.open(archive) as tar:
        names = set(tar.getnames())
    for needed in ("CMakeLists.txt", "app", "scripts", "ggml", "tools", "vendor", "LICENSE"):
        assert f"llama.cpp/{needed}" in names
    assert "llama.cpp/models/ggml-vocab-llama-bpe.gguf" in names
    assert not any("ggml-vocab-qwen2" in n or "/.git/" in n for n in names)
    assert archive.stat().st_size < 40 * 1024 * 1024
    with pytest.raises(UsageError):
        pack_source_subset(tmp_path / "x.tar.gz", ["ggml-vocab-nope.gguf"])


@pytest.mark.llamacpp
def test_second_install_reuses_the_cache() -> None:
    built = find_llama_server(cuda=False)
    assert built is not None, "make test builds llama-server first"
    started = time.monotonic()
    again = ensure_llama_server(cuda=False, progress=False)
    assert time.monotonic() - started < 2.0
    assert again == built
    assert os.access(again, os.X_OK)
    assert main(["engines", "which", "llamacpp"]) == 0


def test_an_interrupted_build_starts_clean(
    empty_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No stamp: what an earlier, killed build left (a truncated object make would take
    for done) is removed before configuring; the new build's own files stay."""
    import crossover.builds.llamacpp as lc

    cfg = build_config(cuda=False)
    stale = cfg.build_dir / "build" / "ggml-cpu.c.o"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"\x7fELF truncated")
    seen: list[bool] = []

    def fake_run(
        argv: list[str], log: object, label: str, progress: bool, bar: bool, plan: object = None
    ) -> None:
        seen.append(stale.exists())
        if "--build" in argv:  # the compile step "writes" the binary
            cfg.binary.parent.mkdir(parents=True, exist_ok=True)
            cfg.binary.write_text("#!/bin/sh\n")
            cfg.binary.chmod(0o755)

    monkeypatch.setattr(lc, "run_build_command", fake_run)
    monkeypatch.setattr(lc, "llamacpp_source_dir", lambda quiet=False: tmp_path)
    monkeypatch.setattr(lc.shutil, "which", lambda name: "/usr/bin/" + name)
    assert ensure_llama_server(cuda=False, progress=False) == cfg.binary
    assert seen == [False, False] and cfg.stamp.is_file()


def test_a_long_compile_says_it_is_still_going(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Off a terminal, one file compiling for minutes (ggml-cpu.c at 10%) gets a line
    with its elapsed time each HEARTBEAT_S, not silence that reads as a hang."""
    from crossover.builds import progress

    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.2)
    script = (
        "import time; print('[ 10%] Building C object ggml/src/ggml-cpu/ggml-cpu.c.o', "
        "flush=True); time.sleep(1.0); print('[100%] Linking CXX executable bin/llama-server')"
    )
    with (tmp_path / "build.log").open("w") as log:
        run_build_command([sys.executable, "-c", script], log, "building", True, True)
    err = capsys.readouterr().err
    still = [ln for ln in err.splitlines() if "still compiling" in ln]
    assert len(still) >= 2, err
    assert still[0].strip().startswith("10%  Building C ggml-cpu.c.o (still compiling, ")
    assert "100%  Linking CXX" in err
