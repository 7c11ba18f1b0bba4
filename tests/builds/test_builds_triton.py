"""``crossover engines install triton``: the server unpacked from the pinned wheel, the
stub for this Python, and the stub's environment whose NumPy is 1.x (NumPy 2 corrupts
BYTES inputs); a launched target gets the libraries and the venv first on PATH."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from crossover.builds.triton import SERVER_VERSION, TritonInstall, install_of
from crossover.cli.app import main

pytestmark = pytest.mark.llamacpp


@pytest.fixture(scope="module")
def inst() -> TritonInstall:
    from crossover.builds.triton import ensure_triton

    return ensure_triton(progress=False)


def test_install_layout_and_stub_environment(inst: TritonInstall) -> None:
    assert inst.tritonserver.is_file()
    assert (inst.backends / "python" / "triton_python_backend_stub").is_file()
    assert (inst.backends / "python" / "libtriton_python.so").is_file()
    assert inst.stamp()["server_version"] == SERVER_VERSION
    numpy = subprocess.run(
        [str(inst.env / "bin" / "python"), "-c", "import numpy; print(numpy.__version__)"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert numpy.startswith("1."), numpy
    env = inst.launch_env()
    assert env["PATH"].split(":")[0] == str(inst.env / "bin")
    assert env["LD_LIBRARY_PATH"].split(":")[0] == str(inst.libs)
    assert install_of(inst.tritonserver) == inst
    assert install_of("/usr/bin/tritonserver") is None
    assert install_of(Path("/opt") / "x") is None


def test_launch_uses_the_install(inst: TritonInstall, tmp_path: Path) -> None:
    from crossover.engines.adapters import launch_spec
    from crossover.engines.registry import engine_config

    cfg = engine_config(engine="triton", model=str(tmp_path), executable=[str(inst.tritonserver)])
    spec = launch_spec(cfg, 8123, tmp_path)
    assert spec.argv[0] == str(inst.tritonserver)
    assert f"--backend-directory={inst.backends}" in spec.argv
    assert spec.metrics_port is not None and f"--metrics-port={spec.metrics_port}" in spec.argv
    assert spec.env_set["PATH"].startswith(str(inst.env / "bin"))
    mine = engine_config(engine="triton", model=str(tmp_path), extra_args=["--metrics-port=9"])
    assert launch_spec(mine, 8123, tmp_path).metrics_port == 9


def test_engines_cli_lists_and_finds_it(
    inst: TritonInstall, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["engines", "which", "triton"]) == 0
    assert capsys.readouterr().out.strip() == str(inst.tritonserver)
    assert main(["engines", "list"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("triton "))
    assert "tritonserver" in line
