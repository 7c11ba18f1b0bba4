"""``crossover quality`` end to end against real llama-servers (the pinned build, the
real Gemma 3 270M; ``make test`` provides both)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from crossover.cli.app import main
from crossover.engines import engine_config, launch

pytestmark = pytest.mark.llamacpp


def _server_and_model() -> tuple[Path, Path]:
    from crossover.builds.llamacpp import find_llama_server
    from crossover.models.gemma import find_gemma3_270m

    server, model = find_llama_server(), find_gemma3_270m()
    if server is None or model is None:
        pytest.skip("no built llama-server or no Gemma model (make engines models)")
    return server, model


@contextmanager
def servers(tmp: Path, *extra: list[str]) -> Iterator[list[str]]:
    """One llama-server per argument list, one slot each: llama.cpp's numerics depend on
    the batch, so two slots decoding together may flip a near-tie (seen: 1 token in 288)."""
    server, model = _server_and_model()
    with ExitStack() as stack:
        urls = []
        for i, args in enumerate(extra):
            config = engine_config(
                engine="llamacpp", model=str(model), executable=[str(server)], parallel=1,
                context_tokens=1024, health_timeout_s=120.0, extra_args=args,
            )  # fmt: skip
            engine = stack.enter_context(launch(config, tmp / f"s{i}.log"))
            urls.append(f"http://127.0.0.1:{engine.port}")
        yield urls


def test_quality_same_model_agrees_and_a_quantized_kv_cache_does_not(tmp_path: Path) -> None:
    with servers(tmp_path, [], [], ["--cache-type-k", "q4_0"]) as (ref, same, kq4):
        out = tmp_path / "q.json"
        code = main(
            [
                "quality", "--reference", f"ref={ref},engine=llamacpp",
                "--candidate", f"same={same},engine=llamacpp",
                "--candidate", f"kv-q4_0={kq4},engine=llamacpp",
                "--limit", "6", "--max-tokens", "48", "--concurrency", "1",
                "--json", str(out),
            ],
        )  # fmt: skip
        assert code == 0
    data = json.loads(out.read_text())
    assert data["schema"] == "crossover.quality/1"
    assert data["reference_tokens"] == 6 * 48  # ignore_eos: every prompt to the length
    same_r, kq = data["candidates"]
    # the same weights and settings on another server: the same tokens; the KL left is the
    # harness floor (windows after the first reach the engine as prefill, the reference
    # decoded them one by one)
    assert same_r["scored_tokens"] == 6 * 48
    assert same_r["top1_agreement"] >= 0.99
    assert same_r["mean_kl"] < 0.01
    # a 4-bit K cache moves the distributions; re-anchoring still scores every position
    assert kq["scored_tokens"] == 6 * 48
    assert kq["mean_kl"] > 2 * same_r["mean_kl"]
    assert kq["interval"]["mean_kl"][0] <= kq["mean_kl"] <= kq["interval"]["mean_kl"][1]
    assert kq["reanchored"] is True
    assert kq["reanchors"] >= kq["prompts_diverged"]  # one restart per disagreement


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


def test_quality_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = ["quality", "--reference", "r=http://127.0.0.1:9"]
    assert main([*r, "--candidate", "bad"]) == 2
    assert "--candidate 'bad': expected NAME=URL" in _one_line(capsys)
    assert main([*r, "--candidate", "r=http://127.0.0.1:9"]) == 2
    assert "every name must be different" in _one_line(capsys)
    empty = tmp_path / "p.txt"
    empty.write_text("\n\n")
    assert main([*r, "--candidate", "c=http://127.0.0.1:9", "--prompts", str(empty)]) == 2
    assert "no prompts in it" in _one_line(capsys)
    assert main([*r, "--candidate", "c=http://127.0.0.1:9", "--json", "/nope/q.json"]) == 2
    assert "no such folder" in _one_line(capsys)


def test_quality_reference_down_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["quality", "--reference", "r=http://127.0.0.1:9,engine=llamacpp",
            "--candidate", "c=http://127.0.0.1:9", "--limit", "1"]  # fmt: skip
    assert main(argv) == 1
    assert "reference r:" in _one_line(capsys)
