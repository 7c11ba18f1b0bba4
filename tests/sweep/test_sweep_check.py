"""``crossover sweep --check``: the whole config checked, nothing measured or written; and a
sweep that is run finds every such problem before its first level, not at the target's
turn (docs/interfaces.md: a config is checked whole before any folder or database exists)."""

from __future__ import annotations

import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from crossover.cli.app import main
from tests.ggufs import stand_in_gguf

HEAD = "concurrency: [1, 2]\noutput_tokens: 8\ninput_tokens: 16\n"


@pytest.fixture
def program(tmp_path: Path) -> Path:
    """An executable that stands for an engine (never started by a check)."""
    path = tmp_path / "fake-llama-server"
    path.write_text("#!/bin/sh\nexit 1\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def model(tmp_path: Path) -> Path:
    """A GGUF file whose header reads (no tensors: the check opens the header only)."""
    return stand_in_gguf(tmp_path / "m.gguf")


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(text)
    return path


def _launch(name: str, program: Path, model: Path | str, extra: str = "") -> str:
    return (
        f"  - name: {name}\n    engine: llamacpp\n"
        f"    launch: {{model: {model}, executable: [{program}], parallel: 2{extra}}}\n"
    )


def test_check_passes_a_sound_config_and_writes_nothing(
    tmp_path: Path, program: Path, model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, HEAD + "targets:\n" + _launch("a", program, model))
    assert main(["sweep", "--config", str(path), "--check"]) == 0
    out = capsys.readouterr().out
    assert f"ok    a: {program} -m {model}" in out  # what it would run
    assert "OK, 1 target(s) checked; nothing measured" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [program.name, model.name, path.name]
    )


def test_check_lists_every_problem_of_every_target(
    tmp_path: Path,
    program: Path,
    model: Path,
    busy_port: int,
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = HEAD + "tokenizer: /nonexistent/tokenizer.json\n" + "targets:\n"
    text += _launch("ok", program, model)
    text += _launch("knob", program, model, ", quant: fp8")  # llama-server takes no quant
    text += _launch("nomodel", program, tmp_path / "missing.gguf")
    text += _launch("noexe", tmp_path / "no-such-program", model)
    text += _launch("port", program, model, f", port: {busy_port}")
    text += _launch("small", program, model, ", context_tokens: 20")  # 16 + 8 > 20
    text += "roofline:\n  - {target: knobb, model_bytes: 1, bandwidth_gb_s: 1}\n"
    path = _write(tmp_path, text)
    assert main(["sweep", "--config", str(path), "--check"]) == 2
    captured = capsys.readouterr()
    out = captured.out
    assert "ok    ok:" in out
    assert "llama-server does not take quant=fp8" in out
    assert "model path not found" in out and "missing.gguf" in out
    assert "executable" in out and "no-such-program" in out and "not found" in out
    assert f"port {busy_port} on 127.0.0.1 is not free" in out
    assert "needs 24 tokens of context (16 prompt + 8 output)" in out
    assert "roofline: target 'knobb' is not a target; did you mean 'knob'?" in out
    assert "tokenizer: --tokenizer /nonexistent/tokenizer.json: no such file" in out
    assert "7 problem(s) listed above; nothing measured" in captured.err
    assert "Traceback" not in captured.err


def test_a_warm_up_asking_for_more_tokens_needs_their_context_too(
    tmp_path: Path, program: Path, model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """16 prompt + 8 output fit a context of 24; a warm-up of 12 output tokens does not."""
    launch = _launch("a", program, model, ", context_tokens: 24")
    path = _write(tmp_path, HEAD + "warmup_output_tokens: 12\ntargets:\n" + launch)
    assert main(["sweep", "--config", str(path), "--check"]) == 2
    assert "needs 28 tokens of context (16 prompt + 12 output)" in capsys.readouterr().out


def test_remote_checks_all_but_this_machines_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A config for the GPU machine: its paths are not here; --remote checks the rest."""
    text = HEAD + "tokenizer: /tmp/xo-not-here/hf\ntargets:\n"
    text += "  - {name: v, engine: vllm, launch: {model: /tmp/xo-not-here/hf, tp: 2}}\n"
    text += "  - {name: l, engine: llamacpp, launch: {model: /tmp/xo-not-here/m.gguf}}\n"
    path = _write(tmp_path, text)
    assert main(["sweep", "--config", str(path), "--check"]) == 2
    assert main(["sweep", "--config", str(path), "--check", "--remote"]) == 0
    out = capsys.readouterr().out
    assert "not looked up on this machine (--remote)" in out
    # a knob the engine does not take is found without the machine
    bad = _write(tmp_path, text.replace("tp: 2", "tp: 2, gpu_layers: 10"))
    assert main(["sweep", "--config", str(bad), "--check", "--remote"]) == 2
    assert "vLLM does not take gpu_layers=10: llama.cpp only" in capsys.readouterr().out


def test_remote_refuses_a_model_name_where_the_engine_reads_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(
        tmp_path, HEAD + "targets:\n  - {name: l, engine: llamacpp, launch: {model: llama-3-8b}}\n"
    )
    assert main(["sweep", "--config", str(path), "--check", "--remote"]) == 2
    assert "model 'llama-3-8b' is a name, not a path: llama-server reads one GGUF file" in (
        capsys.readouterr().out
    )


def test_a_sweep_finds_a_late_targets_mistake_before_measuring(
    tmp_path: Path, program: Path, model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Today's mistake: the second target's bad launch block surfaced only at its turn,
    after the first target was measured, leaving a sweep.db behind."""
    text = HEAD + "targets:\n  - {name: a, url: 'http://127.0.0.1:9', model: m}\n"
    text += _launch("b", program, model, ", quant: q4")
    out = tmp_path / "out"
    assert main(["sweep", "--config", str(_write(tmp_path, text)), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "2 problems" in err and "llama-server does not take quant=q4" in err
    assert "cannot reach http://127.0.0.1:9" in err
    assert not out.exists()  # no folder, no sweep.db


def test_one_problem_is_one_line(
    tmp_path: Path, program: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = HEAD + "targets:\n" + _launch("a", program, tmp_path / "gone.gguf")
    out = tmp_path / "out"
    assert main(["sweep", "--config", str(_write(tmp_path, text)), "--out", str(out)]) == 2
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "target a: model path not found" in lines[0]
    assert not out.exists()


def test_check_needs_no_out_and_remote_needs_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, HEAD + "targets:\n  - {name: a, url: 'http://127.0.0.1:9', model: m}\n")
    assert main(["sweep", "--config", str(path)]) == 2
    assert "--out DIR is required (or --check" in capsys.readouterr().err
    assert main(["sweep", "--config", str(path), "--remote", "--out", str(tmp_path / "o")]) == 2
    assert "--remote goes with --check" in capsys.readouterr().err


def test_check_opens_the_gguf_header(
    tmp_path: Path, program: Path, model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file named .gguf that is not one is refused at --check, not at launch."""
    fake = tmp_path / "fake.gguf"
    fake.write_bytes(b"<html>not a model</html>")
    text = HEAD + "targets:\n" + _launch("a", program, fake) + _launch("b", program, model)
    path = _write(tmp_path, text)
    assert main(["sweep", "--config", str(path), "--check"]) == 2
    out = capsys.readouterr().out
    assert f"model {fake}: not a GGUF file (its header does not read: GGUF magic invalid)" in out
    assert "ok    b:" in out  # the real header passes


def test_every_schema_problem_is_listed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two bad engine names (a launched one and a URL's dialect) and a bad key: all three
    in the one line, not only the first."""
    text = HEAD + (
        "targets:\n  - name: a\n    launch: {engine: vlm, model: m}\n"
        "  - name: b\n    url: http://127.0.0.1:9\n    engine: sglng\n"
        "  - name: c\n    launch: {engine: llamacpp, model: m.gguf, tpp: 2}\n"
    )
    assert main(["sweep", "--config", str(_write(tmp_path, text)), "--check"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "targets.0.launch.engine: unknown engine 'vlm'; did you mean 'vllm'?" in err
    assert "targets.1: unknown engine 'sglng'; did you mean 'sglang'?" in err
    assert "targets.2.launch.tpp: unknown key; did you mean 'tp'?" in err


def test_an_sglang_parallel_above_its_own_decode_graphs_is_noted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The committed H100 YAML: `sglang-512` (parallel 512, no cuda_graphs) decodes its
    batches above 256 without graphs, which it measured; `sglang-512-graphs` asks for
    graphs up to 512 and gets no note."""
    path = Path("scripts/h200/sglang-slots-open-h100.yaml")
    assert main(["sweep", "--config", str(path), "--check", "--remote"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    noted = [i for i, ln in enumerate(lines) if "captures CUDA graphs" in ln]
    assert len(noted) == 1, out
    assert lines[noted[0] - 1].startswith("ok    sglang-512: "), out
    assert "note: parallel 512 is above" in lines[noted[0]]
    assert "cuda_graphs: true captures them up to parallel" in lines[noted[0]]


@pytest.mark.parametrize(
    ("launch", "noted"),
    [
        ("parallel: 257", True),
        ("parallel: 256", False),
        ("parallel: 512, cuda_graphs: false", False),
        ("parallel: 512, tp: 4", False),
        ("parallel: 512, extra_args: [--cuda-graph-max-bs, '512']", False),
        ("parallel: 512, extra_args: ['--cuda-graph-max-bs-decode=384']", False),
        ("parallel: 512, extra_args: [--disable-cuda-graph]", False),
        # TP and PP as the launch runs them: extra_args given last win over tp:/pp:
        ("parallel: 512, extra_args: [--tp, '4']", False),
        ("parallel: 512, extra_args: ['--tp-size=2', '--pp-size=2']", False),
        ("parallel: 512, tp: 4, extra_args: [--tp-size, '2']", True),
        ("parallel: 512, extra_args: [--tp-size, auto]", False),  # not read: no note
        # SGLang's own list of batch sizes to capture sets the largest
        ("parallel: 512, extra_args: [--cuda-graph-bs, '1', '512']", False),
        ("parallel: 512, extra_args: ['--cuda-graph-bs=512']", False),
    ],
)
def test_the_sglang_graph_note_only_where_nothing_asks_for_graphs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], launch: str, noted: bool
) -> None:
    text = HEAD + (
        "targets:\n  - name: s\n    engine: sglang\n"
        f"    launch: {{model: /models/qwen, {launch}}}\n"
    )
    assert main(["sweep", "--config", str(_write(tmp_path, text)), "--check", "--remote"]) == 0
    assert ("captures CUDA graphs" in capsys.readouterr().out) is noted


@pytest.mark.parametrize(
    ("levels", "launch", "noted"),
    [
        ("concurrency: [1, 4, 8]", "parallel: 4", "concurrency 8 above the 4 requests"),
        ("concurrency: [1, 4, 8, 16]", "parallel: 4", "concurrency 8, 16 above the 4"),
        ("concurrency: [1, 8]", "parallel: 4, replicas: 2", None),
        ("concurrency: [1, 16]", "parallel: 4, replicas: 2", "(parallel 4 x 2 engines)"),
        ("concurrency: [1, 8]", "parallel: 4, extra_args: [--data-parallel-size, '2']", None),
        ("concurrency: [1, 16]", "parallel: 4, replicas: 2, extra_args: ['-dp', '2']", None),
        (
            "concurrency: [1, 32]",
            "parallel: 4, replicas: 2, extra_args: ['-dp', '2']",
            "concurrency 32 above the 16 requests it runs at once (parallel 4 x 4 engines)",
        ),
        ("concurrency: [1, 4]", "parallel: 4", None),
        ("concurrency: [1, 64]", "cuda_graphs: true", None),  # no parallel: the engine's own
        ("rates: [1, 64]\nduration_s_per_level: 5", "parallel: 4", None),  # arrivals, not slots
    ],
)
def test_levels_above_a_targets_slots_are_noted(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    levels: str,
    launch: str,
    noted: str | None,
) -> None:
    """A closed loop above the requests a target runs at once measures its queue: said
    before anything runs, once per target, with the levels it concerns."""
    text = (
        f"{levels}\noutput_tokens: 8\ninput_tokens: 16\ntargets:\n  - name: v\n"
        f"    engine: vllm\n    launch: {{model: /models/m, {launch}}}\n"
    )
    assert main(["sweep", "--config", str(_write(tmp_path, text)), "--check", "--remote"]) == 0
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if "wait in the engine's queue" in ln]
    if noted is None:
        assert lines == [], out
    else:
        assert len(lines) == 1 and noted in lines[0], out
        assert "TTFT there counts that wait" in lines[0]
