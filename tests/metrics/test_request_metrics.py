"""Per-request metrics against answers computed by hand."""

from __future__ import annotations

import pytest

from crossover.metrics import requests as rq
from crossover.records.model import RequestRecord

MS = 1_000_000


def rec(**kw: object) -> RequestRecord:
    base: dict[str, object] = {"index": 0, "expected_output_tokens": 4, "t_send_ns": 0}
    base.update(kw)
    return RequestRecord.model_validate(base)


def test_single_token_chunks() -> None:
    # sent at 0; tokens at 100, 110, 130, 160 ms; done at 161 ms
    r = rec(
        t_scheduled_ns=-5 * MS,
        t_first_ns=100 * MS,
        t_last_ns=160 * MS,
        t_done_ns=161 * MS,
        chunk_arrival_ns=[100 * MS, 110 * MS, 130 * MS, 160 * MS],
        chunk_chars=[3, 3, 3, 3],
        completion_tokens=4,
        count_source="usage",
        finish_reason="length",
    )
    assert rq.ttft_ms(r) == 100
    assert rq.queue_ms(r) == 5
    assert rq.e2e_ms(r) == 161
    assert rq.tpot_ms(r) == pytest.approx(60 / 3)
    assert rq.chunk_gaps_ms(r) == [10, 20, 30]
    assert rq.itl_ms(r) == [10, 20, 30]


def test_multi_token_chunks_divide_the_gap_per_token() -> None:
    # 6 tokens in 3 chunks: 1 + 2 + 3 tokens (text lengths say so)
    r = rec(
        expected_output_tokens=6,
        t_first_ns=50 * MS,
        t_last_ns=110 * MS,
        t_done_ns=111 * MS,
        chunk_arrival_ns=[50 * MS, 70 * MS, 110 * MS],
        chunk_chars=[4, 8, 12],
        completion_tokens=6,
        count_source="usage",
    )
    assert rq.tokens_per_chunk(r) == [1, 2, 3]
    assert rq.itl_ms(r) == [10, 10, 40 / 3, 40 / 3, 40 / 3]
    assert rq.chunk_gaps_ms(r) == [20, 40]
    assert rq.tpot_ms(r) == pytest.approx(60 / 5)


def test_server_stated_chunk_tokens_win() -> None:
    r = rec(
        chunk_arrival_ns=[0, 10 * MS], chunk_chars=[1, 1], chunk_tokens=[1, 3], completion_tokens=4
    )
    assert rq.tokens_per_chunk(r) == [1, 3]
    assert rq.itl_ms(r) == pytest.approx([10 / 3] * 3)


def test_chunks_are_never_taken_for_tokens() -> None:
    r = rec(t_first_ns=1, t_last_ns=3, chunk_arrival_ns=[1, 2, 3], chunk_chars=[1, 1, 1])
    assert rq.tokens_per_chunk(r) is None
    assert rq.itl_ms(r) == []
    assert rq.tpot_ms(r) is None


def test_missing_values_are_none_not_zero() -> None:
    r = rec(error_kind="http_error", status=500, t_done_ns=5)
    assert rq.ttft_ms(r) is None
    assert rq.tpot_ms(r) is None
    assert rq.e2e_ms(r) is None
    assert rq.queue_ms(r) is None
    assert rq.itl_ms(r) == []


def test_tpot_needs_two_tokens() -> None:
    r = rec(t_first_ns=1, t_last_ns=1, chunk_arrival_ns=[1], chunk_chars=[1], completion_tokens=1)
    assert rq.tpot_ms(r) is None
