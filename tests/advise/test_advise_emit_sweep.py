"""``crossover advise --emit-sweep`` writes configs ``crossover sweep --check`` accepts: a
model file per engine (asked for when ``--model`` is only a name), no knob an engine's
adapter refuses (``quant`` where the file decides it, ``tp`` on llama.cpp, ``parallel`` on
transformers serve)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from crossover.cli.app import main

HF = "/tmp/xo-gpu-host/hf"  # the GPU machine's paths: checked with --remote
GGUF = "/tmp/xo-gpu-host/model-f16.gguf"


def _advise(tmp_path: Path, *args: str) -> tuple[int, Path]:
    out = tmp_path / "emitted.yaml"
    return main(["advise", *args, "--emit-sweep", str(out)]), out


@pytest.mark.parametrize("model", ["llama-3.1-8b", "llama-3-70b", "qwen3-30b-a3b", "gemma3-270m"])
@pytest.mark.parametrize(("gpu", "gpus"), [("H200", "1"), ("H100", "4")], ids=["h200", "h100x4"])
@pytest.mark.parametrize("quant", [None, "fp8", "int4-awq", "gguf-q4_k_m"])
def test_every_emitted_config_passes_check(
    tmp_path: Path,
    model: str,
    gpu: str,
    gpus: str,
    quant: str | None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["--gpu", gpu, "--gpus", gpus, "--model", model, "--model-path", HF]
    args += ["--model-path", GGUF] + (["--quant", quant] if quant else [])
    rc, out = _advise(tmp_path, *args)
    err = capsys.readouterr().err
    if rc == 2 and "no candidate fits" in err:
        pytest.skip(f"no candidate: {err.strip()}")
    assert rc == 0, err
    config = yaml.safe_load(out.read_text())
    assert config["targets"]
    for t in config["targets"]:
        assert t["launch"]["model"] == (GGUF if t["engine"] == "llamacpp" else HF)
    assert main(["sweep", "--config", str(out), "--check", "--remote"]) == 0, (
        capsys.readouterr().out
    )


def test_a_model_name_alone_asks_for_the_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Today's file said `model: llama-3.1-8b`, which no engine can load."""
    rc, out = _advise(tmp_path, "--gpu", "H200", "--model", "llama-3.1-8b")
    assert rc == 2
    err = capsys.readouterr().err
    assert "'llama-3.1-8b' names a model, not its files; give --model-path FILE.gguf" in err
    assert not out.exists()


def test_only_a_gguf_measures_llamacpp_and_says_what_was_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out = _advise(tmp_path, "--gpu", "H200", "--model", "llama-3.1-8b", "--model-path", GGUF)
    assert rc == 0
    text = capsys.readouterr().out
    config = yaml.safe_load(out.read_text())
    assert {t["engine"] for t in config["targets"]} == {"llamacpp"}
    assert "left out vllm-tp1-bf16: give --model-path with an HF folder or hub id" in text
    launch = config["targets"][0]["launch"]
    assert "quant" not in launch and "tp" not in launch  # llama-server refuses both
    # its host prompt cache off (rule llamacpp-host-prompt-cache), said in the advice
    assert launch["prompt_cache_mib"] == 0
    assert "--cache-ram 0" in text
    assert out.read_text().startswith("# Measures the top candidates of crossover advise.")


def test_the_real_gemma_gguf_passes_check_on_this_machine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Given a GGUF that is here and a built llama-server, the file checks locally too."""
    from crossover.builds.llamacpp import find_llama_server
    from crossover.models.gemma import gemma_path

    gguf = gemma_path()
    if not gguf.is_file() or find_llama_server() is None:
        pytest.skip("no cached Gemma GGUF or llama-server (make test fetches and builds them)")
    rc, out = _advise(tmp_path, "--gpu", "H200", "--model", str(gguf))
    assert rc == 0
    assert main(["sweep", "--config", str(out), "--check"]) == 0, capsys.readouterr()


def test_a_shared_prefix_is_the_emitted_sweep_s_workload(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The advice assumed 2,048 of 2,112 prompt tokens shared: the sweep that proves it
    sends one 2,048-token prefix before each prompt's own 64 tokens."""
    rc, out = _advise(tmp_path, "--gpu", "H200", "--model", "llama-3.1-8b", "--model-path", HF,
                      "--model-path", GGUF, "--input-tokens", "2112",
                      "--shared-prefix-tokens", "2048")  # fmt: skip
    assert rc == 0, capsys.readouterr().err
    config = yaml.safe_load(out.read_text())
    assert (config["input_tokens"], config["shared_prefix"]) == (64, "1x2048")
    assert main(["sweep", "--config", str(out), "--check", "--remote"]) == 0, (
        capsys.readouterr().out
    )
    rc, plain = _advise(tmp_path, "--gpu", "H200", "--model", "llama-3.1-8b", "--model-path", HF)
    assert rc == 0 and "shared_prefix" not in yaml.safe_load(plain.read_text())


def test_a_checkpoint_note_takes_the_right_article(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It read "must be a int4-awq checkpoint"."""
    args = ["--gpu", "H200", "--model", "llama-3.1-8b", "--concurrency", "1,8,64"]
    rc, out = _advise(tmp_path, *args, "--model-path", HF)
    assert rc == 0
    said = capsys.readouterr()
    text = " ".join((said.out + said.err).split())
    assert f"{HF} must be an int4-awq checkpoint" in text
    assert "must be a int4" not in text + out.read_text()
