"""``crossover gpus --local`` lists every GPU NVML reads (the whole machine), marks those
crossover's own ``CUDA_VISIBLE_DEVICES`` hides, and ends with the GPUs crossover uses in
advise's words (``local GPUs: 2 of the machine's 8 GPUs, NVML indices 0, 1
(CUDA_VISIBLE_DEVICES=0,1)``); its ``--json`` rows gain where each GPU stands."""

from __future__ import annotations

import json

import pytest

from crossover.cli.app import main
from tests.advise.test_advise_hardware import fake_nvml

H100 = "NVIDIA H100 80GB HBM3"


@pytest.fixture(autouse=True)
def _four(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml([H100] * 4, 79.6, cc=(9, 0)))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)


def _lines(capsys: pytest.CaptureFixture[str], *args: str) -> list[str]:
    assert main(["gpus", "--local", *args]) == 0
    return capsys.readouterr().out.splitlines()


def test_the_hidden_gpus_are_marked_and_the_last_line_says_which(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,0")
    out = _lines(capsys)
    assert [line.split(":")[0] for line in out[:4]] == ["GPU 0", "GPU 1", "GPU 2", "GPU 3"]
    hidden = [line for line in out if line.endswith("[hidden by CUDA_VISIBLE_DEVICES=2,0]")]
    assert [line.split(":")[0] for line in hidden] == ["GPU 1", "GPU 3"]
    assert out[-1] == (
        "local GPUs: 2 of the machine's 4 GPUs, NVML indices 2, 0 (CUDA_VISIBLE_DEVICES=2,0)"
    )


def test_unset_every_gpu_and_none_left_say_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _lines(capsys)
    assert not any("hidden" in line for line in out)
    assert out[-1] == "local GPUs: the machine's 4 GPUs (CUDA_VISIBLE_DEVICES not set: every GPU)"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    out = _lines(capsys)
    assert sum("[hidden by CUDA_VISIBLE_DEVICES=-1]" in line for line in out) == 4
    assert out[-1] == (
        "local GPUs: none of the machine's 4 GPUs (CUDA_VISIBLE_DEVICES=-1 leaves none)"
    )


def test_json_rows_gain_where_each_gpu_stands(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert main(["gpus", "--local", "--json"]) == 0
    text = capsys.readouterr().out
    rows = []
    decoder = json.JSONDecoder()
    at = text.find("{")
    while at != -1:
        row, end = decoder.raw_decode(text, at)
        rows.append(row)
        at = text.find("{", end)
    assert [(r["nvml_index"], r["visible"]) for r in rows] == [
        (0, False),
        (1, True),
        (2, False),
        (3, False),
    ]
    assert {r["gpus_chosen"] for r in rows} == {"CUDA_VISIBLE_DEVICES=1"}
    assert all("memory_gib" in r for r in rows)  # the table row's own fields stay
