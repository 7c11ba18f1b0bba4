"""Effective settings read from real logs (tests/fixtures/logs, captured here) and from
vLLM, SGLang and TensorRT-LLM log lines quoted from the source that prints them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from crossover.engines import (
    LaunchRecord,
    check,
    detect_engine,
    effective_settings,
    parse_expect,
)
from crossover.engines.effective import header_line, keep_earlier_log, values_match
from crossover.errors import UsageError

from .conftest import LOGS


def real(name: str) -> str:
    return (LOGS / name).read_text(encoding="utf-8")


def record(engine: str, argv: list[str], env: dict[str, str | None] | None = None) -> str:
    rec = LaunchRecord(
        engine=engine, argv=argv, env=env or {}, port=8080, started_at="2026-11-30T09:00:00+00:00"
    )
    return header_line(rec)


@pytest.mark.parametrize(
    ("log", "engine"),
    [
        ("llama-server-cuda-h200-graphs-on.log", "llamacpp"),
        ("llama-server-cuda-h200-graphs-off.log", "llamacpp"),
        ("llama-server-cpu-tiny.log", "llamacpp"),
        ("transformers-serve-cb-h200.log", "transformers"),
        ("transformers-serve-cb-cudagraph-h200.log", "transformers"),
    ],
)
def test_engine_detected_from_real_logs(log: str, engine: str) -> None:
    assert detect_engine(real(log)) == engine


@pytest.mark.parametrize(
    "log", ["llama-server-cuda-h200-graphs-on.log", "llama-server-cuda-h200-graphs-off.log"]
)
def test_llamacpp_cuda_graphs_are_unknown_from_the_log_alone(log: str) -> None:
    text = real(log)
    assert "graphs reused" in text  # in both logs: ggml graph reuse, not CUDA graphs
    settings = effective_settings(text)
    assert "cuda_graphs" not in settings.facts
    (c,) = check(settings, {"cuda_graphs": True})
    assert c.status == "unknown"
    assert c.note is not None
    assert "does not log" in c.note


def test_llamacpp_real_h200_settings() -> None:
    on = effective_settings(real("llama-server-cuda-h200-graphs-on.log"))
    off = effective_settings(real("llama-server-cuda-h200-graphs-off.log"))
    for s in (on, off):
        assert s.value("parallel_slots") == 64  # -np 64
        assert s.value("context_tokens") == 1024  # -c 65536 split over 64 slots
        assert s.value("kv_unified") is False
        assert s.value("threads") == 16
    # The only difference between the two logs is timing: a hint, not a verdict.
    assert on.value("first_decode_ms_per_token") == 5.27
    assert off.value("first_decode_ms_per_token") == 5.56


def test_llamacpp_cpu_tiny() -> None:
    s = effective_settings(real("llama-server-cpu-tiny.log"))
    assert (s.value("parallel_slots"), s.value("context_tokens"), s.value("threads")) == (
        8,
        1024,
        2,
    )
    assert "device" not in s.facts  # this build logs no device lines: unknown, not "cpu"


def test_llamacpp_graphs_off_known_from_the_launch_environment() -> None:
    argv = ["llama-server", "-m", "m8b.gguf", "-np", "64", "--metrics"]
    text = record("llamacpp", argv, {"GGML_CUDA_DISABLE_GRAPHS": "1"})
    text += real("llama-server-cuda-h200-graphs-off.log")
    settings = effective_settings(text)
    fact = settings.facts["cuda_graphs"]
    assert (fact.value, fact.basis, fact.verified) == (False, "launch-env", True)
    assert settings.value("tp") == 1  # llama.cpp splits tensors only with --split-mode row
    assert [c.status for c in check(settings, {"cuda_graphs": False})] == ["match"]
    assert [c.status for c in check(settings, {"cuda_graphs": True})] == ["mismatch"]


def test_llamacpp_graphs_requested_on_are_unverified() -> None:
    text = record("llamacpp", ["llama-server", "-m", "m.gguf"], {"GGML_CUDA_DISABLE_GRAPHS": None})
    text += real("llama-server-cuda-h200-graphs-on.log")
    settings = effective_settings(text)
    assert settings.facts["cuda_graphs"].verified is False
    assert [c.status for c in check(settings, {"cuda_graphs": True})] == ["unverified"]
    assert [c.status for c in check(settings, {"cuda_graphs": False})] == ["mismatch"]


def test_llamacpp_split_mode_row_turns_graphs_off() -> None:
    text = record("llamacpp", ["llama-server", "-m", "m.gguf", "-sm", "row"])
    text += real("llama-server-cuda-h200-graphs-on.log")
    assert effective_settings(text).value("cuda_graphs") is False


@pytest.mark.parametrize(
    "log", ["transformers-serve-cb-h200.log", "transformers-serve-cb-cudagraph-h200.log"]
)
def test_transformers_logs(log: str) -> None:
    settings = effective_settings(real(log))
    assert settings.value("continuous_batching") is True
    assert settings.value("model") == "/tmp/hf8b"
    assert "cuda_graphs" not in settings.facts  # the two logs do not differ on it
    (c,) = check(settings, {"cuda_graphs": True})
    assert c.status == "unknown"


def test_transformers_cuda_graph_request_from_the_launch_record() -> None:
    argv = ["python3", "-c", "...", "serve", "/tmp/hf8b", "--continuous-batching"]
    text = record("transformers", [*argv, "--cb-use-cuda-graph"])
    text += real("transformers-serve-cb-cudagraph-h200.log")
    settings = effective_settings(text)
    assert [c.status for c in check(settings, {"cuda_graphs": True})] == ["unverified"]
    text = record("transformers", argv) + real("transformers-serve-cb-h200.log")
    assert [c.status for c in check(effective_settings(text), {"cuda_graphs": True})] == [
        "mismatch"
    ]


def test_transformers_graphs_turned_off_by_continuous_batching_are_a_mismatch() -> None:
    """transformers 5.20 on a machine without a graph backend (captured here on the CPU):
    asked for CUDA graphs, continuous batching turned them off and said so; the launch
    argv alone would have claimed them."""
    argv = ["python3", "-c", "...", "serve", "/tmp/tfchk/m/hf", "--continuous-batching"]
    text = record("transformers", [*argv, "--cb-use-cuda-graph"])
    text += real("transformers-serve-cb-cudagraph-cpu.log")
    settings = effective_settings(text)
    assert settings.value("cuda_graphs") is False
    (c,) = check(settings, {"cuda_graphs": True})
    assert c.status == "mismatch"


@pytest.mark.parametrize(("paths", "on"), [("True, True", True), ("False, True", True),
                                            ("False, False", False)])  # fmt: skip
def test_transformers_graph_paths_line(paths: str, on: bool) -> None:
    # generation/continuous_batching/initialization.py (5.20), logger.info
    line = f"[transformers] Using cuda graphs for (varlen, decode) paths: ({paths})\n"
    text = record("transformers", ["python3", "-c", "...", "serve", "/m", "--cb-use-cuda-graph"])
    text += real("transformers-serve-cb-cudagraph-h200.log") + line
    assert effective_settings(text).value("cuda_graphs") is on


# vLLM: vllm/v1/engine/core.py ("Initializing a V1 LLM engine (v%s) with config: %s"),
# vllm/v1/core/kv_cache_utils.py ("GPU KV cache size: %s tokens"),
# vllm/v1/worker/gpu_model_runner.py ("Graph capturing finished in %.0f secs, took %.2f GiB"),
# vllm/model_executor/layers/quantization/kernels ("Selected %s for %s").
VLLM_GRAPHS = """\
(EngineCore_DP0 pid=212) INFO 10-06 12:00:01 [core.py:93] Initializing a V1 LLM engine (v0.26.0) with config: model='/m', speculative_config=None, tokenizer='/m', skip_tokenizer_init=False, dtype=torch.bfloat16, max_seq_len=4096, download_dir=None, load_format=dummy, tensor_parallel_size=2, pipeline_parallel_size=1, data_parallel_size=1, disable_custom_all_reduce=False, quantization=fp8, enforce_eager=False, kv_cache_dtype=auto, compilation_config={'level': 3, 'cudagraph_mode': <CUDAGraphMode.FULL_AND_PIECEWISE: (2, 1)>}
(Worker_TP0 pid=300) INFO 10-06 12:00:10 [__init__.py:261] Selected CutlassFP8ScaledMMLinearKernel for Fp8LinearMethod
(EngineCore_DP0 pid=212) INFO 10-06 12:00:31 [kv_cache_utils.py:1087] GPU KV cache size: 49,152 tokens
(EngineCore_DP0 pid=212) INFO 10-06 12:00:40 [gpu_model_runner.py:3480] Graph capturing finished in 8 secs, took 0.31 GiB
(APIServer pid=100) INFO 10-06 12:00:41 [api_server.py:1971] Starting vLLM API server 0 on http://127.0.0.1:8000
"""
VLLM_EAGER = """\
(EngineCore_0 pid=357) INFO 09-21 23:16:19 [core.py:75] Initializing a V1 LLM engine (v0.10.2) with config: model='TinyLlama/TinyLlama-1.1B-Chat-v1.0', dtype=torch.bfloat16, max_seq_len=2048, tensor_parallel_size=1, pipeline_parallel_size=1, quantization=None, enforce_eager=True, kv_cache_dtype=auto, compilation_config={'cudagraph_mode': <CUDAGraphMode.NONE: 0>}
(APIServer pid=100) INFO 09-21 23:16:41 [api_server.py:1971] Starting vLLM API server 0 on http://127.0.0.1:8000
"""


def test_vllm_log_lines() -> None:
    assert detect_engine(VLLM_GRAPHS) == "vllm"
    s = effective_settings(VLLM_GRAPHS)
    assert s.value("cuda_graphs") is True
    assert s.facts["cuda_graphs"].evidence is not None
    assert "Graph capturing finished" in s.facts["cuda_graphs"].evidence
    assert (s.value("tp"), s.value("pp"), s.value("quant")) == (2, 1, "fp8")
    assert s.value("dtype") == "bfloat16"
    assert s.value("kv_cache_tokens") == 49152
    assert s.value("quant_kernel") == "CutlassFP8ScaledMMLinearKernel"
    assert s.value("version") == "0.26.0"
    checks = check(s, parse_expect("cuda_graphs=on,tp=2,quant=fp8"))
    assert [c.status for c in checks] == ["match", "match", "match"]
    eager = effective_settings(VLLM_EAGER)
    assert eager.value("cuda_graphs") is False
    assert eager.value("quant") == "none"


def test_vllm_absence_of_capture_means_no_graphs() -> None:
    text = VLLM_GRAPHS.replace(
        "compilation_config={'level': 3, 'cudagraph_mode': <CUDAGraphMode.FULL_AND_PIECEWISE: (2, 1)>}",
        "compilation_config={}",
    )
    lines = [ln for ln in text.splitlines() if "Graph capturing" not in ln]
    fact = effective_settings("\n".join(lines)).facts["cuda_graphs"]
    assert (fact.value, fact.basis) == (False, "log-absence")


# SGLang: python/sglang/srt/entrypoints/engine.py (server_args=ServerArgs(...)),
# model_executor/model_runner.py ("Load weight end", "Capture cuda graph end. Time elapsed"),
# mem_cache/memory_pool.py ("KV Cache is allocated. #tokens: ..."),
# managers/scheduler.py ("max_total_num_tokens=..., max_running_requests=..., context_len=").
SGLANG = """\
[2026-03-21 03:31:56] INFO engine.py:177: server_args=ServerArgs(model_path='Qwen/Qwen3-8B', tokenizer_path='Qwen/Qwen3-8B', load_format='auto', dtype='auto', quantization='fp8', kv_cache_dtype='auto', tp_size=2, pp_size=1, dp_size=1, disable_cuda_graph=False, cuda_graph_max_bs=64)
[2026-03-21 03:32:10 TP0] Load weight end. type=Qwen3ForCausalLM, dtype=torch.bfloat16, avail mem=60.12 GB, mem usage=8.41 GB.
[2026-03-21 03:32:11 TP0] KV Cache is allocated. #tokens: 430913, K size: 13.15 GB, V size: 13.15 GB
[2026-03-21 03:32:20 TP0] Capture cuda graph end. Time elapsed: 7.23 s. mem usage=0.93 GB. avail mem=0.53 GB.
[2026-03-21 03:32:21 TP0] max_total_num_tokens=430913, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=64, context_len=40960, available_gpu_mem=0.53 GB
[2026-03-21 03:32:25] The server is fired up and ready to roll!
"""


def test_sglang_log_lines() -> None:
    assert detect_engine(SGLANG) == "sglang"
    s = effective_settings(SGLANG)
    assert s.value("cuda_graphs") is True
    assert (s.value("tp"), s.value("pp"), s.value("quant")) == (2, 1, "fp8")
    assert s.value("dtype") == "bfloat16"
    assert s.value("kv_cache_tokens") == 430913
    assert s.value("kv_cache_gib") == 26.3
    assert s.value("parallel_slots") == 64
    assert s.value("context_tokens") == 40960
    disabled = SGLANG.replace("disable_cuda_graph=False", "disable_cuda_graph=True")
    disabled = "\n".join(ln for ln in disabled.splitlines() if "Capture cuda graph" not in ln)
    assert effective_settings(disabled).value("cuda_graphs") is False


# TensorRT-LLM: tensorrt_llm/_torch/pyexecutor/model_engine.py ("Creating CUDA graph
# instances for %d batch sizes."), cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp
# ("[MemUsageChange] Allocated %0.2f GiB for max tokens in paged KV cache (%d)."),
# py_executor_creator.py ("max_seq_len=..., max_num_requests=..., max_batch_size=...").
TRTLLM = """\
[TensorRT-LLM][INFO] MPI size: 2, MPI local size: 2, rank: 0
[TensorRT-LLM][INFO] Number of tokens per block: 32.
[TensorRT-LLM][INFO] [MemUsageChange] Allocated 0.56 GiB for max tokens in paged KV cache (8224).
[12/20/2025-04:21:10] [TRT-LLM] [I] max_seq_len=8224, max_num_requests=64, max_num_tokens=8192, max_batch_size=64
[12/20/2025-04:21:37] [TRT-LLM] [I] Creating CUDA graph instances for 11 batch sizes.
[12/20/2025-04:21:37] [TRT-LLM] [I] Run generation only CUDA graph warmup for batch size=64, draft_len=0
INFO:     Application startup complete.
"""


def test_trtllm_log_lines() -> None:
    assert detect_engine(TRTLLM) == "trtllm"
    s = effective_settings(TRTLLM)
    assert s.value("cuda_graphs") is True
    assert s.value("kv_cache_tokens") == 8224
    assert s.value("kv_cache_gib") == 0.56
    assert s.value("parallel_slots") == 64
    assert s.value("context_tokens") == 8224
    assert s.value("world_size") == 2
    # trtllm-triton-serving's failure (docs/engines.md): a wrongly nested YAML key, graphs
    # silently off, server up anyway.
    lost = "\n".join(ln for ln in TRTLLM.splitlines() if "CUDA graph" not in ln)
    (c,) = check(effective_settings(lost), {"cuda_graphs": True})
    assert (c.status, c.effective, c.basis) == ("mismatch", False, "log-absence")


def test_parse_expect() -> None:
    assert parse_expect("cuda_graphs=on,tp=2,quant=fp8") == {
        "cuda_graphs": True, "tp": 2, "quant": "fp8",
    }  # fmt: skip
    assert parse_expect("graphs=off, max_batch_size=64") == {
        "cuda_graphs": False, "parallel_slots": 64,
    }  # fmt: skip
    with pytest.raises(UsageError, match="SETTING=VALUE"):
        parse_expect("cuda_graphs")
    with pytest.raises(UsageError, match="unknown setting 'warp_speed'"):
        parse_expect("warp_speed=9")


def test_value_matching() -> None:
    assert values_match("gguf-q4_k_m", "q4_k - medium")
    assert values_match("fp8", "fp8")
    assert not values_match("fp8", "compressed-tensors")
    assert values_match(2, 2)
    assert not values_match(True, 1)
    assert values_match("bf16", "bf16")
    assert not values_match("bf16", "float16")


def test_unknown_log_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="pass --engine"):
        effective_settings("hello\nworld\n")


# Captured here through crossover.engines.launch (see tests/fixtures/logs/README.md).
def test_llamacpp_debug_log_shows_cuda_graphs_in_use() -> None:
    s = effective_settings(real("llama-server-cuda-h200-tiny-graphs-on-lv5.log"))
    fact = s.facts["cuda_graphs"]
    assert (fact.value, fact.basis, fact.verified) == (True, "log", True)
    assert fact.evidence is not None and "CUDA Graph id" in fact.evidence
    assert s.value("device") == "CUDA0 (NVIDIA H200)"
    assert (s.value("gpu_layers"), s.value("flash_attn"), s.value("quant")) == (5, True, "f16")
    assert (s.value("context_total_tokens"), s.value("kv_cache_tokens")) == (4096, 1024)
    assert s.value("version") == "0 (unknown)"
    assert [c.status for c in check(s, {"cuda_graphs": True})] == ["match"]


def test_llamacpp_debug_log_without_graph_lines_means_off() -> None:
    text = real("llama-server-cuda-h200-tiny-graphs-off-lv5.log")
    with_record = effective_settings(text).facts["cuda_graphs"]
    assert (with_record.value, with_record.basis) == (False, "launch-env")
    body = text.split("\n", 1)[1]  # drop the launch record: the log alone still tells
    fact = effective_settings(body).facts["cuda_graphs"]
    assert (fact.value, fact.basis, fact.verified) == (False, "log-absence", True)


def test_llamacpp_tiny_default_verbosity_with_launch_records() -> None:
    on = effective_settings(real("llama-server-cuda-h200-tiny-graphs-on.log"))
    off = effective_settings(real("llama-server-cuda-h200-tiny-graphs-off.log"))
    assert on.launch is not None and on.launch.env == {"GGML_CUDA_DISABLE_GRAPHS": None}
    assert [c.status for c in check(on, {"cuda_graphs": True})] == ["unverified"]
    assert [c.status for c in check(off, {"cuda_graphs": False})] == ["match"]
    assert on.value("first_decode_ms_per_token") == 0.72  # a hint: 0.72 vs 1.09 ms
    assert off.value("first_decode_ms_per_token") == 1.09


def test_llamacpp_cpu_build_has_no_cuda_graphs() -> None:
    s = effective_settings(real("llama-server-cpu-gemma3-270m.log"))
    fact = s.facts["cuda_graphs"]
    assert (fact.value, fact.basis) == (False, "log")  # "no usable GPU found" beats the env
    assert s.value("device") == "cpu"
    assert (s.value("parallel_slots"), s.value("context_tokens")) == (2, 512)


# --- real vLLM 0.26.0 logs (tests/fixtures/logs, captured by crossover sweep on an H200) -----
@pytest.mark.parametrize(
    ("log", "expect"),
    [
        ("vllm-0.26-h200-vllm.log",
         {"cuda_graphs": True, "torch_compile": True, "quant": "none", "kv_cache_tokens": 897280,
          "kv_cache_gib": 109.53, "gpu_memory_utilization": 0.9, "max_batched_tokens": 8192,
          "parallel_slots": 512, "context_tokens": 512, "version": "0.26.0"}),
        ("vllm-0.26-h200-vllm-fp8.log",
         {"cuda_graphs": True, "torch_compile": True, "quant": "fp8",
          "quant_kernel": "CutlassFP8ScaledMMLinearKernel", "kv_cache_tokens": 950016}),
        ("vllm-0.26-h200-vllm-eager.log",
         {"cuda_graphs": False, "torch_compile": False, "quant": "none"}),
    ],
)  # fmt: skip
def test_vllm_real_h200_settings(log: str, expect: dict[str, object]) -> None:
    s = effective_settings(real(log))
    assert {k: s.value(k) for k in expect} == expect
    # read from the engine's own lines, not from what crossover asked for
    assert s.facts["quant"].basis == "log"
    assert s.value("multicast") is False  # the server started with no multicast line


def test_vllm_multicast_all_reduce_is_seen_in_engine_lines_only() -> None:
    crash = effective_settings(real("vllm-0.26-h200x2-tp2-mnnvl-crash.log"))
    assert crash.value("multicast") is True
    assert "mnnvl" in (crash.facts["multicast"].evidence or "")
    safe = effective_settings(real("vllm-0.26-h200x2-tp2-safe.log"))
    # its launch header names the multicast switches; the engine's lines never do
    assert safe.value("multicast") is False
    assert check(safe, parse_expect("multicast=off"))[0].status == "match"
    assert check(crash, parse_expect("multicast=off"))[0].status == "mismatch"
    assert safe.value("allreduce_backends") == "CUSTOM,PYNCCL"
    assert safe.value("tp") == 2


def test_llamacpp_prompt_cache_size_is_the_requested_flag() -> None:
    # llama-server prints its prompt-cache limit only at trace verbosity: argv is the basis
    argv = ["llama-server", "-m", "m8b.gguf", "-np", "256", "--cache-ram", "0", "--metrics"]
    text = record("llamacpp", argv) + real("llama-server-cuda-h200-graphs-on.log")
    fact = effective_settings(text).facts["prompt_cache_mib"]
    assert (fact.value, fact.basis, fact.verified) == (0, "launch-argv", False)


def test_an_earlier_log_is_kept_under_its_start_time(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    assert keep_earlier_log(log) is None  # nothing there
    log.write_text("")
    assert keep_earlier_log(log) is None and log.exists()  # an empty file is not evidence
    log.write_text(record("vllm", ["vllm", "serve", "m"]) + "INFO engine up\n")
    kept = keep_earlier_log(log)
    assert kept == tmp_path / "vllm.20261130T090000.log"
    assert not log.exists() and "INFO engine up" in kept.read_text()
    # the same start time again (two starts in one second): a suffix, nothing overwritten
    log.write_text(record("vllm", ["vllm", "serve", "m"]) + "second\n")
    again = keep_earlier_log(log)
    assert again == tmp_path / "vllm.20261130T090000-2.log"
    assert "INFO engine up" in kept.read_text() and "second" in again.read_text()
    # no launch header (a log from elsewhere): named by its mtime
    log.write_text("no header here\n")
    os.utime(log, (1_796_000_000, 1_796_000_000))
    assert keep_earlier_log(log) == tmp_path / "vllm.20261130T005320.log"


def test_engine_logs_lists_a_targets_logs_as_the_sweep_names_them(tmp_path: Path) -> None:
    """Each start's log, an earlier start's kept under its time (a restart's too), gzipped
    or not; the replicas' only when asked; another target's never."""
    from crossover.engines.launchrec import engine_logs

    names = [
        "sglang.log",
        "sglang.20261206T084641.log.gz",
        "sglang.restart1.log",
        "sglang.restart1.20261206T090000-2.log",
        "sglang-r1.log",
        "sglang-b.log",
        "sglang.log.txt",
    ]
    for n in names:
        (tmp_path / n).write_text("x")
    own = {p.name for p in engine_logs(tmp_path, "sglang")}
    assert own == set(names[:4])
    with_replicas = {p.name for p in engine_logs(tmp_path, "sglang", replicas=True)}
    assert with_replicas == set(names[:5])
    assert engine_logs(tmp_path / "none", "sglang") == []
