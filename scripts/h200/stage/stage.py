"""Pack vLLM 0.26.0 and SGLang 0.5.17 wheels into chunks the device tool can carry.

Here (a machine with the package registry):

    STAGE=/tmp/xo-stage TIERS=core,fallback bash scripts/h200/vllm-stage/stage_plan.sh stage
    python3 scripts/h200/stage/stage.py download --dir /tmp/xo-stage/sgl
    python3 scripts/h200/stage/stage.py chunks --vllm /tmp/xo-stage/wheels \
        --sglang /tmp/xo-stage/sgl --out .whl-chunks --max-mib 58

Without ``--sglang`` the chunks hold vLLM alone (about 521 MiB: 9 chunks of 58 MiB and
a small one), and install.sh installs only vLLM. The two engines share 118 MiB of
identical wheels (the CUTLASS DSL, nvdisasm, ...): each file travels once.
``--max-mib`` is what one call may carry beside the repository's own files (64 MiB in
all). Wheels larger than a chunk are cut into ``NAME.part-aa``, ... and
joined again by scripts/h200/stage/install.sh on the device. Every file is checked against
the sha256 of the lock files: the one in scripts/h200/vllm-stage/stage_plan.sh (vLLM, tiers core and
fallback) and scripts/h200/sglang-stage/wheels.tsv (SGLang, tiers core, added, overlay).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
STAGE_PLAN = HERE.parent / "vllm-stage" / "stage_plan.sh"
SGLANG_LOCK = HERE.parent / "sglang-stage" / "wheels.tsv"
VLLM_TIERS = ("core", "fallback")
SGLANG_TIERS = ("core", "added", "overlay")
PLATFORM = ["--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp"]
PLATFORM += ["--abi", "cp312", "--abi", "abi3", "--abi", "none", "--platform", "linux_x86_64"]
PLATFORM += ["--platform", "manylinux2014_x86_64", "--platform", "manylinux1_x86_64"]
for _n in range(5, 40):
    PLATFORM += ["--platform", f"manylinux_2_{_n}_x86_64"]


def vllm_rows() -> list[tuple[str, str, int, str]]:
    """(role, file, bytes, sha256) of the vLLM wheels that travel (the lock is the one
    in stage_plan.sh)."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "STAGE": tmp}
        subprocess.run(["bash", str(STAGE_PLAN), "remote-scripts"], check=True, env=env)
        lock = (Path(tmp) / "lock.tsv").read_text()
    rows = []
    for line in lock.splitlines():
        tier, _name, _ver, size, sha, fn = line.split("\t")
        if tier in VLLM_TIERS:
            rows.append((f"vllm-{tier}", fn, int(size), sha))
    return rows


def sglang_rows() -> list[tuple[str, str, int, str]]:
    rows = []
    for line in SGLANG_LOCK.read_text().splitlines()[1:]:
        tier, fn, size, sha = line.split("\t")
        if tier in SGLANG_TIERS:
            rows.append((f"sglang-{tier}", fn, int(size), sha))
    return rows


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def download(dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for _role, fn, _size, sha in sglang_rows():
        if (dest / fn).exists():
            continue
        name, ver = fn.split("-")[:2]
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", *PLATFORM]
        subprocess.run([*cmd, "-d", str(dest), f"{name}=={ver}"], check=True)
        if sha256(dest / fn) != sha:
            sys.exit(f"sha256 mismatch: {fn}")
    print(f"{len(sglang_rows())} SGLang wheels in {dest}")


def chunks(vllm_dir: Path, sglang_dir: Path | None, out: Path, max_bytes: int) -> None:
    files: dict[str, tuple[Path, int, str, set[str]]] = {}
    sets = [(vllm_dir, vllm_rows())]
    if sglang_dir is not None:
        sets.append((sglang_dir, sglang_rows()))
    for src, rows in sets:
        for role, fn, size, sha in rows:
            if fn in files:
                files[fn][3].add(role)
                continue
            path = src / fn
            if not path.exists():
                sys.exit(f"missing {path}: download it first")
            if path.stat().st_size != size or sha256(path) != sha:
                sys.exit(f"{path} does not match its lock file")
            files[fn] = (path, size, sha, {role})
    # MANIFEST.tsv: file, sha256, roles (the device install reads it)
    manifest = "".join(
        f"{fn}\t{sha}\t{','.join(sorted(roles))}\n"
        for fn, (_p, _s, sha, roles) in sorted(files.items())
    )
    cap = max_bytes - (1 << 20)  # room for each chunk's sha256 list and the manifest
    # fill each chunk to the brim, largest files first, cutting the one that straddles
    bins: list[list[tuple[str, int, int, int | None]]] = [[]]
    free = cap
    parts: dict[str, int] = {}
    for fn, (_path, size, _sha, _roles) in sorted(files.items(), key=lambda kv: -kv[1][1]):
        off = 0
        while off < size:
            if free == 0:
                bins.append([])
                free = cap
            n = min(free, size - off)
            whole = off == 0 and n == size
            k = None if whole else parts.setdefault(fn, 0)
            if not whole:
                parts[fn] += 1
            bins[-1].append((fn, off, n, k))
            off += n
            free -= n
    if out.exists():
        shutil.rmtree(out)
    for i, items in enumerate(bins, 1):
        d = out / f"chunk{i:02d}"
        d.mkdir(parents=True)
        for fn, off, n, k in items:
            src = files[fn][0]
            if k is None:
                os.link(src, d / fn)
                continue
            sfx = chr(97 + k // 26) + chr(97 + k % 26)
            with src.open("rb") as fin, (d / f"{fn}.part-{sfx}").open("wb") as fout:
                fin.seek(off)
                fout.write(fin.read(n))
        (d / "MANIFEST.tsv").write_text(manifest)
        (d / "PARTS.tsv").write_text("".join(f"{fn}\t{n}\n" for fn, n in sorted(parts.items())))
        sums = "".join(
            f"{sha256(p)}  {p.name}\n"
            for p in sorted(d.iterdir())
            if p.name not in ("MANIFEST.tsv", "PARTS.tsv")
        )
        (d / f"chunk{i:02d}.sha256").write_text(sums)
        size = sum(p.stat().st_size for p in d.iterdir())
        assert size <= max_bytes, (d, size)
        print(f"chunk{i:02d}\t{size / 2**20:6.2f} MiB\t{len(items)} files")
    total = sum(v[1] for v in files.values())
    print(f"{len(bins)} chunks, {len(files)} wheels, {total / 2**20:.0f} MiB")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("download", help="fetch the SGLang wheel set (sha256-checked)")
    d.add_argument("--dir", type=Path, required=True)
    c = sub.add_parser("chunks", help="pack both wheel sets into carryable chunks")
    c.add_argument("--vllm", type=Path, required=True)
    c.add_argument("--sglang", type=Path, default=None, help="without it: vLLM alone")
    c.add_argument("--out", type=Path, required=True)
    c.add_argument("--max-mib", type=int, default=58)
    a = ap.parse_args()
    if a.cmd == "download":
        download(a.dir)
    else:
        chunks(a.vllm, a.sglang, a.out, a.max_mib << 20)


if __name__ == "__main__":
    main()
