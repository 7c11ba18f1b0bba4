"""SGLang 0.5.17's real startup and serving logs (H200, launched by ``crossover sweep``):
the settings they show, checked against the flags crossover launched it with."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crossover.engines import check, detect_engine, effective_settings, parse_expect
from crossover.engines.asked import asked, asked_checks
from crossover.engines.effective import LaunchRecord, header_line, read_log

from .conftest import LOGS
from .test_engines_verify_cli import run_cli

DENSE = LOGS / "sglang-0.5.17-h200-llama3-8b.log.gz"
MOE = LOGS / "sglang-0.5.17-h200-qwen3-30b-a3b.log.gz"

#: what both logs show (same flags, same GPU): --max-running-requests 256
#: --context-length 512 --mem-fraction-static 0.85 --load-format dummy --enable-metrics
COMMON: dict[str, object] = {
    "tp": 1, "pp": 1, "ep": 1, "quant": "none", "dtype": "bfloat16",
    "kv_cache_dtype": "bfloat16", "attention_backend": "fa3", "cuda_graphs": True,
    "cuda_graph_max_bs": 256, "cuda_graph_batch_sizes": "36 sizes, 1-256",
    "prefill_cuda_graphs": True, "prefill_graph_max_tokens": 8192,
    "gpu_memory_utilization": 0.85, "max_batched_tokens": 8192, "max_prefill_tokens": 16384,
    "parallel_slots": 256, "context_tokens": 512, "mixed_chunk": False,
    "tokenizer_workers": 1, "schedule_policy": "fcfs", "stream_interval": 1,
    "torch_compile": False, "metrics": True, "load_format": "dummy", "multicast": False,
}  # fmt: skip


def text(path: Path) -> str:
    return read_log(path)


@pytest.mark.parametrize(
    ("log", "own"),
    [
        (DENSE, {"kv_cache_tokens": 845729, "kv_cache_gib": 103.24, "model": "/root/kit/model"}),
        (MOE, {"kv_cache_tokens": 671575, "kv_cache_gib": 61.48, "model": "/root/kit3/moe",
               "moe_backend": "triton", "moe_tuned_config": True,
               "moe_config": "E=128,N=768,device_name=NVIDIA_H200.json"}),
    ],
)  # fmt: skip
def test_real_sglang_settings(log: Path, own: dict[str, object]) -> None:
    log_text = text(log)
    assert detect_engine(log_text) == "sglang"
    assert detect_engine(log_text.split("\n", 1)[1]) == "sglang"  # without crossover's header
    s = effective_settings(log_text)
    expect = {**COMMON, **own}
    assert {k: s.value(k) for k in expect} == expect
    assert all(f.basis.startswith("log") for k, f in s.facts.items() if k in expect)
    if log is DENSE:
        assert not any(k.startswith("moe_") for k in s.facts)


def test_settings_come_from_the_strongest_line() -> None:
    s = effective_settings(text(DENSE))
    # the scheduler's line (after the memory pool) beats the ServerArgs repr
    assert "max_total_num_tokens=845729" in (s.facts["parallel_slots"].evidence or "")
    assert s.facts["cuda_graphs"].evidence is not None
    assert "Capture target decode CUDA graph end" in s.facts["cuda_graphs"].evidence
    assert s.facts["gpu_memory_utilization"].evidence == (
        "server_args=ServerArgs(... mem_fraction_static=0.85 ...)"
    )
    assert s.facts["dtype"].note is not None and "dtype='auto'" in s.facts["dtype"].note


def test_every_launch_flag_is_confirmed_by_the_log() -> None:
    for log in (DENSE, MOE):
        s = effective_settings(text(log))
        checks = asked_checks(s)
        assert {c.setting: c.status for c in checks} == {
            "tp": "match", "pp": "match", "parallel_slots": "match", "context_tokens": "match",
            "gpu_memory_utilization": "match", "load_format": "match", "metrics": "match",
        }  # fmt: skip
        assert all(c.source == "launch" for c in checks)


def _relaunched(log: Path, **argv_changes: str) -> str:
    """The same log under a launch record that asked for something else."""
    body = text(log).split("\n", 1)[1]
    record = LaunchRecord.model_validate_json(text(log).split("\n", 1)[0].split(": ", 1)[1])
    argv = list(record.argv)
    for flag, value in argv_changes.items():
        flag = "--" + flag.replace("_", "-")
        if flag in argv:
            argv[argv.index(flag) + 1] = value
        else:
            argv += [flag, value] if value else [flag]
    return header_line(record.model_copy(update={"argv": argv})) + body


def test_a_setting_that_did_not_take_is_a_mismatch() -> None:
    s = effective_settings(
        _relaunched(DENSE, max_running_requests="512", mem_fraction_static="0.9", dtype="half")
    )
    got = {c.setting: (c.expected, c.effective, c.status) for c in asked_checks(s)}
    assert got["parallel_slots"] == (512, 256, "mismatch")
    assert got["gpu_memory_utilization"] == (0.9, 0.85, "mismatch")
    assert got["dtype"] == ("half", "bfloat16", "mismatch")  # half is float16
    ok = effective_settings(_relaunched(DENSE, dtype="bfloat16"))
    assert {c.setting: c.status for c in asked_checks(ok)}["dtype"] == "match"
    # the user's own expectation for a setting replaces the launch's
    assert "parallel_slots" not in {c.setting for c in asked_checks(s, skip={"parallel_slots"})}


def test_asked_values_from_argv() -> None:
    argv = ["python3", "-m", "sglang.launch_server", "--model-path", "/m", "--dtype", "auto",
            "--tp-size=2", "--disable-cuda-graph", "--cuda-graph-max-bs", "64"]  # fmt: skip
    assert asked("sglang", argv) == {
        "tp": (2, "--tp-size 2"),
        "cuda_graphs": (False, "--disable-cuda-graph"),
        "cuda_graph_max_bs": (64, "--cuda-graph-max-bs 64"),
    }  # "auto" leaves the choice to the engine: nothing to check
    assert asked("transformers", ["--dtype", "bfloat16"]) == {}


def test_graphs_disabled_by_flag_read_from_the_log() -> None:
    """--disable-cuda-graph in 0.5.17 sets both phases' backend to 'disabled' and no
    capture line is logged: both graph kinds read off, and the launch check agrees."""
    lines = _relaunched(DENSE, disable_cuda_graph="").splitlines()
    lines = [ln for ln in lines if "CUDA graph" not in ln]
    lines = [
        ln.replace("PhaseConfig(backend='full'", "PhaseConfig(backend='disabled'").replace(
            "PhaseConfig(backend='breakable'", "PhaseConfig(backend='disabled'"
        )
        for ln in lines
    ]
    s = effective_settings("\n".join(lines))
    assert (s.value("cuda_graphs"), s.value("prefill_cuda_graphs")) == (False, False)
    assert s.facts["cuda_graphs"].basis == "log"  # the ServerArgs repr says so, not absence
    assert {c.setting: c.status for c in asked_checks(s)}["cuda_graphs"] == "match"
    assert check(s, parse_expect("cuda_graphs=on"))[0].status == "mismatch"


def test_moe_down_config_note_and_no_default_warning() -> None:
    s = effective_settings(text(MOE))
    (w,) = s.warnings
    assert (w.key, w.level, w.line) == ("moe_down_config_reused", "note", 40)  # grep -n
    assert "E=128,N=768,device_name=NVIDIA_H200_down.json" in w.message
    assert effective_settings(text(DENSE)).warnings == []


# Quoted from sglang 0.5.17 python/sglang/srt/layers/moe/moe_runner/triton_utils/
# fused_moe_triton_config.py (get_moe_configs): the wording on a GPU with no tuned file.
SGL_DEFAULT = (
    "[2026-12-02 01:23:10] Using default MoE kernel config. Performance might be sub-optimal! "
    "Config file not found at /x/sglang/srt/layers/moe/moe_runner/triton_utils/configs/"
    "triton_3_6_0/E=128,N=768,device_name=NVIDIA_GeForce_RTX_4090.json, you can create them "
    "with https://github.com/sgl-project/sglang/tree/main/benchmark/kernels/fused_moe_triton"
)
SGL_OTHER_TRITON = (
    "[2026-12-02 01:23:10] Config file not found at /x/configs/triton_3_6_0/E=128,N=768,"
    "device_name=NVIDIA_H200.json. Fallback to triton version 3.5.1 and use MoE kernel config "
    "from /x/configs/triton_3_5_1/E=128,N=768,device_name=NVIDIA_H200.json. Performance might "
    "be sub-optimal!"
)


def _moe_with(line: str) -> str:
    keep = [ln for ln in text(MOE).splitlines() if "MoE kernel config" not in ln]
    return "\n".join([*keep[:41], line, *keep[41:]])


def test_default_moe_config_is_a_warning(capsys: pytest.CaptureFixture[str]) -> None:
    s = effective_settings(_moe_with(SGL_DEFAULT))
    assert (s.value("moe_tuned_config"), s.value("moe_config")) == (False, "default")
    assert s.value("moe_backend") == "triton"
    (w,) = [w for w in s.warnings if w.level == "warning"]
    assert w.key == "moe_default_config"
    assert "NVIDIA_GeForce_RTX_4090.json" in w.message
    other = effective_settings(_moe_with(SGL_OTHER_TRITON))
    assert (other.value("moe_tuned_config"), other.value("moe_config")) == (
        True, "E=128,N=768,device_name=NVIDIA_H200.json",
    )  # fmt: skip
    assert [w.key for w in other.warnings if w.level == "warning"] == ["moe_other_triton_config"]
    assert "Triton 3.5.1" in other.warnings[0].message


def test_verify_config_shows_the_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "sglang.log"
    log.write_text(_moe_with(SGL_DEFAULT))
    out = tmp_path / "verify.json"
    assert run_cli(["verify-config", str(log), "--json", str(out)]) == 0  # a warning, not a fail
    printed = " ".join(capsys.readouterr().out.split())
    assert "warning: SGLang found no tuned fused-MoE config for this GPU" in printed
    doc = json.loads(out.read_text())
    assert [w["key"] for w in doc["warnings"]] == ["moe_default_config", "moe_down_config_reused"]
    assert {c["source"] for c in doc["checks"]} == {"launch"}
    # asking for a tuned config makes it a failed expectation
    assert run_cli(["verify-config", str(log), "--expect", "moe_tuned=on"]) == 3


def test_decode_batches_without_graphs_are_counted() -> None:
    lines = text(DENSE).splitlines()
    slow = [
        ln.replace("cuda graph: True", "cuda graph: False") if "#running-req: 128" in ln else ln
        for ln in lines
    ]
    (w,) = effective_settings("\n".join(slow)).warnings
    assert (w.key, w.count) == ("decode_without_graphs", 11)
    assert "the first with #running-req 128" in w.message


def test_graphs_below_the_admitted_batch_are_a_warning() -> None:
    """On a GPU whose default decode-graph limit is below --max-running-requests (SGLang:
    24 on a 4090), the larger decode batches run eagerly: said, not hidden."""
    wide = text(DENSE).replace(
        "max_running_requests=256, context_len=512", "max_running_requests=512, context_len=512"
    )
    s = effective_settings(wide)
    assert (s.value("parallel_slots"), s.value("cuda_graph_max_bs")) == (512, 256)
    (w,) = s.warnings
    assert w.key == "graphs_below_parallel"
    assert "captured up to batch 256 but the engine admits 512" in w.message
    assert effective_settings(text(DENSE)).warnings == []  # 256 of 256: covered
