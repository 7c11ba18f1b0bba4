"""The pinned llama.cpp source: fetch the sdist, extract its tree, pack a subset.

The tree is the one vendored in the ``llama-cpp-python`` sdist (MIT), fetched with
``pip download`` so it comes through the same package index as everything else.
The sdist is checked against a pinned sha256 and extracted once under
``<cache>/src/``; the extracted tree also supplies the vocab-only GGUFs
(``models/ggml-vocab-*.gguf``) used to give synthetic checkpoints a real tokenizer.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from crossover.builds.cache import cache_subdir, file_lock
from crossover.errors import EngineError, UsageError

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
SDIST_NAME = f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}.tar.gz"
# sha256 of the sdist as served by PyPI (pip verified it against the index on download).
SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
_VENDOR_PREFIX = f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}/vendor/llama.cpp/"

# What CMake needs to build llama-server (app and scripts are required even for the
# server target alone: docs/engines.md, llama-server notes).
SOURCE_SUBSET: tuple[str, ...] = (
    "CMakeLists.txt",
    "CMakePresets.json",
    "cmake",
    "common",
    "src",
    "include",
    "ggml",
    "tools",
    "vendor",
    "gguf-py",
    "licenses",
    "LICENSE",
    "scripts",
    "app",
)


def source_version() -> str:
    """Identifies the source in cache keys and build stamps."""
    return f"llama-cpp-python-{LLAMA_CPP_PYTHON_VERSION}"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _pip_download(dest_dir: Path, quiet: bool) -> Path:
    """``pip download`` the sdist into ``dest_dir``; returns the file."""
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--no-binary",
        ":all:",
        "--disable-pip-version-check",
        "-d",
        str(dest_dir),
        f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}",
    ]
    if not quiet:
        print(
            f"fetching llama.cpp source: pip download llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}"
        )
    proc = subprocess.run(cmd, capture_output=quiet, text=True, check=False)
    if proc.returncode != 0:
        tail = ((proc.stdout or "") + (proc.stderr or ""))[-4000:] if quiet else None
        raise EngineError(
            "pip download of the llama.cpp source (llama-cpp-python sdist) failed", tail
        )
    found = dest_dir / SDIST_NAME
    if not found.is_file():
        raise EngineError(f"pip download did not produce {SDIST_NAME} in {dest_dir}")
    return found


def sdist_path(quiet: bool = False) -> Path:
    """The verified sdist in ``<cache>/src/``, downloading it if missing or damaged."""
    src = cache_subdir("src")
    target = src / SDIST_NAME
    with file_lock(src / f"{SDIST_NAME}.lock"):
        if target.is_file() and _sha256(target) == SDIST_SHA256:
            return target
        with tempfile.TemporaryDirectory(dir=src, prefix=".dl-") as tmp:
            got = _pip_download(Path(tmp), quiet)
            digest = _sha256(got)
            if digest != SDIST_SHA256:
                raise EngineError(
                    f"{SDIST_NAME} has sha256 {digest}, expected {SDIST_SHA256}; refusing to build"
                )
            got.replace(target)
    return target


def llamacpp_source_dir(quiet: bool = False) -> Path:
    """The extracted llama.cpp tree (``<cache>/src/llama.cpp-<version>``)."""
    src = cache_subdir("src")
    tree = src / f"llama.cpp-{LLAMA_CPP_PYTHON_VERSION}"
    if (tree / ".crossover-complete").is_file():
        return tree
    sdist = sdist_path(quiet=quiet)
    with file_lock(src / f"llama.cpp-{LLAMA_CPP_PYTHON_VERSION}.lock"):
        if (tree / ".crossover-complete").is_file():
            return tree
        if not quiet:
            print(f"extracting llama.cpp source to {tree}")
        staging = Path(tempfile.mkdtemp(dir=src, prefix=".extract-"))
        try:
            with tarfile.open(sdist, "r:gz") as tar:
                members = []
                for member in tar.getmembers():
                    if not member.name.startswith(_VENDOR_PREFIX):
                        continue
                    member.name = member.name[len(_VENDOR_PREFIX) :]
                    if member.name:
                        members.append(member)
                tar.extractall(staging, members=members, filter="data")
            (staging / ".crossover-complete").write_text(source_version() + "\n")
            if tree.exists():
                shutil.rmtree(tree)
            staging.rename(tree)
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
    return tree


def vocab_gguf(name: str) -> Path:
    """A vocab-only GGUF from the tree's ``models/`` (e.g. ``ggml-vocab-llama-bpe.gguf``)."""
    path = llamacpp_source_dir(quiet=True) / "models" / name
    if not path.is_file():
        raise UsageError(f"no vocab file {name!r} in the llama.cpp tree's models/")
    return path


def pack_source_subset(dest: Path, vocab_files: list[str]) -> Path:
    """Pack the minimal source to build llama-server, plus ``models/<vocab>``, as .tar.gz.

    ``dest`` is the archive path, or an existing directory to write
    ``llama.cpp-<version>-src.tar.gz`` into. Members sit under ``llama.cpp/``.
    Returns the archive path.
    """
    tree = llamacpp_source_dir(quiet=True)
    missing = [v for v in vocab_files if not (tree / "models" / v).is_file()]
    if missing:
        raise UsageError(f"vocab files not in the llama.cpp tree's models/: {', '.join(missing)}")
    out = dest / f"llama.cpp-{LLAMA_CPP_PYTHON_VERSION}-src.tar.gz" if dest.is_dir() else dest
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot write {out}: {exc}") from exc

    def _skip(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        parts = Path(info.name).parts
        if "__pycache__" in parts or ".git" in parts:
            return None
        return info

    tmp = out.with_name(out.name + ".part")
    # Level 6 instead of tarfile's 9: a third of the time on two cores, ~2% larger.
    with tarfile.open(tmp, "w:gz", compresslevel=6) as tar:
        for entry in SOURCE_SUBSET:
            if (tree / entry).exists():
                tar.add(tree / entry, arcname=f"llama.cpp/{entry}", filter=_skip)
        for vocab in vocab_files:
            tar.add(tree / "models" / vocab, arcname=f"llama.cpp/models/{vocab}")
    tmp.replace(out)
    return out
