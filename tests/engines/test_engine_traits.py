"""What code asks an engine's spec instead of its name: the install kind (``crossover
engines install|which|list``, a launch without an executable), the request dialect's
offers (server /tokenize, model listings) and the Triton-hosted model."""

from __future__ import annotations

from pathlib import Path

import pytest

from crossover.cli.app import main
from crossover.engines import registry
from crossover.engines.install import cached_program


@pytest.fixture
def empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CROSSOVER_CACHE", str(tmp_path))
    monkeypatch.delenv("CROSSOVER_LLAMA_SERVER", raising=False)
    return tmp_path


def test_the_installable_engines_are_those_with_the_trait() -> None:
    assert registry.with_trait("install") == ("llamacpp", "triton")
    kinds = {n: registry.get(n).install for n in registry.with_trait("install")}
    assert {n: (k.kind, k.done, k.does) for n, k in kinds.items() if k} == {
        "llamacpp": ("source", "built", "builds"),
        "triton": ("wheel", "installed", "installs"),
    }


def test_which_says_how_to_get_what_is_missing(
    empty_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cached_program(registry.get("llamacpp")) is None
    assert main(["engines", "which", "llamacpp"]) == 2
    assert main(["engines", "which", "triton"]) == 2
    assert main(["engines", "which", "vllm"]) == 2
    err = capsys.readouterr().err
    assert "llama-server is not built yet: run `crossover engines install llamacpp`" in err
    assert "tritonserver is not installed yet: run `crossover engines install triton`" in err
    said = " ".join(err.split())
    assert "crossover does not build or install vLLM" in said
    assert "buildable: llamacpp, triton" in said


def test_which_finds_the_program_the_trait_names(
    empty_cache: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    program = empty_cache / "llama-server"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    monkeypatch.setenv("CROSSOVER_LLAMA_SERVER", str(program))
    assert cached_program(registry.get("llamacpp")) == program
    assert cached_program(registry.get("vllm")) is None  # not installed by crossover
    assert main(["engines", "which", "llamacpp"]) == 0
    assert capsys.readouterr().out.strip() == str(program)


def test_the_dialects_offers_are_as_the_servers_answer() -> None:
    tokenize = {n for n, d in registry.DIALECTS.items() if d.server_tokenize}
    assert tokenize == {"llamacpp", "vllm", "openai"}
    lists = {n: d.model_lists for n, d in registry.DIALECTS.items()}
    assert lists["llamacpp"] == ("models", "props")
    assert lists["transformers"] == ("models", "health")
    assert lists["triton"] == ("repository",)
    assert lists["vllm"] == lists["sglang"] == lists["trtllm"] == lists["openai"] == ("models",)
    assert "chat" not in registry.dialect("triton").endpoints


def test_the_triton_hosted_engines_and_their_models() -> None:
    from crossover.plan.triton_hosted import hosted_choices
    from crossover.plan.triton_python import model_source

    assert hosted_choices() == ("tensorrtllm", "llamacpp", "vllm")
    for name in registry.with_trait("triton_hosted"):
        hosted = registry.get(name).triton_hosted
        assert hosted is not None
        assert "class TritonPythonModel" in model_source(hosted.model_file)
    with pytest.raises(ValueError, match="no Triton Python-backend model"):
        model_source("common.py")


def test_sweep_check_says_how_to_build_a_missing_llama_server(
    empty_cache: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    gguf = empty_cache / "m.gguf"
    gguf.write_bytes(b"GGUF")
    config = empty_cache / "sweep.yaml"
    config.write_text(
        "concurrency: [1]\noutput_tokens: 8\ninput_tokens: 16\ntargets:\n"
        f"  - name: t\n    launch: {{engine: llamacpp, model: {gguf}}}\n"
    )
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert main(["sweep", "--config", str(config), "--check"]) != 0
    out = capsys.readouterr()
    said = out.out + out.err
    assert "no llama-server here: `crossover engines install llamacpp` builds one" in said


def test_an_engine_name_reads_as_the_dialect_it_speaks() -> None:
    """A URL target may name the engine behind it (``--engine lmdeploy``): its requests
    are in the dialect its spec speaks, and the run records that dialect; a name that is
    neither an engine nor a dialect is refused naming both kinds."""
    import pytest
    from pydantic import ValidationError

    from crossover.engines import registry
    from crossover.spec.run import RunConfig
    from crossover.spec.target import TargetConfig

    spoken = registry.ENGINES["lmdeploy"].dialect.name
    assert spoken != "lmdeploy" and spoken in registry.DIALECTS
    assert registry.dialect("lmdeploy") is registry.DIALECTS[spoken]
    config = RunConfig(
        url="http://127.0.0.1:8000", dialect="lmdeploy", model="m", output_tokens=8, concurrency=1
    )
    assert config.dialect == spoken
    TargetConfig(name="a", url="http://127.0.0.1:8000", engine="lmdeploy")
    with pytest.raises(ValidationError, match="lmdeploy"):
        RunConfig(
            url="http://127.0.0.1:8000",
            dialect="lmdeployx",
            model="m",
            output_tokens=8,
            concurrency=1,
        )
