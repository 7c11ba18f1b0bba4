"""``python -m crossover.advise.forecast``: bad input is one line and exit 2, never a
traceback, and an output that cannot be written is refused before the forecast."""

from __future__ import annotations

from pathlib import Path

import pytest

from crossover.advise.forecast import main

BASE = ["--model", "llama-3.1-8b", "--gpu", "H100", "--input-tokens", "64"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--output-tokens", "0", "--target", "a=vllm:bf16"], "must be >= 1"),
        (["--output-tokens", "8", "--target", "a=bogus:bf16"], "unknown engine 'bogus'"),
        (
            ["--output-tokens", "8", "--target", "a=vllm:bf16", "--target", "a=sglang:bf16"],
            "--target 'a' given twice",
        ),
    ],
)
def test_bad_input_is_one_line(
    args: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*BASE, *args]) == 2
    cap = capsys.readouterr()
    assert cap.out == "" and cap.err.count("\n") == 1 and needle in cap.err


@pytest.mark.parametrize("flag", ["--json", "--roofline-yaml"])
def test_an_output_that_is_a_folder_is_refused_first(
    tmp_path: Path, flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """It was an IsADirectoryError traceback after the table was printed."""
    args = [*BASE, "--output-tokens", "8", "--target", "a=vllm:bf16", flag, str(tmp_path)]
    assert main(args) == 2
    cap = capsys.readouterr()
    assert (
        cap.out == ""
        and cap.err == f"error: {flag} {tmp_path}: that is a folder; give a file's path\n"
    )


def test_outputs_are_written(tmp_path: Path) -> None:
    out, roof = tmp_path / "f.json", tmp_path / "r.yaml"
    args = [*BASE, "--output-tokens", "8", "--target", "a=vllm:bf16"]
    assert main([*args, "--json", str(out), "--roofline-yaml", str(roof)]) == 0
    assert out.read_text().startswith("{") and roof.read_text().startswith("roofline:")


@pytest.mark.parametrize(
    ("module", "args"),
    [
        ("forecast", [*BASE, "--output-tokens", "abc", "--target", "a=vllm:bf16"]),
        ("calibrate", []),
        ("offload_checks", ["--bogus"]),
        ("reference", ["--bogus"]),
        ("heldout", ["--bogus"]),
    ],
)
def test_the_python_m_tools_say_a_usage_error_in_one_line(
    module: str, args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """argparse printed its usage block before the error: several lines."""
    import importlib

    tool = importlib.import_module(f"crossover.advise.{module}")
    with pytest.raises(SystemExit) as exc:
        tool.main(args)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ")
    assert err.endswith(f"(see python -m crossover.advise.{module} --help)\n")
