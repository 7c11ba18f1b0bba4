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


def test_events_that_arrive_together_are_one_delivery() -> None:
    """A server that buffers 4 tokens at a time: 8 one-token events in two reads. ITL is
    each delivery's gap spread over its tokens (10 ms, the pace they were made at), not
    zero inside a delivery; TPOT counts the tokens after the first delivery."""
    a = [40 * MS] * 4 + [80 * MS] * 4
    r = rec(
        expected_output_tokens=8,
        t_first_ns=a[0],
        t_last_ns=a[-1],
        t_done_ns=a[-1] + 1,
        chunk_arrival_ns=a,
        chunk_chars=[1] * 8,
        completion_tokens=8,
        count_source="usage",
    )
    assert rq.deliveries(r) == [(40 * MS, 4), (80 * MS, 4)]
    assert rq.grouped_events(r) == 6
    assert rq.itl_ms(r) == [10.0] * 4
    assert rq.tpot_ms(r) == pytest.approx(40 / 4)  # (N - k) = 8 - 4, not N - 1
    assert rq.chunk_gaps_ms(r) == [0, 0, 0, 40, 0, 0, 0]  # the raw gaps stay visible


def test_events_within_a_tenth_of_a_millisecond_are_one_delivery() -> None:
    a = [0, 50_000, 10 * MS, 10 * MS + 90_000, 20 * MS]
    r = rec(chunk_arrival_ns=a, chunk_chars=[1] * 5, completion_tokens=5, count_source="usage")
    assert [k for _, k in rq.deliveries(r)] == [2, 2, 1]
    assert rq.itl_ms(r) == pytest.approx([(10 - 0.05 + 0.09) / 2] * 2 + [10 - 0.09])


def test_all_tokens_in_one_delivery_have_no_tpot() -> None:
    a = [5 * MS] * 3
    r = rec(
        t_first_ns=a[0], t_last_ns=a[-1], t_done_ns=a[-1] + 1, chunk_arrival_ns=a,
        chunk_chars=[1] * 3, completion_tokens=3, count_source="usage",
    )  # fmt: skip
    assert rq.tpot_ms(r) is None and rq.itl_ms(r) == []
