"""The TensorRT-LLM repository ``crossover plan --engine triton`` writes, loaded by the real
tritonserver (``crossover engines install triton``) with explicit model control: what it
validated and what it could not, and a broken wiring that the server refuses."""

from __future__ import annotations

import pytest

from crossover.builds.triton import TritonInstall
from crossover.plan import triton
from crossover.plan.triton_load import load_check

pytestmark = [pytest.mark.llamacpp, pytest.mark.slow]


@pytest.fixture(scope="module")
def server() -> TritonInstall:
    from crossover.builds.triton import ensure_triton

    return ensure_triton(progress=False)


def test_generated_repository_loads_up_to_the_missing_backend(server: TritonInstall) -> None:
    files = triton.repository(16, "/models/tokenizer", "/models/engine", with_bls=True)
    report = load_check(files, server)
    assert report.problems == [], report.server_log[-3000:]
    (trt,) = report.as_written
    assert trt.model == "tensorrt_llm" and not trt.ready
    assert "unable to find backend library for backend 'tensorrtllm'" in (trt.error or "")
    ready = {r.model for r in report.stand_ins if r.ready}
    assert ready == {"ensemble", "preprocessing", "postprocessing", "tensorrt_llm",
                     "tensorrt_llm_bls"}  # fmt: skip
    assert any("ensemble: READY" in v and "wiring" in v for v in report.validated)
    assert any("tensorrt_llm_bls" in v for v in report.validated)
    assert any("tensorrt_llm backend's parameters" in n for n in report.not_validated)


def test_server_refuses_a_broken_wiring(server: TritonInstall) -> None:
    files = triton.repository(16, "/models/tokenizer", "/models/engine")
    # the ensemble feeds tensorrt_llm's input_ids from a tensor no step produces
    files["ensemble/config.pbtxt"] = files["ensemble/config.pbtxt"].replace(
        'value: "_INPUT_ID"', 'value: "_NOWHERE"', 1
    )
    assert "_NOWHERE" in files["ensemble/config.pbtxt"]
    report = load_check(files, server)
    assert [p for p in report.problems if p.startswith("ensemble (stand-ins)")], report.problems
    assert not any("ensemble: READY" in v for v in report.validated)
