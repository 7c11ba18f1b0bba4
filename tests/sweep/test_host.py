"""The machine a sweep ran on is kept with its results: its GPUs (NVML, else nvidia-smi),
driver, CPU and memory (``/proc``) in ``sweep.json``'s ``hosts``; a sweep resumed on
another kind of machine (other GPUs or CPU, not a driver update) says so and keeps both;
the report says where it was measured and ``compare`` notes machines that differ. A host
kept before hosts kept the targets' GPUs (every GPU of its machine) is the same machine as
some of those GPUs chosen now by ``CUDA_VISIBLE_DEVICES``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from crossover.analysis.schema import HostFacts, HostGpu, SweepFile, TargetInfo
from crossover.measure.host import _nvidia_smi, kept_hosts, note_host, read_host
from crossover.metrics.host import kinds, machine_count
from crossover.records.store import Store
from crossover.report.compare import compare_sweeps
from crossover.sweep.config import SweepConfig
from crossover.sweep.driver import SweepEvents, SweepRunner
from tests.measure.test_host_gpus import _fake_nvml, _fake_smi

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


def _url_sweep(name: str) -> SweepConfig:
    """A sweep of one URL target at one level: the host record is read, nothing launched."""
    return SweepConfig.model_validate(
        {
            "name": name,
            "targets": [{"name": "A", "url": "http://127.0.0.1:9"}],
            "concurrency": [1],
            "output_tokens": 4,
            "input_tokens": 8,
            "client_floor": "off",
        }
    )


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
    _fake_smi(tmp_path, monkeypatch, *["NVIDIA H200, 143771, 580.95.05"] * 2)
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
        runner.close()
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


# --- a host kept before hosts kept the targets' GPUs: every GPU of its machine ---------------


def _old(n: int, gpu: HostGpu = H100, cpu: str = "EPYC") -> HostFacts:
    """A host an older crossover kept: every GPU of the machine, no ``machine_gpus``."""
    return HostFacts(seen_at="t", gpus=[gpu] * n, driver="580", cpu=cpu, cpus=16)


def _chosen(n: int, of: int, gpu: HostGpu = H100, cpu: str = "EPYC") -> HostFacts:
    """A host kept now: ``n`` of the machine's ``of`` GPUs, by CUDA_VISIBLE_DEVICES."""
    chosen = "CUDA_VISIBLE_DEVICES=" + ",".join(map(str, range(n)))
    return _old(n, gpu, cpu).model_copy(update={"machine_gpus": of, "gpus_chosen": chosen})


def test_an_old_host_of_every_gpu_is_the_same_machine_as_some_of_them_chosen() -> None:
    stored = [_old(8).model_dump(mode="json")]
    same, before = note_host(stored, _chosen(2, of=8))
    assert same is stored and before is None
    assert note_host(stored, _chosen(8, of=8))[1] is None
    # as before: a machine of one H100 then, one of four H100s now
    assert note_host([_old(1).model_dump(mode="json")], _chosen(1, of=4))[1] is None
    # the relation holds both ways, and where the old host is the later one
    assert _chosen(2, of=8).same_kind(_old(8)) and _old(8).same_kind(_chosen(2, of=8))


@pytest.mark.parametrize(
    "now",
    [
        _chosen(2, of=8, gpu=HostGpu(name="NVIDIA H200", memory_gib=139.8)),  # other GPUs
        _chosen(2, of=4),  # a machine of four H100s, not of eight
        _chosen(2, of=8, cpu="Xeon"),  # another CPU
    ],
)
def test_a_machine_that_differs_from_an_old_host_is_still_noted(now: HostFacts) -> None:
    stored = [_old(8).model_dump(mode="json")]
    both, before = note_host(stored, now)
    assert len(both) == 2 and before == _old(8)


def test_two_hosts_kept_now_compare_the_gpus_their_targets_use() -> None:
    """Both say which GPUs their targets could use: those are compared (8 H100s then, 2
    now, are timings of other GPUs though of one machine)."""
    assert _chosen(2, of=8).same_kind(_chosen(2, of=8).model_copy(update={"gpus_chosen": "x"}))
    assert not _chosen(8, of=8).same_kind(_chosen(2, of=8))
    assert note_host([_chosen(8, of=8).model_dump(mode="json")], _chosen(2, of=8))[1] is not None


def test_the_report_does_not_call_an_old_host_and_its_chosen_gpus_two_machines() -> None:
    """A sweep an earlier crossover kept both hosts of (resumed under CUDA_VISIBLE_DEVICES
    on the machine it started on) is one machine to the report and to compare."""
    from crossover.report.html import render_html

    x = [TargetInfo(name="x")]
    resumed = SweepFile(hosts=[_old(8), _chosen(2, of=8)], targets=x)
    assert resumed.machines() == 1
    cmp = compare_sweeps(resumed, SweepFile(hosts=[_chosen(2, of=8)], targets=x))
    assert not any("another machine" in n or "machines differ" in n for n in cmp.notes)
    html = render_html(resumed, {}, [], [])
    assert "measured on: 8x NVIDIA H100" in html and "resumed on another machine" not in html

    moved = SweepFile(hosts=[_old(8), _chosen(2, of=4)], targets=x)
    assert moved.machines() == 2
    cmp = compare_sweeps(moved, SweepFile(hosts=[_old(8)], targets=x))
    assert any(n.startswith("A: resumed on another machine (8x") for n in cmp.notes), cmp.notes
    assert any(n.startswith("machines differ") for n in cmp.notes), cmp.notes
    assert "resumed on another machine: 2x NVIDIA H100" in render_html(moved, {}, [], [])


def test_a_sweep_an_older_crossover_kept_resumes_on_its_machine_unnoted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweep started on the whole machine (kept as every GPU, no machine_gpus) and
    resumes on it under CUDA_VISIBLE_DEVICES=0,1: no 'resumed on another machine'."""
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml([H100.name] * 8))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    cfg = _url_sweep("old")

    def resume() -> list[str]:
        notes: list[str] = []
        runner = SweepRunner(cfg, tmp_path, events=SweepEvents(on_note=notes.append))
        runner.close()
        return notes

    assert resume() == []
    with Store(tmp_path / "sweep.db") as store:
        (now,) = kept_hosts(store.get_meta("hosts"))
        old = now.model_dump(mode="json", exclude={"machine_gpus", "gpus_chosen"})
        assert len(old["gpus"]) == 8
        store.set_meta("hosts", [old])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    assert resume() == []
    with Store(tmp_path / "sweep.db") as store:
        assert store.get_meta("hosts") == [old]
    # on a machine of other GPUs it is said
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml(["NVIDIA H200"] * 8))
    (said,) = resume()
    assert said.startswith("this sweep resumed on another machine: 2x NVIDIA H200")
    assert "so far were measured on 8x NVIDIA H100 80GB HBM3" in said


def test_hosts_an_earlier_crossover_kept_are_read_as_a_sweep_keeps_them_now() -> None:
    """Each host is judged against the last one kept, as :func:`note_host` keeps them: an
    old host of every GPU, two of them, then all eight is one machine throughout."""
    hosts = [_old(8), _chosen(2, of=8), _chosen(8, of=8)]
    assert kinds(hosts) == [_old(8)] and machine_count(hosts) == 1
    back = [_old(8), _old(8, cpu="Xeon"), _chosen(2, of=8)]
    assert kinds(back) == back and machine_count(back) == 2


# --- another machine of the same kind: machine_id, a hash of the GPUs' UUIDs -------------


def _at(machine_id: str | None, gpu: HostGpu = H100) -> HostFacts:
    return _host(gpu).model_copy(update={"machine_id": machine_id})


def test_another_machine_of_the_same_kind_is_kept_an_unknown_one_is_not() -> None:
    first, _ = note_host([], _at("gpu:aaaaaaaaaaaa"))
    again, before = note_host(first, _at("gpu:aaaaaaaaaaaa"))
    assert again is first and before is None
    # either side without a fingerprint (a host kept before it was): as before, by kind
    assert note_host(first, _at(None)) == (first, None)
    assert note_host([_at(None).model_dump(mode="json")], _at("gpu:bbbbbbbbbbbb"))[1] is None
    both, before = note_host(first, _at("gpu:bbbbbbbbbbbb"))
    assert len(both) == 2 and before == _at("gpu:aaaaaaaaaaaa")
    # still one kind of machine to every count
    hosts = kept_hosts(both)
    assert kinds(hosts) == hosts[:1] and machine_count(hosts) == 1


def _uuids(c: str) -> list[str]:
    return [f"GPU-{c * 8}-{k}111-2222-3333-444444444444" for k in range(8)]


def test_a_sweep_resumed_on_another_machine_of_the_same_kind_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two H100 machines of one kind: the resume says so and keeps both hosts, and the
    report and compare still read one kind of machine (no 'resumed on another machine')."""
    from crossover.report.html import render_html

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    cfg = _url_sweep("two")

    def resume(uuids: list[str]) -> tuple[list[str], list[HostFacts]]:
        monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml([H100.name] * 8, uuids))
        notes: list[str] = []
        runner = SweepRunner(cfg, tmp_path, events=SweepEvents(on_note=notes.append))
        try:
            return notes, kept_hosts(runner.store.get_meta("hosts"))
        finally:
            runner.close()

    notes, hosts = resume(_uuids("a"))
    assert notes == [] and len(hosts) == 1 and hosts[0].machine_id is not None
    # the same machine, its GPUs chosen otherwise: no note, nothing kept
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3,4,5,6,7")
    assert resume(_uuids("a")) == ([], hosts)
    (said,), both = resume(_uuids("b"))
    said = " ".join(said.split())
    assert said.startswith(
        "this sweep resumed on another machine of the same kind: 8x NVIDIA H100 80GB HBM3"
    )
    assert f"(machine {both[1].machine_id})" in said
    assert f"measured on the other (machine {hosts[0].machine_id};" in said
    assert len(both) == 2 and both[0] == hosts[0]
    assert both[1].machine_id not in (None, hosts[0].machine_id)
    assert all("GPU-" not in json.dumps(h.model_dump(mode="json")) for h in both)
    # back on the same machine: nothing new
    assert resume(_uuids("b")) == ([], both)

    x = [TargetInfo(name="x")]
    sweep = SweepFile(hosts=both, targets=x)
    assert sweep.machines() == 1
    html = render_html(sweep, {}, [], [])
    assert "resumed on another machine:" not in html
    assert f"machine {both[0].machine_id}, then {both[1].machine_id}: resumed on another " in html
    assert "compare them as two machines" in html
    cmp = compare_sweeps(sweep, SweepFile(hosts=both[1:], targets=x))
    assert not any("machines differ" in n or "another machine (" in n for n in cmp.notes)
    assert any(
        n.startswith("A: resumed on another machine of the same kind (machine gpu:")
        for n in cmp.notes
    ), cmp.notes
