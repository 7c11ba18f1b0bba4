"""The advice as terminal lines (``crossover.advise.text``), the flags' engine lists
(``crossover.advise.rules``) and ``--emit-sweep``'s model files
(``crossover.advise.sweep_config.sweep_for``): what ``crossover advise`` prints, without
the CLI."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from crossover.advise import AdviceRequest, advise, load_model, system_from_flags
from crossover.advise.rules import ENGINES, parse_engines, parse_versions
from crossover.advise.sweep_config import sweep_for
from crossover.advise.text import emitted_lines, explain_lines, near_miss_lines, table_lines
from crossover.cli.app import main
from crossover.errors import UsageError


def _advice(gpu: str, model: str, **kw: Any) -> dict[str, Any]:
    return advise(AdviceRequest(system=system_from_flags(gpu), model=load_model(model), **kw))


def test_the_lines_are_what_the_command_prints(capsys: pytest.CaptureFixture[str]) -> None:
    advice = _advice("H200", "llama-3.1-8b", concurrency=[1, 8, 64])
    args = ["advise", "--gpu", "H200", "--model", "llama-3.1-8b", "--concurrency", "1,8,64"]
    for lines, extra in ((table_lines(advice), []), (explain_lines(advice), ["--explain"])):
        assert main([*args, *extra]) == 0
        assert capsys.readouterr().out == "".join(f"{line}\n" for line in lines)


def test_the_table_heads_its_columns_and_ends_with_its_key() -> None:
    lines = table_lines(_advice("H200", "llama-3.1-8b", concurrency=[1, 8, 64]))
    assert lines[0].startswith("1x H200, llama-3.1-8b 8.0B, 512 in + 256 out tokens; ")
    assert lines[1].split() == [
        "engine", "format", "layout", "c=1", "tok/s/user", "c=8", "out", "tok/s",
        "c=64", "out", "tok/s", "quality", "cost",
    ]  # fmt: skip
    assert lines[-2].startswith("#rank at each load; ~ borrowed estimate")
    assert lines[-1].endswith("a prediction is a hypothesis: measure it (--emit-sweep)")


def test_nothing_fits_prints_the_near_misses() -> None:
    advice = _advice("RTX 4090", "llama-3.1-70b", concurrency=[1, 64], quant="bf16")
    misses = near_miss_lines(advice)
    assert misses[0] == "near misses (the best rejected configuration per engine):"
    assert misses[1].startswith("  llamacpp tp=1 pp=1 gguf-bf16 (1 GPU): needs 131.7 GiB per GPU")
    lines = table_lines(advice)
    assert lines[1:2] == ["no candidate fits or runs"]
    assert lines[2 : 2 + len(misses)] == misses
    assert "near misses (the best rejected configuration per engine):" in explain_lines(advice)


def test_the_emitted_sweep_is_named_with_its_targets_left_out_and_notes() -> None:
    advice = _advice("H200", "llama-3.1-8b")
    config = sweep_for(advice, "llama-3.1-8b", ["/models/llama-3.1-8b"])
    lines = emitted_lines(Path("s.yaml"), config)
    assert lines[0] == f"sweep config: s.yaml ({len(config.targets)} targets)"
    assert [ln for ln in lines if ln.startswith("  left out ")] == [
        f"  left out {x}" for x in config.left_out
    ]
    assert lines[1 + len(config.left_out) :] == [f"  note: {x}" for x in config.notes]


def test_a_model_name_alone_or_nothing_that_fits_is_no_sweep() -> None:
    with pytest.raises(UsageError, match="names a model, not its files"):
        sweep_for(_advice("H200", "llama-3.1-8b"), "llama-3.1-8b", [])
    nothing = _advice("RTX 4090", "llama-3.1-70b", quant="bf16")
    with pytest.raises(UsageError, match="no candidate fits"):
        sweep_for(nothing, "llama-3.1-70b", ["/models/x"])


def test_engine_flags() -> None:
    assert parse_engines("LlamaCpp,vllm") == ["llamacpp", "vllm"]
    with pytest.raises(UsageError, match="--engines wants a comma list of"):
        parse_engines("nosuch")
    assert parse_versions(None) == {}
    assert parse_versions("TensorRT-LLM=1.2.1, vllm=0.26.0 ") == {
        "trtllm": "1.2.1",
        "vllm": "0.26.0",
    }
    for bad in ("foo=1", "vllm", "vllm="):
        with pytest.raises(UsageError, match="--engine-versions wants ENGINE=VERSION"):
            parse_versions(bad)
    assert set(ENGINES) >= {"llamacpp", "vllm"}
