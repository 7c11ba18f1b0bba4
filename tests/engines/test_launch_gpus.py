"""Each adapter says how many GPUs one launch uses (``EngineSpec.launch_gpus``: tensor x
pipeline parallel as its command gives them, ``extra_args`` included, the last flag
winning as the engine's argument parser reads it); an engine with no count says
nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from crossover.engines import registry
from crossover.engines.adapters import launch_spec
from crossover.engines.config import EngineConfig
from crossover.engines.flags import GpuAsk


def _ask(engine: str, tmp_path: Path, **knobs: Any) -> GpuAsk | None:
    cfg = EngineConfig(engine=engine, model=str(tmp_path / "m"), **knobs)
    spec = registry.get(engine)
    assert spec.launch_gpus is not None
    return spec.launch_gpus(launch_spec(cfg, 8000, tmp_path).argv)


def test_vllm_tp_and_pp_from_its_knobs_and_extra_args(tmp_path: Path) -> None:
    assert _ask("vllm", tmp_path, tp=2, pp=2) == GpuAsk(
        4, "--tensor-parallel-size 2 x --pipeline-parallel-size 2"
    )
    # the knob emits --tensor-parallel-size 1 first; the user's -tp 4 comes last and wins
    assert _ask("vllm", tmp_path, extra_args=["-tp", "4"]) == GpuAsk(4, "-tp 4")
    assert _ask("vllm", tmp_path, extra_args=["--pipeline-parallel-size=3"]) == GpuAsk(
        3, "--pipeline-parallel-size 3"
    )


def test_sglang_reads_its_tp_abbreviation(tmp_path: Path) -> None:
    assert _ask("sglang", tmp_path, tp=4) == GpuAsk(4, "--tp-size 4")
    assert _ask("sglang", tmp_path, extra_args=["--tp", "2", "--pp-size", "2"]) == GpuAsk(
        4, "--tp 2 x --pp-size 2"
    )


def test_vllm_data_parallel_multiplies_on_one_node(tmp_path: Path) -> None:
    assert _ask("vllm", tmp_path, tp=2, extra_args=["-dp", "2"]) == GpuAsk(
        4, "--tensor-parallel-size 2 x -dp 2"
    )
    assert _ask("vllm", tmp_path, extra_args=["--data-parallel-size=4", "-dpb", "mp"]) == GpuAsk(
        4, "--data-parallel-size 4"
    )


@pytest.mark.parametrize(
    "more",
    [
        ["--data-parallel-size-local", "2"],
        ["-dpl", "1"],
        ["--data-parallel-address", "10.0.0.5"],
        ["--nnodes=2"],
        ["--headless"],
        ["--data-parallel-backend", "ray"],
    ],
)
def test_vllm_data_parallel_over_nodes_is_not_guessed(tmp_path: Path, more: list[str]) -> None:
    assert _ask("vllm", tmp_path, tp=2, extra_args=["-dp", "4", *more]) is None


def test_sglang_data_parallel_workers_or_dp_attention(tmp_path: Path) -> None:
    assert _ask("sglang", tmp_path, tp=2, extra_args=["--dp-size", "2"]) == GpuAsk(
        4, "--tp-size 2 x --dp-size 2"
    )
    assert _ask("sglang", tmp_path, extra_args=["--dp", "3"]) == GpuAsk(3, "--dp 3")
    # dp attention splits the same tp GPUs
    dpa = ["--dp-size", "4", "--enable-dp-attention"]
    assert _ask("sglang", tmp_path, tp=4, extra_args=dpa) == GpuAsk(4, "--tp-size 4")
    assert _ask("sglang", tmp_path, tp=8, extra_args=["--nnodes", "2", "--node-rank", "0"]) is None


def test_lmdeploy_splits_by_tp_only(tmp_path: Path) -> None:
    assert _ask("lmdeploy", tmp_path, tp=2) == GpuAsk(2, "--tp 2")


def test_trtllm_reads_its_options_file_over_its_flags(tmp_path: Path) -> None:
    assert _ask("trtllm", tmp_path, tp=2) == GpuAsk(2, "--tp_size 2")
    options = tmp_path / "extra.yaml"
    options.write_text("tensor_parallel_size: 8\nenable_chunked_prefill: true\n")
    ask = _ask("trtllm", tmp_path, tp=2, extra_args=["--extra_llm_api_options", str(options)])
    assert ask == GpuAsk(8, "tensor_parallel_size: 8 (extra_llm_api_options)")
    # a file that does not read leaves the flags' sizes (the engine says what is wrong)
    options.write_text("tensor_parallel_size: [\n")
    assert _ask(
        "trtllm", tmp_path, tp=2, extra_args=[f"--extra_llm_api_options={options}"]
    ) == GpuAsk(2, "--tp_size 2")


def test_a_size_the_engine_chooses_is_no_count(tmp_path: Path) -> None:
    assert _ask("vllm", tmp_path) == GpuAsk(1, "--tensor-parallel-size 1")
    assert _ask("vllm", tmp_path, extra_args=["--tensor-parallel-size", "auto"]) is None


@pytest.mark.parametrize("engine", ["llamacpp", "transformers", "triton"])
def test_engines_without_a_count_say_nothing(engine: str) -> None:
    # llama.cpp splits a model over every GPU it sees; transformers runs on one device;
    # Triton's models say their own instances
    assert registry.get(engine).launch_gpus is None
