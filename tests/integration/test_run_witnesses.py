"""Counts a second witness contradicts: each planted lie gets its own problem and is
never ``valid``, on completions and on chat."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest

from crossover.calibration.server import serve
from crossover.calibration.tokenizer import WordTokenizer
from crossover.measure import RunOutcome, execute, resummarize
from crossover.records.store import Store
from crossover.spec.run import RunConfig
from tests.integration.conftest import calib, codes, problems, run_against

N = 16  # output tokens per request (run_against's default)
REQUESTS = 16
ENDPOINTS = ("completions", "chat")


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_usage_claiming_the_length_over_half_a_stream_is_invalid(
    tmp_path: Path, endpoint: str
) -> None:
    """The issue's first example: usage says N, the stream carried N/2 in N/2 chunks."""
    out, store = run_against(calib("usage_inflated"), tmp_path, endpoint=endpoint)
    s = out.summary
    assert s.verdict == "invalid"
    assert codes(out)["text_tokens_mismatch"] == "error"
    assert codes(out)["engine_tokens_mismatch"] == "error"
    assert "multi_token_chunks" not in codes(out)  # not an explanation: the text disagrees
    assert s.requests.matched == 0
    w = s.witnesses
    assert w.output_tokens.usage == REQUESTS * N
    assert w.output_tokens.stream_chunks == REQUESTS * N // 2
    assert w.output_tokens.stream_text == REQUESTS * N // 2
    assert w.output_tokens.stream_text_requests == REQUESTS
    assert w.engine is not None
    assert w.engine.counter == "calibration:generation_tokens_total"
    probe = 1 if endpoint == "chat" else 0  # the prompt probe: one token, counted by both
    assert (w.engine.generated, w.engine.claimed) == (
        REQUESTS * N // 2 + probe,
        REQUESTS * N + probe,
    )
    # the witness is stored with the records: recomputing gives the same verdict
    again = resummarize(store, out.run_id)
    assert again.verdict == "invalid"
    assert {p.code for p in again.problems} == {p.code for p in s.problems}
    assert {r.stream_tokens for r in store.records(out.run_id, include_warmup=False)} == {N // 2}


@pytest.mark.parametrize(
    ("text", "engine_metrics", "code"),
    [(True, False, "text_tokens_mismatch"), (False, True, "engine_tokens_mismatch")],
)
def test_either_witness_alone_catches_the_inflated_usage(
    tmp_path: Path, text: bool, engine_metrics: bool, code: str
) -> None:
    out, _ = run_against(
        calib("usage_inflated"), tmp_path, text=text, engine_metrics=engine_metrics
    )
    assert out.summary.verdict == "invalid"
    assert codes(out)[code] == "error"


def test_inflated_usage_with_no_second_witness_is_not_valid(tmp_path: Path) -> None:
    """Without text or counter, usage > chunks is unconfirmed: unverified, not valid."""
    out, _ = run_against(calib("usage_inflated"), tmp_path, text=False, engine_metrics=False)
    assert out.summary.verdict == "unverified"
    assert codes(out) == {"multi_token_chunks": "warning"}


def test_a_fraction_of_inflated_requests_is_counted(tmp_path: Path) -> None:
    out, _ = run_against(calib("usage_inflated:0.25"), tmp_path, engine_metrics=False)
    (p,) = [p for p in out.summary.problems if p.code == "text_tokens_mismatch"]
    assert p.count == 4
    assert "usage 16, text 8 tokens as a whole, 8 chunk by chunk, in 8 chunks" in p.message
    assert out.summary.requests.matched == 12


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_fewer_prompt_tokens_than_the_prompt_had_is_invalid(tmp_path: Path, endpoint: str) -> None:
    """The issue's second example: the server reports half the prompt it was sent."""
    out, _ = run_against(calib("prompt_tokens_short"), tmp_path, endpoint=endpoint)
    s = out.summary
    assert s.verdict == "invalid"
    assert codes(out)["prompt_tokens_mismatch"] == "error"
    (p,) = [p for p in s.problems if p.code == "prompt_tokens_mismatch"]
    assert "fewer prompt tokens than their prompts have" in p.message
    assert s.witnesses.prompt_tokens.prompts == REQUESTS * 20
    # completions: 20 -> 10; chat: 20 + a 10-token template = 30 -> 15
    assert s.witnesses.prompt_tokens.usage == REQUESTS * (10 if endpoint == "completions" else 15)


def test_honest_server_witnesses_all_agree(tmp_path: Path) -> None:
    out, _ = run_against(calib(), tmp_path)
    s = out.summary
    assert s.verdict == "valid" and problems(out) == []
    w = s.witnesses
    assert w.output_tokens.usage == w.output_tokens.stream_chunks == REQUESTS * N
    # every witness asked every time: the text too, where the chunks already agree
    assert w.output_tokens.stream_text == REQUESTS * N
    assert w.output_tokens.stream_text_requests == REQUESTS
    checks = {(c.count, c.witness): (c.asked, c.agreed, c.disagreed) for c in w.checks}
    assert checks == {
        ("output_tokens", "stream_chunks"): (REQUESTS, REQUESTS, 0),
        ("output_tokens", "stream_text"): (REQUESTS, REQUESTS, 0),
        ("output_tokens", "engine_counter"): (1, 1, 0),
        ("prompt_tokens", "prompts"): (REQUESTS, REQUESTS, 0),
        ("total_tokens", "prompt_plus_completion"): (REQUESTS, REQUESTS, 0),
    }
    assert w.prompt_tokens.usage == w.prompt_tokens.prompts == REQUESTS * 20
    assert w.engine is not None and w.engine.generated == w.engine.claimed == REQUESTS * N


def test_another_client_on_the_server_leaves_the_run_unverified(tmp_path: Path) -> None:
    """The engine counted work the run did not ask for: the figures are not ours alone."""

    async def go() -> RunOutcome:
        async with serve(calib(itl_ms=2.0)) as url:
            stop = asyncio.Event()

            async def intruder() -> None:
                body = {"model": "calibration", "prompt": "a b c", "max_tokens": 32}
                async with aiohttp.ClientSession() as s:
                    while not stop.is_set():
                        async with s.post(url + "/v1/completions", json=body) as r:
                            await r.read()

            task = asyncio.ensure_future(intruder())
            try:
                cfg = RunConfig(
                    url=url,
                    model="calibration",
                    engine="vllm",
                    concurrency=2,
                    requests=8,
                    output_tokens=N,
                    input_tokens=20,
                    warmup_requests=0,
                )
                return await execute(
                    cfg,
                    Store(tmp_path / "r.db"),
                    tokenizer=WordTokenizer(),
                    metrics_url=url + "/metrics",
                )
            finally:
                stop.set()
                await task

    out = asyncio.run(go())
    assert out.summary.verdict == "unverified"
    assert codes(out) == {"engine_tokens_mismatch": "warning"}
    w = out.summary.witnesses.engine
    assert w is not None and w.generated > w.claimed == 8 * N
