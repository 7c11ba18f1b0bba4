"""``scripts/h200/pack-caches.sh`` brings an engine's compile caches back in parts the
device tool returns (at most 4 a call), and ``scripts/h200/job-caches.sh`` puts them in
place in a later session only when every part is there, each part's sha256 matches and
they were made on this card. Folders of random bytes stand in for the caches; a small
part size makes several parts of a few hundred KiB."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACK = ROOT / "scripts" / "h200" / "pack-caches.sh"
PLACE = ROOT / "scripts" / "h200" / "job-caches.sh"
H100 = "NVIDIA H100 80GB HBM3"


def _bash(script: Path, cwd: Path, args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(script), *args],
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _caches(home: Path, kib: int = 300) -> dict[str, bytes]:
    files = {
        ".cache/vllm/torch_compile_cache/ab/rank_0_0/backbone/artifact": os.urandom(kib * 1024),
        ".triton/cache/K1/fused_moe_kernel.cubin": os.urandom(20 * 1024),
    }
    for rel, data in files.items():
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_bytes(data)
    return files


def _pack(tmp: Path, out: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return _bash(
        PACK,
        tmp,
        [str(out)],
        XO_HOME=str(tmp / "home"),
        XO_W=str(tmp / "w-made"),
        XO_GPU=H100,
        PART="64K",
        **env,
    )


def _place(tree: Path, home: Path, gpu: str = H100, **env: str) -> subprocess.CompletedProcess[str]:
    return _bash(PLACE, tree, [], XO_HOME=str(home), XO_W=str(tree / "w"), XO_GPU=gpu, **env)


def _carry(tree: Path, *outs: Path) -> None:
    """The parts brought back, carried into a later session's tree (one folder a call)."""
    for i, out in enumerate(outs):
        shutil.copytree(out, tree / ".pack" / ("ecache" if i == 0 else f"ecache{i + 1}"))


def test_every_part_round_trips_to_the_same_files(tmp_path: Path) -> None:
    files = _caches(tmp_path / "home")
    first = _pack(tmp_path, tmp_path / "out1")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "parts 1-4 of 6 here; next call: FROM=4" in first.stdout
    assert len(list((tmp_path / "out1").glob("ecache.tgz.part-*"))) == 4
    second = _pack(tmp_path, tmp_path / "out2", FROM="4")
    assert second.returncode == 0, second.stdout + second.stderr
    assert "parts 5-6 of 6 here" in second.stdout and "next call" not in second.stdout

    tree, home = tmp_path / "tree", tmp_path / "home2"
    _carry(tree, tmp_path / "out1")
    early = _place(tree, home)
    assert early.returncode == 6
    assert "2 part(s) still to carry" in early.stdout
    assert not home.exists() or not any(home.rglob("artifact"))

    shutil.rmtree(tree / ".pack")  # the next call carries the rest alone
    _carry(tree, tmp_path / "out2")
    done = _place(tree, home)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"made on {H100}, sha256 OK" in done.stdout
    for rel, data in files.items():
        assert (home / rel).read_bytes() == data


def test_another_card_is_refused_unless_asked(tmp_path: Path) -> None:
    _caches(tmp_path / "home", kib=30)
    assert _pack(tmp_path, tmp_path / "out").returncode == 0
    tree, home = tmp_path / "tree", tmp_path / "home2"
    _carry(tree, tmp_path / "out")
    refused = _place(tree, home, gpu="NVIDIA H200")
    assert refused.returncode == 5
    assert f"made on {H100}, this is NVIDIA H200: not placed" in refused.stdout
    assert not home.exists()
    taken = _place(tree, home, gpu="NVIDIA H200", ANY_GPU="1")
    assert taken.returncode == 0, taken.stdout + taken.stderr
    assert any(home.rglob("fused_moe_kernel.cubin"))


def test_a_part_whose_sha256_differs_is_dropped(tmp_path: Path) -> None:
    _caches(tmp_path / "home", kib=30)
    assert _pack(tmp_path, tmp_path / "out").returncode == 0
    part = sorted((tmp_path / "out").glob("ecache.tgz.part-*"))[0]
    part.write_bytes(part.read_bytes()[:-1] + b"x")
    tree, home = tmp_path / "tree", tmp_path / "home2"
    _carry(tree, tmp_path / "out")
    bad = _place(tree, home)
    assert bad.returncode == 4
    assert "sha256 mismatch" in bad.stdout
    assert not home.exists()
    assert not list((tree / "w" / "ecache").glob("ecache.tgz.part-*"))


def test_nothing_to_pack_or_carry_says_so(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    empty = _pack(tmp_path, tmp_path / "out")
    assert empty.returncode == 2
    assert "caches: none of .cache/vllm .triton/cache .cache/flashinfer under" in empty.stdout
    none = _place(tmp_path, tmp_path / "home2")
    assert none.returncode == 2
    assert "no .pack/ecache: carry it" in none.stdout


def test_repack_takes_other_folders(tmp_path: Path) -> None:
    _caches(tmp_path / "home", kib=30)
    assert _pack(tmp_path, tmp_path / "out").returncode == 0
    both = (tmp_path / "out" / "ecache.du").read_text()
    assert ".cache/vllm" in both and ".triton/cache" in both
    kept = _pack(tmp_path, tmp_path / "out2", CACHE_DIRS=".cache/vllm")
    assert ".triton/cache" in (tmp_path / "out2" / "ecache.du").read_text()  # packed once
    again = _pack(tmp_path, tmp_path / "out3", CACHE_DIRS=".cache/vllm", REPACK="1")
    assert kept.returncode == 0 and again.returncode == 0
    du = (tmp_path / "out3" / "ecache.du").read_text()
    assert ".cache/vllm" in du and ".triton/cache" not in du
