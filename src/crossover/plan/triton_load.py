"""Load a generated TensorRT-LLM repository into a real ``tritonserver`` and say what held.

Two passes, both with ``--model-control-mode=explicit`` and ``--disable-auto-complete-config``
(so the server reads the configs exactly as written):

1. **As written.** Each model of another backend than Python (``tensorrt_llm``) is loaded
   through the repository API. The ``tensorrtllm`` backend is not here, so its load must
   fail naming that backend: the server parsed its ``config.pbtxt`` and got as far as
   looking for the backend. (The Python models are not loaded as written: their
   ``model.py`` comes from a TensorRT-LLM checkout, and a stub without one hangs the load
   until the stub times out.)
2. **Stand-ins.** The same configs, the Python models unchanged with a ``model.py`` that
   only starts, ``tensorrt_llm`` moved to the Python backend with the same, and the
   ensemble unchanged. Every model must become READY: the Python models' configs as
   written, and the ensemble, which Triton checks against its step models' configs when it
   loads it (every mapped tensor exists, data types agree, shapes are compatible), so a
   READY ensemble means the server accepted the wiring.

Not validated: the ``tensorrt_llm`` backend's parameters (read by a backend not here), the
TensorRT engine, and the behaviour of TensorRT-LLM's own ``model.py`` files.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from crossover.builds.triton import TritonInstall
from crossover.engines.processes import free_port
from crossover.errors import EngineError

#: what pass 1 accepts as "got as far as the missing backend"
MISSING_BACKEND = re.compile(r"unable to find backend library for backend '(\w+)'")
STAND_IN = '''"""A stand-in that only starts (crossover's repository load check)."""


class TritonPythonModel:
    def initialize(self, args):
        pass

    def execute(self, requests):
        return None
'''


@dataclass
class LoadResult:
    model: str
    ready: bool
    error: str | None


@dataclass
class LoadReport:
    as_written: list[LoadResult] = field(default_factory=list)
    stand_ins: list[LoadResult] = field(default_factory=list)
    validated: list[str] = field(default_factory=list)
    not_validated: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    server_log: str = ""


def _post(url: str, timeout_s: float = 120.0) -> tuple[int, str]:
    req = urllib.request.Request(url, data=b"{}", method="POST")  # noqa: S310 (localhost)
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:  # noqa: S310 (localhost)
            return resp.status, resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:  # noqa: S310 (localhost)
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _serve(inst: TritonInstall, repo: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    argv = [
        str(inst.tritonserver),
        f"--model-repository={repo}",
        "--model-control-mode=explicit",
        "--disable-auto-complete-config",
        "--http-address=127.0.0.1",
        f"--http-port={port}",
        "--allow-grpc=false",
        "--allow-metrics=false",
        "--exit-on-error=false",
        *inst.launch_args(),
    ]
    env = {**os.environ, **inst.launch_env()}
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            argv, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while not _ready(url + "/v2/health/live"):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise EngineError("tritonserver did not start for the load check", log.read_text())
        time.sleep(0.25)
    return proc, url


def _load_all(url: str, models: list[str]) -> list[LoadResult]:
    out = []
    for model in models:
        status, body = _post(f"{url}/v2/repository/models/{model}/load")
        error = None
        if status != 200:
            try:
                error = str(json.loads(body).get("error", body))
            except ValueError:
                error = body
        out.append(LoadResult(model, status == 200, error))
    return out


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _stand_in_config(text: str) -> str:
    return re.sub(r'^backend: "\w+"$', 'backend: "python"', text, flags=re.MULTILINE)


def load_check(files: dict[str, str], inst: TritonInstall) -> LoadReport:
    """Both passes over the repository ``files`` (``{relative path: content}``)."""
    configs = {
        rel.split("/")[0]: text for rel, text in files.items() if rel.endswith("config.pbtxt")
    }
    steps = sorted(m for m, text in configs.items() if "ensemble_scheduling" not in text)
    ensembles = sorted(m for m in configs if m not in steps)
    other = [m for m in steps if 'backend: "python"' not in configs[m]]
    report = LoadReport()
    with tempfile.TemporaryDirectory(prefix="crossover-triton-load-") as tmp:
        root = Path(tmp)
        written = root / "as-written"
        for rel, content in files.items():
            (written / rel).parent.mkdir(parents=True, exist_ok=True)
            (written / rel).write_text(content)
        stand = root / "stand-ins"
        shutil.copytree(written, stand)
        for model in steps:
            (stand / model / "config.pbtxt").write_text(_stand_in_config(configs[model]))
            (stand / model / "1").mkdir(exist_ok=True)
            (stand / model / "1" / "model.py").write_text(STAND_IN)
        for name, repo, bucket, models in (
            ("as-written", written, report.as_written, other),
            ("stand-ins", stand, report.stand_ins, steps + ensembles),
        ):
            log = root / f"{name}.log"
            proc, url = _serve(inst, repo, log)
            try:
                bucket.extend(_load_all(url, models))
            finally:
                _stop(proc)
                report.server_log += f"--- {name} ---\n" + log.read_text(errors="replace")
    _judge(report, ensembles)
    return report


def _judge(report: LoadReport, ensembles: list[str]) -> None:
    for r in report.as_written:
        backend = MISSING_BACKEND.search(r.error or "")
        if r.ready:
            report.validated.append(f"{r.model}: loaded as written")
        elif backend:
            report.validated.append(
                f"{r.model}: config parsed by tritonserver as written; the load stops at the "
                f"missing {backend.group(1)!r} backend"
            )
        else:
            report.problems.append(f"{r.model} (as written): {r.error}")
    as_written = {r.model for r in report.as_written}
    for r in report.stand_ins:
        if not r.ready:
            report.problems.append(f"{r.model} (stand-ins): {r.error}")
        elif r.model in ensembles:
            report.validated.append(
                f"{r.model}: READY; tritonserver accepted its wiring against its step models"
            )
        elif r.model in as_written:
            report.validated.append(f"{r.model}: READY in the Python backend (tensors as written)")
        else:
            report.validated.append(
                f"{r.model}: READY as written, with a stand-in model.py (instances, parameters, "
                "decoupled policy accepted)"
            )
    report.not_validated += [
        "the tensorrt_llm backend's parameters (no tensorrtllm backend here)",
        "the TensorRT engine (built by build.sh with TensorRT-LLM)",
        "TensorRT-LLM's preprocessing/postprocessing model.py behaviour",
    ]
