"""The Triton model repository: every config.pbtxt parses into Triton's ModelConfig
protobuf, and the ensemble is wired consistently."""

from __future__ import annotations

from pathlib import Path

import pytest

from crossover.plan import PlanRequest, make_plan, triton, write_plan

pytest.importorskip("tritonclient.grpc.model_config_pb2")


@pytest.mark.parametrize("concurrency", [1, 8, 128])
@pytest.mark.parametrize("bls", [False, True])
def test_every_config_parses_and_the_ensemble_is_consistent(concurrency: int, bls: bool) -> None:
    files = triton.repository(concurrency, "/models/tok", "/models/engine", with_bls=bls)
    configs = {}
    for rel, text in files.items():
        if rel.endswith("config.pbtxt"):
            cfg = triton.parse_config(text)
            assert cfg.name == rel.split("/")[0]
            assert cfg.max_batch_size == concurrency
            configs[cfg.name] = cfg
    want = {"ensemble", "preprocessing", "tensorrt_llm", "postprocessing"}
    assert set(configs) == (want | {"tensorrt_llm_bls"} if bls else want)
    assert triton.check_ensemble(configs) == []
    assert all(f"{name}/1/.keep" in files for name in configs)  # version folders


def _params(cfg: object) -> dict[str, str]:
    return {k: v.string_value for k, v in cfg.parameters.items()}  # type: ignore[attr-defined]


def test_instance_counts_scale_with_concurrency() -> None:
    counts = {}
    for c in (1, 16, 128, 1024):
        files = triton.repository(c, "/t", "/e", with_bls=True)
        pre = triton.parse_config(files["preprocessing/config.pbtxt"])
        post = triton.parse_config(files["postprocessing/config.pbtxt"])
        bls = triton.parse_config(files["tensorrt_llm_bls/config.pbtxt"])
        counts[c] = (pre.instance_group[0].count, post.instance_group[0].count)
        assert bls.instance_group[0].count == c  # bls_instance_count = max batch
    assert counts[1] == (1, 1)
    assert counts[128][0] >= 16
    assert counts[128][1] >= 32
    assert counts[16][0] < counts[128][0] <= counts[1024][0]


def test_tensorrt_llm_parameters() -> None:
    files = triton.repository(64, "/t", "/engines/llama", cuda_graphs=True)
    trt = triton.parse_config(files["tensorrt_llm/config.pbtxt"])
    params = _params(trt)
    assert trt.backend == "tensorrtllm"
    assert trt.model_transaction_policy.decoupled
    assert params["cuda_graph_mode"] == "true"
    assert params["cuda_graph_cache_size"] == "64"
    assert params["gpt_model_path"] == "/engines/llama"
    assert params["gpt_model_type"] == "inflight_fused_batching"
    assert {
        "kv_cache_free_gpu_mem_fraction",
        "batch_scheduler_policy",
        "enable_chunked_context",
    } <= set(params)
    off = triton.parse_config(
        triton.repository(64, "/t", "/e", cuda_graphs=False)["tensorrt_llm/config.pbtxt"]
    )
    assert _params(off)["cuda_graph_mode"] == "false"
    pre = _params(triton.parse_config(files["preprocessing/config.pbtxt"]))
    assert pre["tokenizer_dir"] == "/t"
    assert "multimodal_model_path" in pre


def test_wiring_check_catches_mistakes() -> None:
    files = triton.repository(8, "/t", "/e")
    configs = {
        rel.split("/")[0]: triton.parse_config(text)
        for rel, text in files.items()
        if rel.endswith("config.pbtxt")
    }
    ens = configs["ensemble"]
    step = ens.ensemble_scheduling.step[1]  # tensorrt_llm
    step.input_map["input_ids"] = "_NOT_PRODUCED"
    step.input_map["no_such_input"] = "max_tokens"
    configs["postprocessing"].input[0].data_type = configs["postprocessing"].input[0].data_type + 1
    problems = "\n".join(triton.check_ensemble(configs))
    assert "_NOT_PRODUCED" in problems
    assert "no input 'no_such_input'" in problems
    assert "data type mismatch" in problems


def test_bad_pbtxt_is_reported(tmp_path: Path) -> None:
    (tmp_path / "ensemble").mkdir()
    (tmp_path / "ensemble" / "config.pbtxt").write_text('name: "ensemble"\nbogus_field: 1\n')
    problems = triton.validate_repository(tmp_path)
    assert any("does not parse" in p for p in problems)


def test_written_triton_plan_validates(tmp_path: Path) -> None:
    plan = make_plan(
        PlanRequest(
            engine="triton", model="llama-3.1-8b", tp=2, quant="fp8", max_concurrency=128, bls=True
        )
    )
    write_plan(plan, tmp_path)
    assert triton.validate_repository(tmp_path / "triton_model_repo") == []
    assert plan.plan["expect"] == {"cuda_graphs": True, "tp": 2, "quant": "fp8"}
