"""Issue 39 item 1: any GPU. The table, exact names, --gpu-spec and NVML at its seam."""

from __future__ import annotations

import itertools
import json
import re
import types
from pathlib import Path
from typing import Any

import pytest

from crossover.advise import nvml
from crossover.advise.hardware import (
    GpuEntry,
    _norm,
    find_entry,
    find_gpu,
    known_gpus,
    parse_gpu_spec,
    resolve_system,
    system_from_flags,
    system_from_nvml,
)
from crossover.cli.app import main
from crossover.errors import UsageError

# --- the table ------------------------------------------------------------------------

MUST_HAVE = [
    # GeForce desktop and laptop, each generation
    "RTX-2080-Ti", "RTX-3090", "RTX-3060", "RTX-4090", "RTX-4060", "RTX-5090", "RTX-5080",
    "RTX-3080-Laptop-16GB", "RTX-4090-Laptop", "RTX-4060-Laptop", "RTX-5090-Laptop",
    # workstation
    "RTX-A6000", "RTX-6000-Ada", "RTX-PRO-6000",
    # datacenter
    "V100-SXM2-32GB", "T4", "A10", "A30", "A100-40GB", "A100-80GB", "L4", "L40S", "H100-PCIe",
    "H100-SXM", "H100-NVL", "H20", "H200", "B200", "GB200",
    # AMD
    "MI300X", "MI325X",
]  # fmt: skip


def test_the_table_has_forty_products_and_the_named_ones() -> None:
    ids = [g.id for g in known_gpus()]
    assert len(ids) >= 40
    assert len(ids) == len(set(ids))
    assert set(MUST_HAVE) <= set(ids)
    forms = {g.form for g in known_gpus()}
    assert {"desktop", "laptop", "workstation", "datacenter"} <= forms


@pytest.mark.parametrize("gpu", known_gpus(), ids=lambda g: g.id)
def test_every_entry_has_a_source_and_consistent_units(gpu: GpuEntry) -> None:
    assert "http" in gpu.source or "whitepaper" in gpu.source.lower()
    # memory in GiB, bandwidth in GB/s, tensor rates in dense TFLOPS: each in its range
    assert 4 <= gpu.memory_gib <= 300
    if gpu.memory_bandwidth_gbs is not None:
        assert 150 <= gpu.memory_bandwidth_gbs <= 10_000
        # bytes per second per byte held: from ~20/s (GDDR cards) to ~100/s (HBM3e)
        assert 10 <= gpu.memory_bandwidth_gbs / gpu.memory_gib <= 120
    rates = [gpu.bf16_tflops, gpu.fp8_tflops, gpu.fp4_tflops]
    for low, high in itertools.pairwise(rates):
        if low is not None and high is not None:
            assert high == pytest.approx(2 * low, rel=0.02)  # each halving doubles the rate
    if gpu.bf16_tflops is not None:
        assert 20 <= gpu.bf16_tflops <= 3000
    if gpu.fp8_tflops is not None:
        assert gpu.sm_family in ("sm89", "sm90", "sm100", "sm120", "gfx942")
    if gpu.fp4_tflops is not None:
        assert gpu.sm_family in ("sm100", "sm120")
    if gpu.vendor == "amd":
        assert gpu.engines and "trtllm" not in gpu.engines


def test_a_derived_geforce_rate_says_how() -> None:
    for gpu in known_gpus():
        if gpu.form in ("desktop", "laptop") and gpu.bf16_tflops is not None:
            derived = "512 dense FLOP/clk/SM" in gpu.source
            assert derived or "column" in gpu.source, gpu.id
            if derived:
                assert gpu.sm_count and gpu.boost_clock_mhz
                want = gpu.sm_count * gpu.boost_clock_mhz * 512 / 1e6
                assert gpu.bf16_tflops == pytest.approx(want, abs=0.06)


def test_names_are_unique_but_for_the_deliberately_ambiguous() -> None:
    owners: dict[str, set[str]] = {}
    for gpu in known_gpus():
        for name in (gpu.id, *gpu.aliases):
            owners.setdefault(_norm(name), set()).add(gpu.id)
    shared = {k: v for k, v in owners.items() if len(v) > 1}
    for ids in shared.values():
        # the same product at two memory sizes: NVML's memory decides, a --gpu name is refused
        assert len({i.rsplit("-", 1)[0] for i in ids}) == 1 or all("V100" in i for i in ids)


# --- names ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["RTX 4090 Laptop", "NVIDIA GeForce RTX 4090 Laptop GPU", "rtx-4090-laptop"]
)
def test_the_4090_laptop_is_the_16gb_part(name: str) -> None:
    gpu = find_gpu(name)
    assert gpu.id == "RTX-4090-Laptop"
    assert gpu.memory_gib == 16
    assert gpu.memory_bandwidth_gbs == 576
    assert find_gpu("RTX 4090").memory_gib == 24  # the desktop card stays itself


def test_a_typo_is_refused_naming_the_closest() -> None:
    with pytest.raises(UsageError) as err:
        find_gpu("5090x")
    text = str(err.value)
    assert "unknown GPU '5090x'" in text
    assert "RTX-5090" in text
    assert "\n" not in text


def test_no_prefix_or_fuzzy_match() -> None:
    for name in ("H100 80GB", "RTX 409", "NVIDIA H100 80GB HBM3 extra"):
        with pytest.raises(UsageError, match="unknown GPU"):
            find_entry(name)


def test_an_ambiguous_name_is_refused_naming_both() -> None:
    with pytest.raises(UsageError, match="ambiguous") as err:
        find_gpu("RTX 4060 Ti")
    assert "RTX-4060-Ti-16GB" in str(err.value) and "RTX-4060-Ti-8GB" in str(err.value)


def test_a_row_without_a_sourced_figure_asks_for_it() -> None:
    with pytest.raises(UsageError, match=r"no sourced bf16 figure.*prefill.*--gpu-spec bf16="):
        find_gpu("RTX 5090 Laptop")
    system = system_from_flags("RTX 5090 Laptop", spec="bf16=114")
    assert system.gpu.bf16_tflops == 114
    assert system.gpu.memory_gib == 24
    assert "--gpu-spec: bf16_tflops" in system.gpu.source


# --- --gpu-spec -------------------------------------------------------------------------


def test_gpu_spec_units() -> None:
    got = parse_gpu_spec("memory=16GiB,bandwidth=0.576TB/s,bf16=82,fp8=0.165PFLOPS,arch=sm_89")
    assert got["memory_gib"] == 16
    assert got["memory_bandwidth_gbs"] == pytest.approx(576)
    assert got["bf16_tflops"] == 82
    assert got["fp8_tflops"] == pytest.approx(165)
    assert got["compute_capability"] == "8.9"
    assert parse_gpu_spec("memory=24GB")["memory_gib"] == pytest.approx(24e9 / 1024**3)
    assert parse_gpu_spec("arch=12.0")["compute_capability"] == "12.0"
    assert parse_gpu_spec("arch=gfx942")["compute_capability"] == "gfx942"


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("memory=16", "want a number with a unit"),
        ("bandwidth=576", "want a number with a unit"),
        ("bandwidth=576GB", "want a number with a unit"),
        ("bf16=fast", "want a number"),
        ("arch=sm42", "arch="),
        ("colour=green", "KEY in memory"),
        ("memory=16GiB,memory=8GiB", "twice"),
        ("memory=0GiB", "positive"),
    ],
)
def test_gpu_spec_bad_input(spec: str, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        parse_gpu_spec(spec)


def test_gpu_spec_alone_describes_a_gpu() -> None:
    system = resolve_system(None, 2, None, "memory=16GiB,bandwidth=576GB/s,bf16=82,arch=sm89")
    assert system.gpu.id == "custom"
    assert system.gpu.sm_family == "sm89"
    assert system.gpu.arch == "ada"
    assert system.count == 2
    assert system.interconnect == "pcie-no-p2p"  # nothing said of P2P: the cautious link
    with pytest.raises(UsageError, match="needs arch"):
        resolve_system(None, 1, None, "memory=16GiB,bandwidth=576GB/s,bf16=82")
    with pytest.raises(UsageError, match=r"no sourced bandwidth figure.*decode speed"):
        resolve_system(None, 1, None, "memory=16GiB,bf16=82,arch=sm89")


# --- NVML at its seam ---------------------------------------------------------------------


def fake_nvml(
    names: list[str],
    memory_gib: float,
    cc: tuple[int, int] = (8, 9),
    cores: int | None = 9728,
    p2p: bool = False,
    uuids: list[str] | None = None,
) -> types.ModuleType:
    """A stand-in for pynvml with the calls nvml.read makes (and only those; without
    ``uuids`` the binding has no ``nvmlDeviceGetUUID``)."""
    mod = types.ModuleType("pynvml")
    ns: dict[str, Any] = {
        "NVML_P2P_CAPS_INDEX_READ": 0,
        "NVML_P2P_CAPS_INDEX_NVLINK": 3,
        "NVML_P2P_STATUS_OK": 0,
        "NVML_CLOCK_SM": 1,
        "NVML_CLOCK_MEM": 2,
        "nvmlInit": lambda: None,
        "nvmlShutdown": lambda: None,
        "nvmlDeviceGetCount": lambda: len(names),
        "nvmlDeviceGetHandleByIndex": lambda i: i,
        "nvmlDeviceGetName": lambda h: names[h].encode(),  # older bindings return bytes
        "nvmlDeviceGetCudaComputeCapability": lambda h: cc,
        "nvmlDeviceGetMemoryInfo": lambda h: types.SimpleNamespace(total=int(memory_gib * 1024**3)),
        "nvmlDeviceGetMaxClockInfo": lambda h, kind: 2040 if kind == 1 else 9001,
        "nvmlDeviceGetMemoryBusWidth": lambda h: 256,
        "nvmlDeviceGetP2PStatus": lambda a, b, idx: 0 if (p2p and idx == 0) else 4,
    }
    if cores is not None:
        ns["nvmlDeviceGetNumGpuCores"] = lambda h: cores
    if uuids is not None:
        ns["nvmlDeviceGetUUID"] = lambda h: uuids[h]
    for key, value in ns.items():
        setattr(mod, key, value)
    return mod


def test_nvml_read_gives_name_memory_sms_clocks_cc() -> None:
    reading = nvml.read(fake_nvml(["NVIDIA GeForce RTX 4090 Laptop GPU"], 15.99))
    (gpu,) = reading.gpus
    assert gpu.name == "NVIDIA GeForce RTX 4090 Laptop GPU"
    assert gpu.memory_gib == pytest.approx(15.99)
    assert gpu.compute_capability == "8.9"
    assert gpu.cuda_cores == 9728 and gpu.sm_count == 76  # 128 cores per SM on Ada
    assert gpu.max_sm_clock_mhz == 2040
    assert gpu.memory_bus_width_bits == 256
    assert reading.pairs == []


def test_nvml_calls_a_driver_lacks_are_none() -> None:
    mod = fake_nvml(["Tesla T4"], 15.0, cc=(7, 5), cores=None)
    del mod.nvmlDeviceGetMemoryBusWidth
    (gpu,) = nvml.read(mod).gpus
    assert gpu.sm_count is None and gpu.memory_bus_width_bits is None


def test_nvml_that_does_not_tell_the_compute_capability_is_a_usage_error() -> None:
    mod = fake_nvml(["NVIDIA H100 80GB HBM3"], 79.6)
    del mod.nvmlDeviceGetCudaComputeCapability
    with pytest.raises(UsageError, match=r"GPU 0's compute capability; name the GPU with --gpu"):
        nvml.read(mod)


def test_local_laptop_matches_exactly_by_nvml_name() -> None:
    nv = fake_nvml(["NVIDIA GeForce RTX 4090 Laptop GPU"], 15.99)
    system = system_from_nvml(nv=nv)
    assert system.gpu.id == "RTX-4090-Laptop"
    assert system.gpu.memory_gib == pytest.approx(15.99)  # NVML's memory wins
    assert system.gpu.sm_count == 76
    assert system.gpu.memory_bandwidth_gbs == 576  # the table's
    assert system.source == "nvml"


def test_local_memory_decides_a_shared_nvml_name() -> None:
    for gib, want in ((15.6, "RTX-4060-Ti-16GB"), (7.6, "RTX-4060-Ti-8GB")):
        nv = fake_nvml(["NVIDIA GeForce RTX 4060 Ti", "NVIDIA GeForce RTX 4060 Ti"], gib, p2p=False)
        system = system_from_nvml(nv=nv)
        assert system.gpu.id == want
        assert system.count == 2
        assert system.interconnect == "pcie-no-p2p"


def test_local_gpu_the_table_lacks_needs_spec_for_what_nvml_cannot_tell() -> None:
    nv = fake_nvml(["NVIDIA GeForce RTX 9999 Mystery"], 20.0, cc=(12, 0), cores=12288)
    with pytest.raises(UsageError) as err:
        system_from_nvml(nv=nv)
    text = str(err.value)
    assert "NVIDIA GeForce RTX 9999 Mystery" in text and "--gpu-spec bandwidth=" in text
    assert "decode speed" in text and "\n" not in text
    system = system_from_nvml(spec="bandwidth=1TB/s,bf16=150", nv=nv)
    assert system.gpu.id == "NVIDIA GeForce RTX 9999 Mystery"
    assert system.gpu.memory_gib == 20.0  # from NVML
    assert system.gpu.sm_count == 96  # 12288 cores / 128
    assert system.gpu.sm_family == "sm120"  # NVML's compute capability sets the kernels
    assert system.gpu.memory_bandwidth_gbs == 1000
    assert "NVML" in system.gpu.source and "--gpu-spec" in system.gpu.source


def test_gpu_local_reads_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(
        __import__("sys").modules, "pynvml", fake_nvml(["NVIDIA H100 80GB HBM3"], 79.6, cc=(9, 0))
    )
    assert resolve_system("local").gpu.id == "H100-SXM"
    assert resolve_system(None).gpu.id == "H100-SXM"  # the default without --gpu-spec


def test_mixed_local_gpus_are_refused() -> None:
    nv = fake_nvml(["NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 3090"], 24.0)
    with pytest.raises(UsageError, match="different GPUs"):
        system_from_nvml(nv=nv)


# --- through crossover advise and crossover gpus ----------------------------------------------


def _advise(args: list[str], tmp_path: Path) -> tuple[int, dict[str, Any] | None]:
    out = tmp_path / "advice.json"
    rc = main(
        ["advise", "--model", "llama-3.1-8b", "--concurrency", "1", *args, "--json", str(out)]
    )
    return rc, json.loads(out.read_text()) if out.exists() else None


def test_advise_4090_laptop_uses_the_16gb_part(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, advice = _advise(["--gpu", "RTX 4090 Laptop"], tmp_path)
    assert rc == 0 and advice is not None
    assert advice["hardware"]["gpu"] == "RTX-4090-Laptop"
    assert advice["hardware"]["memory_gib"] == 16
    assert "1x RTX-4090-Laptop" in capsys.readouterr().out


def test_advise_refuses_a_typo_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, advice = _advise(["--gpu", "5090x"], tmp_path)
    assert rc == 2 and advice is None
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1
    assert "5090x" in lines[0] and "RTX-5090" in lines[0]
    assert "Traceback" not in err


def test_advise_with_gpu_spec_end_to_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = "memory=16GiB,bandwidth=576GB/s,bf16=79.4,fp8=158.8,arch=sm89"
    rc, advice = _advise(["--gpu-spec", spec], tmp_path)
    assert rc == 0 and advice is not None
    hw = advice["hardware"]
    assert hw["gpu"] == "custom" and hw["memory_gib"] == 16 and hw["compute_capability"] == "8.9"
    laptop = _advise(["--gpu", "RTX 4090 Laptop"], tmp_path / "b")[1]
    assert laptop is not None
    # the same figures as the table's 4090 Laptop give the same predictions
    assert [r["predicted"] for r in advice["recommendations"]] == [
        r["predicted"] for r in laptop["recommendations"]
    ]
    rc, _ = _advise(["--gpu-spec", "memory=16,bandwidth=576GB/s,bf16=79,arch=sm89"], tmp_path / "c")
    assert rc == 2
    assert "want a number with a unit" in capsys.readouterr().err


def test_gpus_lists_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gpus"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^RTX-4090-Laptop\s+laptop\s+ada\s+8\.9\s+16\s+576\b", out, re.M)
    assert re.search(r"^RTX-5090-Laptop .* - +- +-$", out, re.M)  # unsourced: a dash
    assert f"{len(known_gpus())} GPUs" in out
    assert main(["gpus", "laptop", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and all(r["form"] == "laptop" for r in rows)


def test_gpus_local_shows_what_nvml_reads(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import sys

    monkeypatch.setitem(
        sys.modules, "pynvml", fake_nvml(["NVIDIA GeForce RTX 4090 Laptop GPU"], 15.99)
    )
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert main(["gpus", "--local"]) == 0
    out = capsys.readouterr().out
    assert "NVIDIA GeForce RTX 4090 Laptop GPU, 16.0 GiB, cc 8.9, 76 SMs" in out
    assert out.splitlines()[0].endswith("-> RTX-4090-Laptop")
    monkeypatch.setitem(sys.modules, "pynvml", None)  # not installed: one line, exit 2
    assert main(["gpus", "--local"]) == 2
    assert "nvidia-ml-py" in capsys.readouterr().err


def test_gpus_local_without_a_gpu_names_what_gpus_takes(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """NVML present but no driver: the hint fits ``gpus`` (which has no --gpu option)."""
    import sys
    import types

    class NVMLError(Exception):
        pass

    def init() -> None:
        raise NVMLError("Driver Not Loaded")

    fake = types.SimpleNamespace(nvmlInit=init, NVMLError=NVMLError)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    assert main(["gpus", "--local"]) == 2
    err = capsys.readouterr().err.strip()
    assert "Driver Not Loaded" in err and "without --local lists the table" in err
    assert len(err.splitlines()) == 1


def test_every_complete_row_gets_advice() -> None:
    """Each GPU the table can describe in full yields a ranked candidate for a small model
    (Volta and Turing in FP16: they have no BF16 kernels)."""
    from crossover.advise import AdviceRequest, advise, load_model
    from crossover.advise.hardware import System, complete, default_interconnect

    model = load_model("llama-3.2-1b")
    done = 0
    for entry in known_gpus():
        if entry.memory_bandwidth_gbs is None or entry.bf16_tflops is None:
            continue
        gpu = complete(entry)
        system = System(gpu=gpu, count=1, interconnect=default_interconnect(gpu, 1))
        quant = "fp16" if gpu.sm_family in ("sm70", "sm75") else None
        advice = advise(AdviceRequest(system=system, model=model, concurrency=[1], quant=quant))
        assert advice["recommendations"], (entry.id, advice["rejected"][:2])
        if gpu.vendor == "amd":
            assert {r["engine"] for r in advice["recommendations"]} <= set(gpu.engines or [])
        done += 1
    assert done >= 60


@pytest.mark.parametrize("args", [["H1OO"], ["Voodoo", "--json"]])
def test_gpus_with_a_name_no_row_contains_is_refused(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """It printed "0 GPUs" (or []) and exited 0: a typo read as an empty table."""
    assert main(["gpus", *args]) == 2
    cap = capsys.readouterr()
    assert cap.out == "" and cap.err.count("\n") == 1
    assert f"no GPU's name contains {args[0]!r}" in cap.err
