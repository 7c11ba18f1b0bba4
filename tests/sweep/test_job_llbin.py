"""``scripts/h200/job-llbin.sh`` puts a carried llama-server in place only when its sha256
matches and every library it links is found; otherwise it removes it and says so (the
session then builds from source). A stand-in binary (a copy of this machine's ``true``)
plays the carried one."""

from __future__ import annotations

import hashlib
import io
import shutil
import subprocess
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "h200" / "job-llbin.sh"


def _carry(tree: Path, payload: bytes, digest_of: bytes) -> None:
    """.pack/llbin as the device call brings it back: a split tar.gz and the sha256."""
    d = tree / ".pack" / "llbin"
    d.mkdir(parents=True)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("llama-server")
        info.size, info.mode = len(payload), 0o755
        tar.addfile(info, io.BytesIO(payload))
    data = buf.getvalue()
    half = len(data) // 2
    (d / "llbin.tgz.part-aa").write_bytes(data[:half])
    (d / "llbin.tgz.part-ab").write_bytes(data[half:])
    (d / "llama-server.sha256").write_text(
        f"{hashlib.sha256(digest_of).hexdigest()}  llama-server\n"
    )


def _run(tree: Path, bin_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT)],
        cwd=tree,
        env={"PATH": "/usr/bin:/bin", "XO_BIN": str(bin_dir)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _true_binary() -> bytes:
    path = shutil.which("true")
    assert path is not None
    return Path(path).read_bytes()


def test_a_matching_binary_is_placed(tmp_path: Path) -> None:
    payload = _true_binary()
    _carry(tmp_path, payload, payload)
    done = _run(tmp_path, tmp_path / "bin")
    assert done.returncode == 0, done.stdout + done.stderr
    placed = tmp_path / "bin" / "llama-server"
    assert placed.read_bytes() == payload
    assert "sha256 OK" in done.stdout


def test_a_binary_whose_sha256_differs_is_removed(tmp_path: Path) -> None:
    payload = _true_binary()
    _carry(tmp_path, payload, payload + b"tampered")
    done = _run(tmp_path, tmp_path / "bin")
    assert done.returncode == 4
    assert "sha256 mismatch" in done.stdout
    assert not (tmp_path / "bin" / "llama-server").exists()


def test_without_the_carry_it_says_so(tmp_path: Path) -> None:
    done = _run(tmp_path, tmp_path / "bin")
    assert done.returncode == 2
    assert "carry it" in done.stdout
