"""Plans per engine: scripts, versioned trtllm YAML, plan.json, and refusals."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from crossover.errors import UsageError
from crossover.plan import PlanRequest, make_plan, write_plan
from crossover.plan.commands import PlanLaunch, graph_batch_sizes
from crossover.plan.trtllm import extra_llm_api_options, graphs_enabled

ENGINES = ["trtllm", "triton", "vllm", "sglang", "llamacpp", "transformers"]


@pytest.mark.parametrize("engine", ENGINES)
def test_every_engine_writes_scripts_and_plan_json(tmp_path: Path, engine: str) -> None:
    tp = 1 if engine == "transformers" else 2
    plan = make_plan(PlanRequest(engine=engine, model="llama-3.1-8b", tp=tp, max_concurrency=32))
    written = write_plan(plan, tmp_path)
    assert (tmp_path / "plan.json") in written
    assert (tmp_path / "serve.sh") in written
    data = json.loads((tmp_path / "plan.json").read_text())
    assert data["schema"] == "crossover.plan/1"
    assert data["engine"] == engine
    assert set(data["expect"]) == {"cuda_graphs", "tp", "quant"}
    assert data["expect"]["tp"] == tp
    assert isinstance(data["expect"]["cuda_graphs"], bool)
    assert data["commands"]["serve"]
    for script in tmp_path.glob("*.sh"):
        text = script.read_text()
        assert text.startswith("#!/usr/bin/env bash\n")
        assert "set -euo pipefail" in text
        assert script.stat().st_mode & 0o111
        if shutil.which("bash"):
            subprocess.run(["bash", "-n", str(script)], check=True)


def test_model_path_with_spaces_is_quoted(tmp_path: Path) -> None:
    model = tmp_path / "my model"
    model.mkdir()
    (model / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["LlamaForCausalLM"],
                "hidden_size": 256,
                "intermediate_size": 512,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "num_key_value_heads": 2,
                "vocab_size": 1000,
            }
        )
    )
    plan = make_plan(PlanRequest(engine="vllm", model=str(model)))
    out = tmp_path / "out"
    write_plan(plan, out)
    text = (out / "serve.sh").read_text()
    assert f'MODEL="${{MODEL:-{model}}}"' in text
    assert 'vllm serve "${MODEL}"' in text
    if shutil.which("bash"):
        # the script's argv, as bash would pass it
        probe = text.replace("exec vllm", "printf '%s\\n' vllm")
        (out / "probe.sh").write_text(probe)
        args = subprocess.run(
            ["bash", str(out / "probe.sh")], check=True, capture_output=True, text=True
        ).stdout.splitlines()
        assert args[2] == str(model)
        assert json.loads(args[args.index("--compilation-config") + 1])["cudagraph_mode"]


@pytest.mark.parametrize(
    ("version", "key"),
    [
        ("1.2.1", "cuda_graph_config"),
        ("1.0.0", "cuda_graph_config"),
        ("1.3.0rc20", "cuda_graph_config"),
        ("0.20.0", "pytorch_backend_config"),
    ],
)
def test_trtllm_cuda_graph_nesting_per_version(version: str, key: str) -> None:
    opts = extra_llm_api_options(PlanLaunch(model="m", max_concurrency=64), version)
    other = {"cuda_graph_config", "pytorch_backend_config"} - {key}
    assert key in opts
    assert not other & set(opts)
    assert graphs_enabled(opts)
    block = opts[key]
    if key == "cuda_graph_config":
        assert block["enable_padding"] is True
        assert block["batch_sizes"][-1] == 64
        assert "use_cuda_graph" not in opts  # trtllm-triton-serving's mistake: a top-level 0.20 key
    else:
        assert block["use_cuda_graph"] is True
        assert block["cuda_graph_batch_sizes"][-1] == 64
    off = extra_llm_api_options(PlanLaunch(model="m", cuda_graphs=False), version)
    assert not graphs_enabled(off)


def test_wrong_nesting_reads_as_graphs_off() -> None:
    # 0.20-style key under a 1.x server: ignored there, so graphs are not on
    assert not graphs_enabled({"use_cuda_graph": True})
    assert not graphs_enabled({"pytorch_backend_config": {"cuda_graph_padding_enabled": True}})


def test_trtllm_plan_files(tmp_path: Path) -> None:
    plan = make_plan(
        PlanRequest(
            engine="trtllm",
            model="llama-3.1-8b",
            tp=2,
            quant="fp8",
            trtllm_version="0.20.0",
            max_concurrency=16,
        )
    )
    write_plan(plan, tmp_path)
    opts = yaml.safe_load((tmp_path / "extra-llm-api-options.yaml").read_text())
    assert opts["pytorch_backend_config"]["use_cuda_graph"] is True
    serve = (tmp_path / "serve.sh").read_text()
    assert "--extra_llm_api_options" in serve
    assert "--tp_size 2" in serve
    engine = (tmp_path / "build_engine.sh").read_text()
    assert "quantize.py" in engine
    assert "--qformat fp8" in engine
    assert "trtllm-build" in engine
    assert "--use_paged_context_fmha enable" in engine
    build = (tmp_path / "build.sh").read_text()  # fp8 of a bf16 checkpoint: quantize first
    assert "hf_ptq.py" in build  # 0.20: ModelOpt's HF export
    newer = make_plan(PlanRequest(engine="trtllm", model="llama-3.1-8b", quant="nvfp4"))
    assert "quantize.py" in newer.files["build.sh"]
    assert "--export_format hf" in newer.files["build.sh"]
    assert "--qformat nvfp4" in newer.files["build.sh"]
    assert plan.plan["expect"] == {"cuda_graphs": True, "tp": 2, "quant": "fp8"}


def test_bf16_trtllm_converts_with_convert_checkpoint() -> None:
    plan = make_plan(PlanRequest(engine="triton", model="llama-3.1-8b", tp=4))
    build = plan.files["build.sh"]
    assert "examples/models/core/llama/convert_checkpoint.py" in build
    assert "--tp_size 4" in build
    serve = plan.files["serve.sh"]
    assert serve.count("-n 1") == 4
    assert serve.startswith("#!/usr/bin/env bash")
    assert '--model-repository="${PLAN_DIR}/triton_model_repo"' in serve
    assert "--load-model=tensorrt_llm" in serve
    served = plan.plan["commands"]["serve"]
    assert served[0] == "mpirun"
    assert "--model-repository=./triton_model_repo" in served


def test_llamacpp_row_split_turns_graphs_off() -> None:
    row = make_plan(PlanRequest(engine="llamacpp", model="llama-3.1-8b", tp=2, quant="gguf-q4_k_m"))
    assert row.plan["expect"]["cuda_graphs"] is False
    assert "--split-mode row" in row.files["serve.sh"]
    assert "llama-quantize" in row.files["build.sh"]
    layer = make_plan(PlanRequest(engine="llamacpp", model="llama-3.1-8b", pp=2, quant="gguf-q8_0"))
    assert layer.plan["expect"]["cuda_graphs"] is True
    assert "--split-mode layer" in layer.files["serve.sh"]


@pytest.mark.parametrize(
    ("request_kwargs", "match"),
    [
        ({"engine": "vllm", "model": "llama-3.1-8b", "tp": 3}, "does not divide"),
        ({"engine": "vllm", "model": "llama-3.1-8b", "quant": "gguf-q4_k_m"}, "llama.cpp only"),
        ({"engine": "llamacpp", "model": "llama-3.1-8b", "quant": "fp8"}, "GGUF"),
        ({"engine": "transformers", "model": "llama-3.1-8b", "tp": 2}, "one device"),
        ({"engine": "vllm", "model": "llama-3.1-8b", "quant": "nvfp4"}, "pre-quantized"),
        ({"engine": "tgi", "model": "llama-3.1-8b"}, "--engine"),
        ({"engine": "vllm", "model": "./no/such/dir/x"}, "not a file"),
        ({"engine": "triton", "model": "llama-3.1-8b", "quant": "fp8-block"}, "no TensorRT"),
        ({"engine": "trtllm", "model": "llama-3.1-8b", "trtllm_version": "banana"}, "version"),
        ({"engine": "vllm", "model": "llama-3.1-8b", "port": 0}, "--port 0: not a TCP port"),
        ({"engine": "vllm", "model": "llama-3.1-8b", "port": 65536}, "give 1 to 65535"),
    ],
)
def test_bad_plans_are_usage_errors(request_kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(UsageError, match=match):
        make_plan(PlanRequest.model_validate(request_kwargs))


def test_hub_id_without_local_files_is_planned_with_a_note() -> None:
    plan = make_plan(PlanRequest(engine="sglang", model="someorg/some-model", tp=2))
    assert plan.plan["model"]["ref"] == "someorg/some-model"
    assert any("not local" in n for n in plan.plan["notes"])


def test_graph_batch_sizes() -> None:
    assert graph_batch_sizes(1) == [1]
    assert graph_batch_sizes(12) == [1, 2, 4, 8, 12]
    assert graph_batch_sizes(64)[-1] == 64


@pytest.mark.parametrize("engine", ENGINES)
def test_an_engine_with_a_gc_freeze_says_to_call_it_after_warm_up(engine: str) -> None:
    """SGLang's front end pauses 0.5-0.74 s per full garbage collection under load and its
    /freeze_gc after warm-up removed the pauses (docs/results/h100/sglang-freeze): its
    plan says that step, with the URL its serve line listens on, and cites the rule; an
    engine without a freeze endpoint says nothing of it."""
    plan = make_plan(PlanRequest(engine=engine, model="qwen3-30b-a3b", port=8123))
    notes = [n for n in plan.plan["notes"] if "freeze_gc" in n]
    cited = [r["id"] for r in plan.plan["rules"]]
    if engine == "sglang":
        assert len(notes) == 1
        assert "POST http://127.0.0.1:8123/freeze_gc" in notes[0]
        assert "SGLang's front end" in notes[0]
        assert "sglang-frontend-gc" in cited
    else:
        assert notes == []
        assert "sglang-frontend-gc" not in cited
