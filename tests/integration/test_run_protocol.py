"""Protocol deviations: each has its own code, none is ``valid``, and the figures of a
broken response stop where the protocol says it ended (completions and chat)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.conftest import calib, codes, run_against

#: every deviation on each transport: both must report the same
pytestmark = pytest.mark.usefixtures("each_transport")

N = 16
HALF = N // 2
ENDPOINTS = ("completions", "chat")


# fault -> (problem code, token-carrying chunks the record keeps, message fragment)
BROKEN = {
    "not_streamed": ("not_streamed", 0, "one a completion body"),
    "content_type": ("content_type", 0, "Content-Type text/plain; charset=utf-8"),
    "error_event": ("error_event", HALF, "calibration fault error_event"),
    "undecodable": ("undecodable", HALF, "not UTF-8"),
    "oversized_event": ("event_too_large", HALF, "over the 1048576-byte cap"),
    "malformed_json": ("malformed_event", HALF, "malformed event"),
}


@pytest.mark.parametrize("endpoint", ENDPOINTS)
@pytest.mark.parametrize("fault", sorted(BROKEN))
def test_broken_response_has_its_own_code_and_stops_at_the_break(
    tmp_path: Path, fault: str, endpoint: str
) -> None:
    code, kept, fragment = BROKEN[fault]
    out, store = run_against(calib(fault), tmp_path, endpoint=endpoint)
    s = out.summary
    assert s.verdict == "invalid"
    assert codes(out) == {code: "error"}  # its own name, nothing else
    (p,) = s.problems
    assert fragment in p.message
    assert s.requests.failed == s.requests.sent == 16
    records = store.records(out.run_id, include_warmup=False)
    assert len(records) == 16
    for r in records:
        assert r.error_kind is not None
        assert len(r.chunk_arrival_ns) == kept  # nothing after the break was taken
        assert r.t_done_ns is not None
        if kept:
            assert r.t_last_ns is not None and r.t_done_ns >= r.t_last_ns
        assert r.finish_reason is None and r.completion_tokens is None


def test_a_fraction_of_broken_responses_fails_only_those(tmp_path: Path) -> None:
    out, _ = run_against(calib("error_event:0.25"), tmp_path, endpoint="chat")
    s = out.summary
    assert s.verdict == "invalid"
    assert {c for c, sev in codes(out).items() if sev == "error"} == {"error_event"}
    assert s.requests.failed == 4 and s.requests.matched == 12
    # the failed requests' half streams count nowhere in the figures
    assert s.witnesses.output_tokens.stream_chunks == 12 * N


def test_protocol_failures_within_the_allowed_budget(tmp_path: Path) -> None:
    out, _ = run_against(calib("not_streamed:0.25"), tmp_path, allowed_failures=4)
    assert out.summary.verdict == "valid"
    assert codes(out) == {"not_streamed": "warning"}


def test_a_larger_event_cap_accepts_the_large_event(tmp_path: Path) -> None:
    out, store = run_against(calib("oversized_event"), tmp_path, max_event_bytes=4 * 1024 * 1024)
    assert out.summary.verdict == "valid", out.summary.problems
    assert {len(r.chunk_arrival_ns) for r in store.records(out.run_id, include_warmup=False)} == {N}


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_data_after_done_is_not_read_and_is_named(tmp_path: Path, endpoint: str) -> None:
    out, store = run_against(calib("data_after_done"), tmp_path, endpoint=endpoint)
    s = out.summary
    assert s.verdict == "invalid"
    assert codes(out)["data_after_done"] == "error"
    assert s.requests.failed == 0 and s.requests.matched == 0
    for r in store.records(out.run_id, include_warmup=False):
        # a token chunk; the second [DONE] only repeats the first and is not counted
        assert r.saw_done and r.after_done_events == 1
        assert len(r.chunk_arrival_ns) == N  # the chunk after [DONE] is not a token
        assert r.completion_tokens == N
        assert r.t_done_ns is not None and r.t_done_ns >= r.chunk_arrival_ns[-1]
    # figures stop at [DONE]: the extra chunk is in no count
    assert s.witnesses.output_tokens.stream_chunks == 16 * N
    assert s.witnesses.output_tokens.usage == 16 * N


def test_failed_warmup_is_reported_not_only_counted(tmp_path: Path) -> None:
    # the server's fault counter sees the warm-up first: request 3 (warm-up) fails, and
    # the measured requests 7, 11, 15, 19 (within the allowed budget)
    out, _ = run_against(calib("http_500:0.25"), tmp_path, warmup_requests=4, allowed_failures=4)
    s = out.summary
    assert s.requests.warmup == 4 and s.requests.warmup_failed == 1
    assert codes(out)["warmup_failed"] == "warning"
    (p,) = [p for p in s.problems if p.code == "warmup_failed"]
    assert "1 of 4 warm-up requests failed (http_error 1)" in p.message
    assert "HTTP 500" in p.message
    assert s.verdict == "valid"
    doc = s.to_json_dict()
    assert doc["requests"]["warmup_failed"] == 1  # type: ignore[index]
