"""``crossover advise`` and ``crossover plan`` through the CLI: outputs and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from crossover.cli.app import main

from . import sweepfile_builder as sb


def test_advise_writes_json_and_sweep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, sweep = tmp_path / "advice.json", tmp_path / "sweep.yaml"
    rc = main(
        [
            "advise",
            "--gpu",
            "H100",
            "--gpus",
            "4",
            "--interconnect",
            "nvlink",
            "--model",
            "llama-3.1-8b",
            "--quant",
            "fp8",
            "--engine-versions",
            "trtllm=1.2.1,vllm=0.26.0",
            "--input-tokens",
            "512",
            "--output-tokens",
            "256",
            "--concurrency",
            "1,8,64",
            "--json",
            str(out),
            "--emit-sweep",
            str(sweep),
            "--model-path",
            "/models/llama-3.1-8b-fp8",
        ]
    )
    assert rc == 0
    advice = json.loads(out.read_text())
    assert advice["schema"] == "crossover.advice/1"
    assert advice["recommendations"]
    config = yaml.safe_load(sweep.read_text())
    assert config["targets"]
    assert config["concurrency"] == [1, 8, 64]
    assert "trtllm" in capsys.readouterr().out


def test_advise_with_results_and_allreduce_table(tmp_path: Path) -> None:
    sweep = tmp_path / "run"
    sweep.mkdir()
    sb.write_sweep(
        sweep,
        sb.sweep_file(
            [sb.target("a", "vllm", {"tp": 2})],
            [sb.run("a", 8, output=900.0, total=2700.0, tpot_p50=8.0)],
        ),
    )
    table = tmp_path / "ar.json"
    table.write_text(
        json.dumps(
            [{"size_bytes": 1024, "latency_us": 9}, {"size_bytes": 1 << 24, "latency_us": 120}]
        )
    )
    out = tmp_path / "a.json"
    rc = main(
        [
            "advise",
            "--gpu",
            "H200",
            "--gpus",
            "2",
            "--model",
            "llama-3.1-8b",
            "--concurrency",
            "1,8,64",
            "--results",
            str(sweep),
            "--allreduce-table",
            str(table),
            "--json",
            str(out),
        ]
    )
    assert rc == 0
    advice = json.loads(out.read_text())
    assert advice["allreduce_curve"] == str(table)
    measured = [r for r in advice["recommendations"] if r["figures_from"] == "measured"]
    assert measured
    assert measured[0]["engine"] == "vllm"
    assert measured[0]["concurrency"] == 8
    assert advice["comparisons"][0]["error_pct"]["output_tok_s"] is not None


@pytest.mark.parametrize(
    "args",
    [
        ["--gpu", "H100", "--model", "no-such-model"],
        ["--gpu", "Voodoo", "--model", "llama-3.1-8b"],
        ["--gpu", "H100", "--model", "llama-3.1-8b", "--concurrency", "1,x"],
        ["--gpu", "H100", "--model", "llama-3.1-8b", "--concurrency", "0"],
        ["--gpu", "H100", "--model", "llama-3.1-8b", "--quant", "int3"],
        ["--gpu", "H100", "--model", "llama-3.1-8b", "--engine-versions", "tgi=1.0"],
        ["--gpu", "H100", "--model", "llama-3.1-8b", "--interconnect", "carrier-pigeon"],
        ["--gpu", "H100", "--model", "llama-3.1-8b", "--results", "/nonexistent"],
    ],
)
def test_advise_bad_input_exits_2(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["advise", *args]) == 2
    err = capsys.readouterr().err
    assert "error:" in err
    assert "Traceback" not in err


def test_plan_cli(tmp_path: Path) -> None:
    rc = main(
        [
            "plan",
            "--engine",
            "triton",
            "--model",
            "llama-3.1-8b",
            "--tp",
            "2",
            "--quant",
            "fp8",
            "--max-concurrency",
            "128",
            "--trtllm-version",
            "1.2.1",
            "--bls",
            "--out",
            str(tmp_path),
        ]
    )
    assert rc == 0
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["expect"] == {"cuda_graphs": True, "tp": 2, "quant": "fp8"}
    assert (tmp_path / "triton_model_repo" / "tensorrt_llm_bls" / "config.pbtxt").is_file()


def test_plan_bad_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "plan",
                "--engine",
                "vllm",
                "--model",
                "llama-3.1-8b",
                "--tp",
                "3",
                "--out",
                str(tmp_path),
            ]
        )
        == 2
    )
    assert "does not divide" in capsys.readouterr().err


def test_advise_terminal_says_which_tok_s_and_shows_rule_titles(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["advise", "--gpu", "H100", "--gpus", "2", "--model", "llama-3.1-8b"]
    assert main([*args, "--quant", "fp8", "--concurrency", "1,64", "--explain"]) == 0
    out = capsys.readouterr().out
    lines = [x for x in out.splitlines() if x.lstrip().startswith(("low c=", "high c="))]
    assert lines
    for line in lines:
        assert "output tok/s" in line and "decode tok/s/user" in line
        assert "total" not in line
        # rule titles, not ids, in the ranked lines
        assert "seed-" not in line and "[" in line
    assert "engine order by load" in out
    # every cited rule once with its source
    assert "rules (title: source):" in out
    assert "docs/engines.md, advisor rules" in out
    assert "tok/s total" not in out


@pytest.mark.parametrize("gpu", ["H100 PCIe", "RTX 3090"])
def test_one_gpu_names_no_interconnect(gpu: str, capsys: pytest.CaptureFixture[str]) -> None:
    """One GPU has no link to another: an H100 PCIe or an RTX 3090 alone read "(nvlink)"
    from their table rows' bridge; two name theirs."""
    assert main(["advise", "--gpu", gpu, "--model", "llama-3.1-8b"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("1x ") and "(nvlink)" not in first and "(pcie" not in first
    assert main(["advise", "--gpu", gpu, "--gpus", "2", "--model", "llama-3.1-8b"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("2x ") and "(pcie" in first


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--reserve-gib", "nan"], "--reserve-gib wants GiB per GPU"),
        (["--reserve-gib", "vllm=inf"], "--reserve-gib wants GiB per GPU"),
        (["--gpus", "100000"], "--gpus must be 1 to 128, got 100000"),
        (["--model-path", "/models/m"], "--model-path goes with --emit-sweep"),
    ],
)
def test_advise_refuses_before_the_table(
    args: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """nan GiB reserved was taken (no candidate fitted: "nan usable"), a huge --gpus ran
    for ever, and --model-path without --emit-sweep was refused after the whole table."""
    assert main(["advise", "--gpu", "H100", "--model", "llama-3.1-8b", *args]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and needle in err


def test_advise_calibration_that_is_not_text_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "cal.yaml"
    path.write_bytes(b"\xff\xfe\x00\xac binary")
    args = ["advise", "--gpu", "H100", "--model", "llama-3.1-8b", "--calibration", str(path)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err == f"error: {path}: not UTF-8 text (byte 0xff at line 1)\n"
