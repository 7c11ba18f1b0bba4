"""Launch commands of every adapter, against the engines' documented flags.

Flag sources: llama.cpp common/arg.cpp (vendored in llama-cpp-python 0.3.36);
transformers serve start line from docs/engines.md (seen here, transformers 5.17.0);
vLLM vllm/engine/arg_utils.py; SGLang python/sglang/srt/server_args.py; TensorRT-LLM
tensorrt_llm/commands/serve.py and llmapi/llm_args.py (1.x cuda_graph_config nesting).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from crossover.engines import ENGINES as ADAPTERS
from crossover.engines import EngineConfig, engine_config, launch_spec
from crossover.engines.registry import names
from crossover.engines.specs.transformers import ENTRY as TRANSFORMERS_ENTRY
from crossover.errors import UsageError
from crossover.spec.target import LaunchTarget

CONTRACT_DIALECTS = {"openai", "vllm", "sglang", "trtllm", "triton", "llamacpp", "transformers"}


def cfg(**fields: object) -> EngineConfig:
    return EngineConfig.model_validate(fields)


def test_registry_covers_every_engine_with_a_contract_dialect() -> None:
    assert set(ADAPTERS) == set(names())
    for name, adapter in ADAPTERS.items():
        assert adapter.name == name
        assert adapter.dialect.name in CONTRACT_DIALECTS
        assert adapter.health_path.startswith("/")
        # lmdeploy's log lines are not modelled yet (crossover.engines.specs.lmdeploy)
        assert adapter.log_patterns or name in ("triton", "lmdeploy")
        assert adapter.version_probes


def test_llamacpp_command_matches_the_run_seen_here(tmp_path: Path) -> None:
    # seen here: llama-server -m m8b.gguf -ngl 99 -np 64 -c 65536 -fa on --port 8080 --metrics
    model = tmp_path / "m8b.gguf"
    config = cfg(
        engine="llamacpp",
        model=str(model),
        parallel=64,
        context_tokens=1024,
        gpu_layers=99,
        flash_attn=True,
        cuda_graphs=True,
    )
    spec = launch_spec(config, 8080, tmp_path)
    assert spec.argv == [
        "llama-server", "-m", str(model), "--host", "127.0.0.1", "--port", "8080",
        "-np", "64", "-c", "65536", "-ngl", "99", "-fa", "on", "--metrics",
    ]  # fmt: skip
    assert spec.env_set == {}
    assert spec.env_unset == ("GGML_CUDA_DISABLE_GRAPHS",)  # an inherited "1" would win


@pytest.mark.parametrize(("mib", "flag"), [(0, "0"), (2048, "2048"), (None, None)])
def test_llamacpp_prompt_cache_size(tmp_path: Path, mib: int | None, flag: str | None) -> None:
    # --cache-ram (common/arg.cpp): 0 turns off the host prompt cache whose idle-slot saves
    # stalled a 256-slot server on the H200 (docs/engines.md); unset keeps the default
    argv = launch_spec(
        cfg(engine="llamacpp", model="m.gguf", prompt_cache_mib=mib), 1, tmp_path
    ).argv
    if flag is None:
        assert "--cache-ram" not in argv
    else:
        assert argv[argv.index("--cache-ram") + 1] == flag


def test_llamacpp_graphs_off_is_an_environment_variable(tmp_path: Path) -> None:
    spec = launch_spec(cfg(engine="llamacpp", model="m.gguf", cuda_graphs=False), 1, tmp_path)
    assert spec.env_set == {"GGML_CUDA_DISABLE_GRAPHS": "1"}
    assert "-ngl" in spec.argv
    assert "--metrics" in spec.argv
    assert not any("graph" in a for a in spec.argv)


@pytest.mark.parametrize(
    ("knob", "value"),
    [("tp", 2), ("quant", "fp8"), ("dtype", "bf16"), ("load_format", "dummy")],
)
def test_llamacpp_refuses_knobs_it_cannot_take(knob: str, value: object, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=f"llama-server does not take {knob}="):
        launch_spec(cfg(engine="llamacpp", model="m.gguf", **{knob: value}), 1, tmp_path)


def test_transformers_command_is_the_gpu_recipe(tmp_path: Path) -> None:
    config = cfg(engine="transformers", model="/tmp/hf8b", cuda_graphs=True, port=8081)
    spec = launch_spec(config, 8081, tmp_path)
    assert spec.argv == [
        "python3", "-c", TRANSFORMERS_ENTRY, "serve", "/tmp/hf8b", "--continuous-batching",
        "--cb-use-cuda-graph", "--device", "cuda:0", "--dtype", "bfloat16",
        "--host", "127.0.0.1", "--port", "8081",
    ]  # fmt: skip
    assert TRANSFORMERS_ENTRY == "from transformers.cli.transformers import app; app()"
    off = launch_spec(config.model_copy(update={"cuda_graphs": False}), 8081, tmp_path)
    assert "--cb-use-cuda-graph" not in off.argv
    assert ADAPTERS["transformers"].health_path == "/health"  # /v1/models crashes (seen here)


def test_vllm_command(tmp_path: Path) -> None:
    config = cfg(
        engine="vllm", model="meta-llama/Llama-3.1-8B", tp=2, parallel=64, context_tokens=4096,
        dtype="bfloat16", quant="fp8", cuda_graphs=False, load_format="dummy",
    )  # fmt: skip
    argv = launch_spec(config, 9000, tmp_path).argv
    assert argv[:3] == ["vllm", "serve", "meta-llama/Llama-3.1-8B"]
    pairs = dict(itertools.pairwise(argv))
    assert pairs["--tensor-parallel-size"] == "2"
    assert pairs["--pipeline-parallel-size"] == "1"
    assert pairs["--max-num-seqs"] == "64"
    assert pairs["--max-model-len"] == "4096"
    assert pairs["--quantization"] == "fp8"
    assert pairs["--load-format"] == "dummy"
    assert "--enforce-eager" in argv
    on = launch_spec(config.model_copy(update={"cuda_graphs": True}), 9000, tmp_path).argv
    assert "--enforce-eager" not in on
    graphs = json.loads(on[on.index("--compilation-config") + 1])
    # a CUDAGraphMode name, and (TP=2) the fused all-reduce pass that needs multicast off
    assert graphs == {
        "cudagraph_mode": "FULL_AND_PIECEWISE",
        "pass_config": {"fuse_allreduce_rms": False},
    }
    assert on.count("--compilation-config") == 1


def test_vllm_one_merged_compilation_config(tmp_path: Path) -> None:
    """vLLM reads --compilation-config once: the user's keys and the knobs' share one flag."""
    config = cfg(
        engine="vllm", model="m", tp=1, cuda_graphs=True,
        compilation_config={"pass_config": {"enable_sp": False}, "max_cudagraph_capture_size": 64},
        gpu_memory_utilization=0.85, max_batched_tokens=4096,
    )  # fmt: skip
    argv = launch_spec(config, 9000, tmp_path).argv
    assert argv.count("--compilation-config") == 1
    merged = json.loads(argv[argv.index("--compilation-config") + 1])
    assert merged == {
        "cudagraph_mode": "FULL_AND_PIECEWISE",
        "max_cudagraph_capture_size": 64,
        "pass_config": {"enable_sp": False},
    }
    pairs = dict(itertools.pairwise(argv))
    assert pairs["--gpu-memory-utilization"] == "0.85"
    assert pairs["--max-num-batched-tokens"] == "4096"
    # no knob set: no flag at all (the engine's own default, as a user would type it)
    plain = launch_spec(cfg(engine="vllm", model="m"), 9000, tmp_path).argv
    assert "--compilation-config" not in plain


def test_vllm_tp_keeps_multicast_off(tmp_path: Path) -> None:
    spec = launch_spec(cfg(engine="vllm", model="m", tp=2), 9000, tmp_path)
    assert spec.env_set["NCCL_NVLS_ENABLE"] == "0"
    assert spec.env_set["VLLM_FLASHINFER_ALLREDUCE_BACKEND"] == "trtllm"
    assert spec.env_set["VLLM_ALLREDUCE_USE_SYMM_MEM"] == "0"
    merged = json.loads(spec.argv[spec.argv.index("--compilation-config") + 1])
    assert merged["pass_config"]["fuse_allreduce_rms"] is False
    with pytest.raises(UsageError, match="multicast"):
        launch_spec(
            cfg(engine="vllm", model="m", tp=2,
                compilation_config={"pass_config": {"fuse_allreduce_rms": True}}),
            9000, tmp_path,
        )  # fmt: skip


@pytest.mark.parametrize("flag", ["--compilation-config", "-O", "--compilation-config={}"])
def test_vllm_refuses_a_second_compilation_flag(tmp_path: Path, flag: str) -> None:
    config = cfg(engine="vllm", model="m", cuda_graphs=True, extra_args=[flag, "{}"])
    with pytest.raises(UsageError, match="compilation_config"):
        launch_spec(config, 9000, tmp_path)


@pytest.mark.parametrize(
    ("engine", "knob"),
    [("llamacpp", "gpu_memory_utilization"), ("transformers", "max_batched_tokens"),
     ("sglang", "compilation_config"), ("sglang", "flash_attn"), ("vllm", "prompt_cache_mib"),
     ("trtllm", "prompt_cache_mib")],
)  # fmt: skip
def test_knobs_an_engine_cannot_take_are_refused(tmp_path: Path, engine: str, knob: str) -> None:
    value = {"gpu_memory_utilization": 0.5, "max_batched_tokens": 64, "prompt_cache_mib": 0,
             "flash_attn": True}.get(knob, {"a": 1})  # fmt: skip
    with pytest.raises(UsageError, match=knob):
        launch_spec(cfg(engine=engine, model=str(tmp_path), **{knob: value}), 9000, tmp_path)


def test_sglang_command(tmp_path: Path) -> None:
    config = cfg(engine="sglang", model="Qwen/Qwen3-8B", tp=2, parallel=32, cuda_graphs=True)
    argv = launch_spec(config, 30000, tmp_path).argv
    assert argv[:5] == ["python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B"]
    assert argv[argv.index("--tp-size") + 1] == "2"
    assert argv[argv.index("--max-running-requests") + 1] == "32"
    assert argv[argv.index("--cuda-graph-max-bs") + 1] == "32"
    assert "--enable-metrics" in argv
    assert "--disable-cuda-graph" not in argv
    off = launch_spec(config.model_copy(update={"cuda_graphs": False}), 30000, tmp_path).argv
    assert "--disable-cuda-graph" in off
    assert "--cuda-graph-max-bs" not in off


def test_trtllm_yaml_uses_the_1x_nesting(tmp_path: Path) -> None:
    config = cfg(engine="trtllm", model="/models/llama", tp=2, parallel=64, cuda_graphs=True)
    spec = launch_spec(config, 8000, tmp_path)
    argv = spec.argv
    assert argv[:2] == ["trtllm-serve", "/models/llama"]
    assert argv[argv.index("--tp_size") + 1] == "2"
    assert argv[argv.index("--max_batch_size") + 1] == "64"
    path = Path(argv[argv.index("--extra_llm_api_options") + 1])
    assert yaml.safe_load(spec.files[path]) == {
        "cuda_graph_config": {"enable_padding": True, "max_batch_size": 64}
    }
    off = launch_spec(config.model_copy(update={"cuda_graphs": False}), 8000, tmp_path)
    assert yaml.safe_load(next(iter(off.files.values()))) == {"cuda_graph_config": None}


def test_trtllm_0_20_yaml_uses_pytorch_backend_config(tmp_path: Path) -> None:
    config = cfg(engine="trtllm", model="/m", cuda_graphs=True, engine_version="0.20.0")
    spec = launch_spec(config, 8000, tmp_path)
    opts = yaml.safe_load(next(iter(spec.files.values())))
    assert opts["pytorch_backend_config"]["use_cuda_graph"] is True
    assert "cuda_graph_config" not in opts


def test_trtllm_refuses_two_option_files(tmp_path: Path) -> None:
    config = cfg(
        engine="trtllm", model="/m", cuda_graphs=True,
        extra_args=["--extra_llm_api_options", "mine.yaml"],
    )  # fmt: skip
    with pytest.raises(UsageError, match="extra_llm_api_options"):
        launch_spec(config, 8000, tmp_path)


def test_triton_command_and_health(tmp_path: Path) -> None:
    argv = launch_spec(cfg(engine="triton", model="/repo"), 8000, tmp_path).argv
    assert argv[0] == "tritonserver"
    assert "--model-repository=/repo" in argv
    assert "--http-port=8000" in argv
    assert ADAPTERS["triton"].health_path == "/v2/health/ready"


def test_extra_args_and_env_pass_through(tmp_path: Path) -> None:
    config = cfg(
        engine="llamacpp", model="m.gguf", cuda_graphs=False, extra_args=["--split-mode", "layer"],
        env={"GGML_CUDA_DISABLE_GRAPHS": "yes", "CUDA_VISIBLE_DEVICES": "1"},
    )  # fmt: skip
    spec = launch_spec(config, 1, tmp_path)
    assert spec.argv[-2:] == ["--split-mode", "layer"]
    assert spec.env_set == {"GGML_CUDA_DISABLE_GRAPHS": "yes", "CUDA_VISIBLE_DEVICES": "1"}


def test_metrics_endpoints_from_engines_md() -> None:
    assert "vllm:kv_cache_usage_perc" in ADAPTERS["vllm"].metric_names
    assert "llamacpp:requests_processing" in ADAPTERS["llamacpp"].metric_names
    assert ADAPTERS["trtllm"].metrics_path == "/prometheus/metrics"
    assert ADAPTERS["transformers"].metrics_path is None


def test_config_validation() -> None:
    # the name is checked where a config is built (the registry; a sweep's launch block)
    with pytest.raises(UsageError, match="unknown engine 'ollama'"):
        engine_config(engine="ollama", model="m")
    with pytest.raises(ValidationError, match="unknown engine 'ollama'"):
        LaunchTarget(engine="ollama", model="m")
    with pytest.raises(UsageError, match="bad engine config: port"):
        engine_config(engine="vllm", model="m", port=70000)
    assert engine_config(engine="vllm", model="m").host == "127.0.0.1"
