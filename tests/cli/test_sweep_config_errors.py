"""A sweep config mistake is one line naming the key and the closest valid one, exit 2,
and nothing is written: no output folder, no sweep.db."""

from __future__ import annotations

from pathlib import Path

import pytest

from crossover.cli.app import main
from tests.errlines import one_line_error

URL_TARGET = "targets:\n  - name: a\n    url: http://127.0.0.1:9\n    model: m\n"
HEAD = "concurrency: [1]\noutput_tokens: 4\n"


@pytest.mark.parametrize(
    ("content", "needles"),
    [
        (HEAD + URL_TARGET + "    engine: vlm\n", ["unknown engine 'vlm'", "did you mean 'vllm'"]),
        (
            HEAD + "targets:\n  - name: a\n    launch: {engine: llamcpp, model: /m.gguf}\n",
            ["targets.0.launch.engine", "did you mean 'llamacpp'"],
        ),
        (
            HEAD + "targets:\n  - name: a\n    launch: {engine: vllm, model: /m, paralel: 2}\n",
            ["targets.0.launch.paralel: unknown key", "did you mean 'parallel'"],
        ),
        (
            HEAD + "targets:\n  - name: a\n    engine: vllm\n    launch: {model: /m, tpp: 2}\n",
            ["targets.0.launch.tpp: unknown key"],
        ),
        (
            "concurency: [1]\noutput_tokens: 4\n" + URL_TARGET,
            ["concurency: unknown key", "did you mean 'concurrency'"],
        ),
        (HEAD + URL_TARGET + "    modle: x\n", ["targets.0.modle", "did you mean 'model'"]),
        (
            HEAD + URL_TARGET + "timeouts: {conect_s: 3}\n",
            ["timeouts.conect_s: unknown key", "did you mean 'connect_s'"],
        ),
        # a distribution's mistake is named by the key it was given under
        (
            "concurrency: [1]\noutput_tokens: uniform:9\n" + URL_TARGET,
            ["output_tokens: length 'uniform:9'"],
        ),
        (HEAD + "output_lengths: normal:5\n" + URL_TARGET, ["output_lengths: length 'normal:5'"]),
        (HEAD + "shared_prefix: 3y\n" + URL_TARGET, ["shared_prefix: shared prefix '3y'"]),
        # PyYAML kept the last of a key given twice, without a word: 5 tokens were run
        (
            HEAD + "output_tokens: 5\n" + URL_TARGET,
            ["not valid YAML at line 3: key 'output_tokens' given twice"],
        ),
        (HEAD + URL_TARGET + "    url: http://127.0.0.1:10\n", ["key 'url' given twice"]),
        # one message, not pydantic's per member of the union (workers.constrained-int: ...)
        (HEAD + "workers: -1\n" + URL_TARGET, ["workers: 1 to 256 load processes, or auto"]),
        (HEAD + "workers: yes\n" + URL_TARGET, ["workers: expected a number or auto, got True"]),
        # replica targets
        (
            HEAD + "targets:\n  - name: a\n    launch: {engine: vllm, model: /m, replicas: 0}\n",
            ["targets.0.launch.replicas", "greater than or equal to 1"],
        ),
        (
            HEAD + "targets:\n  - name: a\n    launch: {engine: vllm, model: /m, "
            "gpus_per_replica: 0}\n",
            ["targets.0.launch.gpus_per_replica", "greater than or equal to 1"],
        ),
        (
            HEAD + URL_TARGET + "    urls: [http://127.0.0.1:10]\n",
            ["target a: give one of url, urls or launch, not url and urls"],
        ),
        (
            HEAD + "targets:\n  - name: a\n    urls: [http://127.0.0.1:9]\n    model: m\n"
            "    launch: {engine: vllm, model: /m}\n",
            ["target a: give one of url, urls or launch, not urls and launch"],
        ),
        (
            HEAD + "targets:\n  - name: a\n    urls: [http://127.0.0.1:9/v1]\n    model: m\n",
            ["targets.0.urls", "crossover adds the API path itself"],
        ),
        (
            HEAD + "targets:\n  - name: a\n    launch: {engine: vllm, model: /m, replicas: 2, "
            "gpus_per_replica: 1, env: {CUDA_VISIBLE_DEVICES: '0,1'}}\n",
            ["targets.0.launch: gpus_per_replica and env CUDA_VISIBLE_DEVICES both choose"],
        ),
    ],
)
def test_sweep_yaml_mistakes(
    tmp_path: Path, content: str, needles: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(content)
    out = tmp_path / "out"
    assert main(["sweep", "--config", str(path), "--out", str(out)]) == 2
    line = one_line_error(capsys)
    for needle in needles:
        assert needle in line
    assert not out.exists()


def test_unknown_engine_flag_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    args = ["sweep", "--out", str(out), "--target", "a=http://127.0.0.1:9", "--engine", "vlm"]
    args += ["--model", "m", "--concurrency", "1", "--output-tokens", "4"]
    assert main(args) == 2
    assert "did you mean 'vllm'" in one_line_error(capsys)
    assert not out.exists()


def test_unknown_engine_in_target_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    args = ["sweep", "--out", str(out), "--target", "a=http://127.0.0.1:9,engine=sglng,model=m"]
    args += ["--concurrency", "1", "--output-tokens", "4"]
    assert main(args) == 2
    assert "did you mean 'sglang'" in one_line_error(capsys)
    assert not out.exists()


@pytest.mark.parametrize("workers", ["-1", "0", "300"])
def test_workers_flag_out_of_range_is_named_by_its_flag(
    tmp_path: Path, workers: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["sweep", "--target", "a=http://127.0.0.1:9", "--concurrency", "1"]
    args += ["--output-tokens", "4", "--workers", workers, "--out", str(tmp_path / "o")]
    assert main(args) == 2
    assert (
        one_line_error(capsys)
        == f"error: --workers: 1 to 256 load processes, or auto; got {workers}"
    )
    assert not (tmp_path / "o").exists()
