"""Integrity against a real HTTP server: every form of an honest stream the SSE and JSON
specifications allow stays ``valid`` with honest figures, and every part of a response is
read, so a stream that says one thing in one place and another elsewhere is never valid.

The calibration server plants each case (docs/calibration.md, "Faults"); the tests are
by principle, over completions and chat, and the honest forms also all at once.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import pytest

from crossover.calibration.config import CalibrationConfig
from crossover.measure import RunOutcome
from crossover.records.store import Store
from tests.integration.conftest import calib, codes, problems, run_against
from tests.timing import stamped_bounds

N = 16
REQUESTS = 16
ENDPOINTS = ("completions", "chat")

#: honest forms of one stream: each allowed by a specification or seen from a real server
HONEST = (
    "cr_lines",  # SSE: a line may end in CR alone
    "crlf_lines",
    "sse_variety",  # "data:" without a space, data over two lines, id/event/retry, BOM
    "no_final_blank_line",  # the stream ends on "data: [DONE]", nothing after it
    "split_events",  # events cut into 7-byte writes, CRLF, comments
    "null_fields",  # "error": null, "usage": null, ... (an "error": null failed every request)
    "float_ints",  # JSON has one number type: 16.0 is 16
    "unknown_fields",  # fields nobody asked for are ignored
    "repeated_done",  # a real serving framework sends [DONE] twice
    "no_done",  # finish reason and usage, no [DONE] (transformers serve)
    "heartbeats",  # comments between tokens
    "logprobs",  # logprobs sent unasked: one more witness, and it agrees
)


def _honest(out: RunOutcome, store: Store) -> None:
    """Valid, nothing to say, and the figures the server's own stamps give."""
    s = out.summary
    assert s.verdict == "valid", s.problems
    assert problems(out) == []
    assert s.requests.matched == REQUESTS
    assert s.witnesses.output_tokens.stream_chunks == REQUESTS * N
    assert s.witnesses.output_tokens.stream_text == REQUESTS * N
    # the server stamps each chunk as it writes it (same clock): TPOT and ITL are its own
    # time per token moved only by the delivery delays this run measured (the server
    # shares this loop, on a shared 2-core machine, so no fixed percentage holds)
    recs = store.records(out.run_id, include_warmup=False)
    assert all(r.chunk_emitted_ns is not None and len(r.chunk_emitted_ns) == N for r in recs)
    tpot_lo, tpot_hi, itl_lo, itl_hi = stamped_bounds(recs)
    assert s.tpot_ms.p50 is not None and s.itl_ms.mean is not None
    assert statistics.median(tpot_lo) <= s.tpot_ms.p50 <= statistics.median(tpot_hi)
    assert itl_lo <= s.itl_ms.mean <= itl_hi
    assert s.ttft_ms.p50 is not None and s.ttft_ms.p50 >= 5.0


def plant(*faults: str, **kw: Any) -> CalibrationConfig:
    """A server with these faults and no chat template: the word tokenizer the tests count
    with cannot count one (test_honest_prompt_counts_... has the template)."""
    return calib(*faults, chat_template_tokens=0, **kw)


def honest(*forms: str) -> CalibrationConfig:
    """A server in these forms, 4 ms a token."""
    return plant(*forms, itl_ms=4.0)


@pytest.mark.parametrize("endpoint", ENDPOINTS)
@pytest.mark.parametrize("form", HONEST)
def test_honest_forms_stay_valid(tmp_path: Path, form: str, endpoint: str) -> None:
    out, store = run_against(honest(form), tmp_path, endpoint=endpoint)
    _honest(out, store)


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_all_honest_forms_at_once(tmp_path: Path, endpoint: str) -> None:
    forms = [f for f in HONEST if f not in ("crlf_lines", "split_events", "repeated_done")]
    out, store = run_against(honest(*forms), tmp_path, endpoint=endpoint)
    _honest(out, store)
    lp = out.summary.witnesses.output_tokens
    assert (lp.logprobs, lp.logprobs_requests) == (REQUESTS * N, REQUESTS)


def test_every_event_is_stamped_with_the_read_that_brought_it(tmp_path: Path) -> None:
    """An event whose lines end in CR alone is complete when its last CR arrives: it is
    dispatched then, not with the next event 20 ms later."""
    for form in ("cr_lines", "crlf_lines", "sse_variety", "no_final_blank_line"):
        (tmp_path / form).mkdir()
        out, store = run_against(plant(form, itl_ms=20.0), tmp_path / form, requests=4)
        assert out.summary.verdict == "valid", (form, out.summary.problems)
        for r in store.records(out.run_id):
            assert r.chunk_emitted_ns is not None
            late = [
                (a - e) / 1e6 for a, e in zip(r.chunk_arrival_ns, r.chunk_emitted_ns, strict=True)
            ]
            assert max(late) < 10.0, (form, late)


# --- what a response says, read in every part -------------------------------------------


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_whitespace_chunks_are_caught_by_the_text(tmp_path: Path, endpoint: str) -> None:
    """As many chunks as usage claims, every second one a space: the chunk count agrees,
    the re-tokenized text (as a whole and chunk by chunk) does not."""
    out, store = run_against(
        plant("whitespace_chunks"), tmp_path, endpoint=endpoint, engine_metrics=False
    )
    s = out.summary
    assert s.verdict == "invalid"
    assert codes(out) == {"text_tokens_mismatch": "error"}
    assert s.requests.matched == 0
    checks = {c.witness: (c.asked, c.agreed, c.disagreed) for c in s.witnesses.checks}
    assert checks["stream_chunks"] == (REQUESTS, REQUESTS, 0)
    assert checks["stream_text"] == (REQUESTS, 0, REQUESTS)
    measured = store.records(out.run_id, include_warmup=False)
    assert {(r.stream_tokens, r.chunk_text_tokens) for r in measured} == {(N // 2, N // 2)}


def test_whitespace_chunks_are_caught_by_the_engine_counter_too(tmp_path: Path) -> None:
    out, _ = run_against(plant("whitespace_chunks"), tmp_path, text=False)
    assert out.summary.verdict == "invalid"
    assert codes(out) == {"engine_tokens_mismatch": "error"}


@pytest.mark.parametrize("endpoint", ENDPOINTS)
@pytest.mark.parametrize("fault", ["extra_choice", "choices_per_event"])
def test_choices_never_asked_for(tmp_path: Path, fault: str, endpoint: str) -> None:
    out, _ = run_against(plant(fault), tmp_path, endpoint=endpoint)
    s = out.summary
    assert s.verdict == "invalid"
    assert codes(out) == {"extra_choices": "error"}
    assert s.requests.matched == 0
    # only index 0 is the response: its figures are the one completion's
    assert s.witnesses.output_tokens.stream_chunks == REQUESTS * N


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_doubled_prompt_tokens_are_caught(tmp_path: Path, endpoint: str) -> None:
    """The server's /tokenize counts the prompt and, on chat, the template: a doubled
    usage.prompt_tokens is over-reporting on both endpoints."""
    out, _ = run_against(
        calib("prompt_tokens_inflated"), tmp_path, endpoint=endpoint, text="server"
    )
    s = out.summary
    assert s.verdict == "invalid"
    assert codes(out) == {"prompt_tokens_inflated": "error"}
    (p,) = [p for p in s.problems if p.code == "prompt_tokens_inflated"]
    assert "over-reported" in p.message


def test_doubled_prompt_tokens_on_chat_with_a_tokenizer_that_cannot_count_the_template(
    tmp_path: Path,
) -> None:
    """The word tokenizer counts no template: the offset is constant over prompts of one
    length whether it is a template's or a doubled count. The prompt probe (half the
    length, once, before the level) shows the count growing with the prompt."""
    out, store = run_against(calib("prompt_tokens_inflated"), tmp_path, endpoint="chat")
    s = out.summary
    assert s.verdict == "invalid"
    assert codes(out) == {"prompt_tokens_inflated": "error"}
    (p,) = [p for p in s.problems if p.code == "prompt_tokens_inflated"]
    assert "a prompt of 10 tokens was counted 40, one of 20 counted 60" in p.message
    (probe,) = [r for r in store.records(out.run_id) if r.index == -1]
    assert probe.warmup and probe.expected_prompt_tokens == 10
    assert s.requests.warmup == 0  # the probe is outside the measurement, and no warm-up


def test_a_chat_template_the_probe_shows_constant_is_information(tmp_path: Path) -> None:
    out, _ = run_against(calib(), tmp_path, endpoint="chat")  # a 10-token template
    s = out.summary
    assert s.verdict == "valid", s.problems
    assert codes(out) == {"prompt_tokens_mismatch": "info"}
    (p,) = [p for p in s.problems if p.code == "prompt_tokens_mismatch"]
    assert "10 more prompt tokens" in p.message and "another length" in p.message


def test_a_shorter_warm_up_leaves_the_probe_at_one_token(tmp_path: Path) -> None:
    """``warmup_output_tokens`` is the warm-up's: the prompt probe (a warm-up record too)
    still asks for one token, the measured requests for ``output_tokens``; valid."""
    out, store = run_against(
        calib(), tmp_path, endpoint="chat", warmup_requests=4, warmup_output_tokens=3
    )
    assert out.summary.verdict == "valid", out.summary.problems
    counts = {
        (r.index == -1, r.warmup, r.expected_output_tokens, r.completion_tokens)
        for r in store.records(out.run_id)
    }
    assert counts == {(True, True, 1, 1), (False, True, 3, 3), (False, False, N, N)}


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_honest_prompt_counts_with_the_servers_tokenizer(tmp_path: Path, endpoint: str) -> None:
    """The chat template's 10 tokens are counted (the server's /tokenize applies it)."""
    out, _ = run_against(calib(itl_ms=4.0), tmp_path, endpoint=endpoint, text="server")
    assert out.summary.verdict == "valid", out.summary.problems
    assert problems(out) == []
    checks = {c.witness: (c.asked, c.agreed) for c in out.summary.witnesses.checks}
    assert checks["prompts"] == (REQUESTS, REQUESTS)


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_tokens_after_the_finish_reason(tmp_path: Path, endpoint: str) -> None:
    out, _ = run_against(plant("data_after_finish"), tmp_path, endpoint=endpoint)
    assert out.summary.verdict == "invalid"
    assert codes(out) == {"data_after_finish": "error"}
    assert out.summary.requests.matched == 0


def test_usage_total_that_does_not_add_up(tmp_path: Path) -> None:
    out, _ = run_against(plant("usage_total_mismatch"), tmp_path, endpoint="chat")
    assert out.summary.verdict == "invalid"
    assert codes(out) == {"usage_total_mismatch": "error"}


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_logprobs_witness_inflated_usage(tmp_path: Path, endpoint: str) -> None:
    """No tokenizer, no engine counter: the logprobs the server sent are the witness."""
    out, _ = run_against(
        plant("usage_inflated", "logprobs"),
        tmp_path,
        endpoint=endpoint,
        text=False,
        engine_metrics=False,
    )
    assert out.summary.verdict == "invalid"
    assert codes(out)["logprobs_mismatch"] == "error"
