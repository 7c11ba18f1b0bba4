"""The machine a sweep ran on is kept with its results: its GPUs (NVML, else nvidia-smi),
driver, CPU and memory (``/proc``) in ``sweep.json``'s ``hosts``; a sweep resumed on
another kind of machine (other GPUs or CPU, not a driver update) says so and keeps both;
the report says where it was measured and ``compare`` notes machines that differ."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from crossover.analysis.schema import HostFacts, HostGpu, SweepFile, TargetInfo
from crossover.measure.host import _nvidia_smi, kept_hosts, note_host, read_host
from crossover.records.store import Store
from crossover.report.compare import compare_sweeps
from crossover.sweep.config import SweepConfig
from crossover.sweep.driver import SweepRunner
from tests.measure.test_host_gpus import _fake_nvml

from .conftest import Linear, child_env, crossover_cmd, read_sweep, servers, target_flags

H100 = HostGpu(name="NVIDIA H100 80GB HBM3", memory_gib=79.6)


def _proc(tmp_path: Path) -> Path:
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "cpuinfo").write_text(
        "processor\t: 0\nmodel name\t: AMD EPYC  9654 96-Core Processor\n\n"
        "processor\t: 1\nmodel name\t: AMD EPYC  9654 96-Core Processor\n"
    )
    (proc / "meminfo").write_text("MemTotal:       131893244 kB\nMemFree: 1 kB\n")
    return proc


def test_the_host_is_read_from_proc_and_the_gpu_reading(tmp_path: Path) -> None:
    h = read_host(_proc(tmp_path), gpus=([H100, H100], "580.95.05", "13.0"))
    assert h.cpu == "AMD EPYC 9654 96-Core Processor"
    assert h.memory_gib == 125.8 and h.cpus == os.cpu_count()
    assert h.describe() == (
        "2x NVIDIA H100 80GB HBM3 (79.6 GiB), driver 580.95.05, CUDA 13.0; "
        f"AMD EPYC 9654 96-Core Processor ({os.cpu_count()} CPUs), 125.8 GiB"
    )
    bare = read_host(tmp_path / "nowhere", gpus=([], None, None))
    assert bare.cpu is None or bare.cpu  # platform's word or nothing, never an error
    assert bare.memory_gib is None
    assert bare.describe().startswith("no GPU seen; ")


def test_nvidia_smi_is_read_where_nvml_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    smi = tmp_path / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\necho 'NVIDIA H200, 143771, 580.95.05'\necho 'NVIDIA H200, 143771, 580.95.05'\n"
    )
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    reading = _nvidia_smi()
    assert reading is not None
    gpus, driver, cuda = reading.gpus, reading.driver, reading.cuda
    assert [g.name for g in gpus] == ["NVIDIA H200", "NVIDIA H200"]
    assert gpus[0].memory_gib == 140.4 and driver == "580.95.05" and cuda is None


def _host(gpu: HostGpu | None, driver: str = "580", cpu: str = "EPYC") -> HostFacts:
    return HostFacts(seen_at="t", gpus=[gpu] if gpu else [], driver=driver, cpu=cpu, cpus=16)


def test_another_machine_is_noted_a_driver_update_is_not() -> None:
    first, before = note_host([], _host(H100))
    assert len(first) == 1 and before is None
    same, before = note_host(first, _host(H100, driver="590"))
    assert same is first and before is None
    h200 = _host(HostGpu(name="NVIDIA H200", memory_gib=139.8))
    both, before = note_host(first, h200)
    assert len(both) == 2 and before is not None and before.gpus == [H100]


def test_an_entry_edited_into_something_else_is_passed_over() -> None:
    stored = [{"gpus": "many"}, _host(H100).model_dump(mode="json")]
    assert kept_hosts(stored) == [_host(H100)] and kept_hosts("junk") == []
    same, before = note_host(stored, _host(H100))
    assert same is stored and before is None
    fresh, before = note_host("junk", _host(H100))
    assert len(fresh) == 1 and before is None


def test_compare_notes_machines_that_differ() -> None:
    x = [TargetInfo(name="x")]
    a = SweepFile(hosts=[_host(H100)], targets=x)
    b = SweepFile(hosts=[_host(HostGpu(name="NVIDIA H200"))], targets=x)
    cmp = compare_sweeps(a, b)
    assert any(n.startswith("machines differ: A on 1x NVIDIA H100") for n in cmp.notes), cmp.notes
    same = compare_sweeps(a, SweepFile(hosts=[_host(H100, driver="590")], targets=x))
    assert not any("machines differ" in n for n in same.notes)


def test_a_sweep_keeps_the_gpus_its_targets_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml([H100.name] * 8))
    # crossover's own: the URL target's, and B's replicas get the first two of them
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,6,7")
    launch = {"engine": "vllm", "model": "m"}
    cfg = SweepConfig.model_validate(
        {
            "name": "gpus",
            "targets": [
                {"name": "A", "launch": {**launch, "env": {"CUDA_VISIBLE_DEVICES": "4"}}},
                {"name": "B", "launch": {**launch, "replicas": 2, "gpus_per_replica": 1}},
                {"name": "C", "url": "http://127.0.0.1:9"},
            ],
            "concurrency": [1],
            "output_tokens": 4,
            "input_tokens": 8,
            "client_floor": "off",
        }
    )
    runner = SweepRunner(cfg, tmp_path)
    try:
        (host,) = kept_hosts(runner.store.get_meta("hosts"))
    finally:
        runner.store.close()
    assert len(host.gpus) == 4 and host.machine_gpus == 8
    assert host.gpus_chosen == (
        "CUDA_VISIBLE_DEVICES=4; CUDA_VISIBLE_DEVICES=5,6; CUDA_VISIBLE_DEVICES=5,6,7"
    )


@pytest.mark.slow
def test_a_sweep_keeps_its_host_and_says_when_it_resumed_on_another(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    with servers(Linear(a_ms=1.0, b_ms=0.0, ttft_ms=2.0)) as urls:
        argv = crossover_cmd(
            "sweep", *target_flags({"A": urls[0]}), "--concurrency", "1",
            "--requests-per-level", "4", "--output-tokens", "4", "--input-tokens", "8",
            "--warmup", "0", "--out", str(out),
        )  # fmt: skip
        first = subprocess.run(argv, env=child_env(), capture_output=True, text=True, check=False)
        assert first.returncode == 0, first.stderr
        hosts = read_sweep(out)["hosts"]
        assert len(hosts) == 1 and hosts[0]["cpus"] == os.cpu_count()
        assert hosts[0]["python"] == sys.version.split()[0]
        # as if the first run had been on an H100 machine
        with Store(out / "sweep.db") as store:
            store.set_meta("hosts", [_host(H100).model_dump(mode="json")])
        again = subprocess.run(argv, env=child_env(), capture_output=True, text=True, check=False)
    assert again.returncode == 0, again.stderr
    said = " ".join(again.stderr.split())
    assert "this sweep resumed on another machine:" in said
    assert "its runs so far were measured on 1x NVIDIA H100 80GB HBM3 (79.6 GiB)" in said
    hosts = read_sweep(out)["hosts"]
    assert len(hosts) == 2 and hosts[0]["gpus"] == [H100.model_dump()]
    html = (out / "report.html").read_text()
    assert "measured on: 1x NVIDIA H100 80GB HBM3" in html
    assert "resumed on another machine:" in html
    assert '</span> <span class="muted">(the machine crossover ran on' in html
