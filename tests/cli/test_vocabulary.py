"""One vocabulary across commands: a model name one command prints is one the others
take, one SLO syntax, errors naming the flag that was typed, rate levels named as rates."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from crossover.cli.app import main
from crossover.cli.names import same_model


def test_names_of_one_model_are_one_model() -> None:
    assert same_model("gemma-3-270m", ("gemma3-270m",)) == "gemma3-270m"
    assert same_model("google/gemma-3-270m", ("gemma3-270m",)) == "gemma3-270m"
    assert same_model("llama-3.1-8b", ("llama-3-8b", "llama-3-70b")) == "llama-3-8b"
    assert same_model("mistral-7b", ("llama-3-8b",)) is None


def test_every_name_models_list_prints_is_one_advise_takes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["models", "list"]) == 0
    out = capsys.readouterr().out
    names = re.findall(r"^  (\S+) ", out, re.M)
    names += [n for also in re.findall(r"\(also: ([^)]*)\)", out) for n in also.split(", ")]
    assert {"llama-3-70b", "llama-3.1-70b", "gemma3-270m", "gemma-3-270m"} <= set(names)
    for name in names:
        if name.startswith("tiny-"):
            continue  # test shapes: advise reads their synthesized folder
        assert main(["advise", "--gpu", "H200", "--model", name]) == 0, name
        capsys.readouterr()


def test_synth_takes_advises_name_for_the_same_shape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "m"
    rc = main(["models", "synth", "--arch", "llama-3.1-8b", "--config-only", "--out", str(out),
               "--quiet"])  # fmt: skip
    assert rc == 0, capsys.readouterr().err
    assert "llama-3.1-8b: the llama-3-8b shape" in capsys.readouterr().err
    config = json.loads((out / "hf" / "config.json").read_text())
    assert config["hidden_size"] == 4096 and config["num_hidden_layers"] == 32


def test_fetch_takes_the_name_advise_prints(capsys: pytest.CaptureFixture[str]) -> None:
    from crossover.models.gemma import find_gemma3_270m

    if find_gemma3_270m() is None:
        pytest.skip("Gemma not fetched here (make test fetches it)")
    assert main(["models", "fetch", "gemma-3-270m", "--quiet"]) == 0
    assert capsys.readouterr().out.strip().endswith(".gguf")


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--rate", "0"], "--rate:"),
        (["--concurrency", "1", "--timeout-s", "0"], "--timeout-s:"),
        (["--concurrency", "1", "--first-token-timeout-s", "0"], "--first-token-timeout-s:"),
        (["--concurrency", "1", "--warmup", "-1"], "--warmup:"),
    ],
)
def test_run_errors_name_the_flag_typed(
    args: list[str], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["run", "--url", "http://127.0.0.1:9", "--model", "m", "--output-tokens", "4"]
    assert main([*base, *args]) == 2
    err = capsys.readouterr().err
    assert flag in err and "rate-rps" not in err and "total-s" not in err


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--rates", "0"], "--rates:"),
        (["--concurrency", "1", "--warmup", "-1"], "--warmup:"),
        (["--concurrency", "1", "--repeats", "0"], "--repeats:"),
    ],
)
def test_sweep_errors_name_the_flag_typed(
    args: list[str], flag: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["sweep", "--out", str(tmp_path / "o"), "--target", "a=http://127.0.0.1:9"]
    assert main([*base, "--model", "m", "--output-tokens", "4", *args]) == 2
    err = capsys.readouterr().err
    assert flag in err, err
    assert "warmup_requests" not in err and "sweep: " not in err


def test_capacity_errors_name_the_flag_typed(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["capacity", "--url", "http://127.0.0.1:9", "--model", "m", "--output-tokens", "4"]
    assert main([*args, "--slo", "ttft_ms.p99=500", "--start-rate", "0"]) == 2
    err = capsys.readouterr().err
    assert "--start-rate:" in err and "start-rps" not in err
