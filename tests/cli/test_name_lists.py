"""Comma lists of names (``--only``, ``--engines``, ``--quant``, ``--format``) and of
``KEY=VALUE`` items (``--engine-versions``, ``--reserve-gib``, ``--gpu-spec``,
``--expect``) refuse an empty item in one line, exit 2: ``vllm,,sglang`` is not read as
``vllm,sglang`` (``crossover.errors.parse_names``, as ``parse_list`` does for levels)."""

from __future__ import annotations

from pathlib import Path

import pytest

from crossover.cli.app import main
from tests.errlines import one_line_error

SWEEP = ["sweep", "--out", "/tmp/x-sweep-names", "--target", "A=http://127.0.0.1:9,model=m",
         "--target", "B=http://127.0.0.1:9,model=m", "--concurrency", "1",
         "--output-tokens", "4"]  # fmt: skip
SYNTH = ["models", "synth", "--arch", "tiny-llama", "--out", "/tmp/x-synth-names", "--format"]
ADVISE = ["advise", "--gpu", "H100", "--model", "llama-3.1-8b", "--concurrency", "1,8"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ([*SWEEP, "--only", "A,,B"], "--only: empty item in 'A,,B'"),
        ([*SWEEP, "--only", "A,"], "--only: empty item in 'A,'"),
        ([*SWEEP, "--only", ","], "--only: empty list"),
        ([*SWEEP, "--only", ""], "--only: empty list"),
        ([*ADVISE, "--engines", "vllm,,sglang"], "--engines: empty item in 'vllm,,sglang'"),
        ([*ADVISE, "--engines", ","], "--engines: empty list"),
        ([*ADVISE, "--quant", "fp8,,bf16"], "--quant: empty item in 'fp8,,bf16'"),
        ([*ADVISE, "--quant", ","], "--quant: empty list"),
        ([*ADVISE, "--engine-versions", "vllm=0.6.3,"], "--engine-versions: empty item"),
        ([*ADVISE, "--reserve-gib", "vllm=2,,llamacpp=1"], "--reserve-gib: empty item"),
        ([*ADVISE, "--gpu-spec", "memory=80GiB,,bf16=990"], "--gpu-spec: empty item"),
        ([*SYNTH, ","], "--format: empty list"),
        ([*SYNTH, "gguf,,hf"], "--format: empty item in 'gguf,,hf'"),
    ],
)
def test_an_empty_item_is_one_line(
    args: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(args) == 2
    assert needle in one_line_error(capsys)


RUN = ["run", "--url", "http://127.0.0.1:9", "--model", "m", "--concurrency", "1",
       "--output-tokens", "4"]  # fmt: skip
CAPACITY = ["capacity", "--url", "http://127.0.0.1:9", "--output-tokens", "2"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ([*RUN, "--slo", "ttft_ms.p50<=200,,tpot_ms<=50"],
         "--slo: empty item in 'ttft_ms.p50<=200,,tpot_ms<=50'"),
        ([*RUN, "--slo", "ttft_ms.p50<=200,"], "--slo: empty item in 'ttft_ms.p50<=200,'"),
        ([*CAPACITY, "--slo", "ttft_ms.p99=100,"], "--slo: empty item in 'ttft_ms.p99=100,'"),
        ([*SWEEP, "--slo", "ttft_ms=1,,tpot_ms=2", "--check"], "--slo: empty item"),
        (["decide", "--replay", "/tmp/x-decide-none.db", "--slo", "ttft_ms.p99<=500,"],
         "empty item in 'ttft_ms.p99<=500,'"),
    ],
)  # fmt: skip
def test_an_empty_slo_term_is_one_line(
    args: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--slo`` (run, capacity, sweep, decide) refuses an empty term before any request
    is sent, as the other comma lists do; it was dropped and the rest read."""
    assert main(args) == 2
    assert needle in one_line_error(capsys)


def test_an_empty_expect_item_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "engine.log"
    log.write_text("INFO starting\n")
    assert main(["verify-config", str(log), "--expect", "cuda_graphs=on,,tp=2"]) == 2
    assert "--expect: empty item in 'cuda_graphs=on,,tp=2'" in one_line_error(capsys)


def test_the_names_given_are_still_read(capsys: pytest.CaptureFixture[str]) -> None:
    """Without the empty item the list is read as before, each name stripped."""
    assert main([*SWEEP, "--only", "A, Z", "--check"]) == 2
    assert "--only: unknown target 'Z' (known: A, B)" in one_line_error(capsys)
    assert main([*ADVISE, "--engines", "vllm, SGLang", "--quant", "bf16"]) == 0
    assert "error" not in capsys.readouterr().err
