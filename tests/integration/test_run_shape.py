"""Workload shapes against the calibration server: per-request lengths drawn from a
distribution are each forced and verified, the same for every run of the same seed, and a
request short of its own N is caught."""

from __future__ import annotations

import itertools
from pathlib import Path

from tests.integration.conftest import calib, codes, run_against


def _records(store, outcome):  # type: ignore[no-untyped-def]
    return store.records(outcome.run_id, include_warmup=False)


def test_each_request_gets_and_is_checked_against_its_own_length(tmp_path: Path) -> None:
    shape = {
        "output_tokens": "uniform:4-24",
        "input_tokens": "lognormal:30,20,5-120",
        "shared_prefix": "3x16",
        "requests": 24,
    }
    out, store = run_against(calib(), tmp_path, **shape)
    assert out.summary.verdict == "valid", out.summary.problems
    assert out.summary.requests.matched == 24
    recs = _records(store, out)
    assert len({r.expected_output_tokens for r in recs}) > 8
    assert all(r.completion_tokens == r.expected_output_tokens for r in recs)
    assert all(4 <= r.expected_output_tokens <= 24 for r in recs)
    # the prompt is the shared prefix plus the drawn unique part, counted by the server
    assert len({r.expected_prompt_tokens for r in recs}) > 8
    assert all(r.prompt_tokens == r.expected_prompt_tokens for r in recs)
    assert min(r.expected_prompt_tokens or 0 for r in recs) >= 16 + 5
    s = out.summary
    assert s.workload.shape == {
        "input_lengths": "lognormal:30,20,5-120",
        "output_lengths": "uniform:4-24",
        "shared_prefix": "3x16",
    }
    assert s.workload.output_tokens == 14  # the nominal (mean) length
    assert s.expected_output_tokens.min is not None and s.expected_output_tokens.min >= 4
    assert s.expected_output_tokens.max is not None and s.expected_output_tokens.max <= 24
    # the calibration server keeps no prefix cache and says nothing of one (the real
    # llama-server's evidence: tests/reliability/test_gemma_real.py)
    assert s.prefix_cache is None

    # the same seed draws the same work, whatever the concurrency: matched across engines
    (tmp_path / "again").mkdir()
    again, store2 = run_against(calib(), tmp_path / "again", concurrency=2, **shape)
    key = lambda r: (r.index, r.expected_output_tokens, r.expected_prompt_tokens)  # noqa: E731
    assert sorted(map(key, _records(store2, again))) == sorted(map(key, recs))


def test_a_request_short_of_its_own_length_is_caught(tmp_path: Path) -> None:
    out, _ = run_against(
        calib("short_completion"), tmp_path, output_tokens="uniform:6-30", requests=12
    )
    assert out.summary.verdict == "invalid"
    assert codes(out)["short_completion"] == "error"
    (p,) = [p for p in out.summary.problems if p.code == "short_completion"]
    assert "their own output length" in p.message
    assert out.summary.requests.matched == 0


def test_a_trace_replay_keeps_its_arrivals_and_lengths(tmp_path: Path) -> None:
    from crossover.workload.trace import read_trace

    sample = Path(__file__).resolve().parents[2] / "docs" / "examples" / "trace-sample.jsonl"
    tr = read_trace(sample)
    out, store = run_against(
        calib(), tmp_path, trace=sample, trace_speed=8.0, requests=20,
        concurrency=None, output_tokens=None, input_tokens=None,
    )  # fmt: skip
    assert out.summary.verdict == "valid", out.summary.problems
    recs = sorted(_records(store, out), key=lambda r: r.index)
    assert len(recs) == 20
    for r, t in zip(recs, tr.requests, strict=False):
        assert (r.expected_prompt_tokens, r.expected_output_tokens) == (
            t.input_length,
            t.output_length,
        )
        assert r.completion_tokens == t.output_length
    # the schedule is the trace's, 8x faster, and the sends kept to it
    sched = [r.t_scheduled_ns for r in recs]
    assert all(s is not None for s in sched)
    t0 = sched[0] or 0
    want = tr.offsets_ns(8.0)[:20]
    assert [(s or 0) - t0 for s in sched] == want
    late_ms = [(r.t_send_ns - (r.t_scheduled_ns or 0)) / 1e6 for r in recs]
    assert max(late_ms) < 50.0
    assert out.summary.workload.prompts.startswith("trace:")


def test_sessions_carry_their_history_and_wait_for_each_reply(tmp_path: Path) -> None:
    out, store = run_against(
        calib(), tmp_path, sessions={"turns": 3, "think_s": 0.05}, requests=12,
        concurrency=2, output_tokens=6, input_tokens=10,
    )  # fmt: skip
    assert out.summary.verdict == "valid", out.summary.problems
    recs = {r.index: r for r in _records(store, out)}
    assert sorted(recs) == list(range(12))
    for s in range(4):
        turns = [recs[s * 3 + t] for t in range(3)]
        # turn t's prompt: t earlier user texts and replies (10 + 6 each) + its own 10
        assert [r.expected_prompt_tokens for r in turns] == [10, 26, 42]
        assert [r.prompt_tokens for r in turns] == [10, 26, 42]
        for a, b in itertools.pairwise(turns):
            assert a.t_done_ns is not None and b.t_scheduled_ns is not None
            # the next turn was planned think_s after the reply and sent no earlier
            assert b.t_scheduled_ns - a.t_done_ns >= 50_000_000
            assert b.t_send_ns >= b.t_scheduled_ns
    turns = out.summary.turns
    assert [t.turn for t in turns] == [1, 2, 3]
    assert [t.prompt_tokens.mean for t in turns] == [10, 26, 42]
    assert all(t.ttft_ms.count == 4 for t in turns)
    assert out.summary.workload.shape["sessions"] == "3 turns, think 0.05 s"


def test_session_prompts_repeat_the_history_verbatim() -> None:
    from crossover.calibration.tokenizer import WordTokenizer
    from crossover.workload.sessions import Sessions, session_prompts

    ps = session_prompts(Sessions(turns=3), 6, 5, 4, seed=1, tokenizer=WordTokenizer())
    for s in (0, 1):
        t0, t1, t2 = (ps[s * 3 + t].text for t in range(3))
        assert t1.startswith(t0) and t2.startswith(t1)
    assert ps[0].text != ps[3].text  # sessions differ


def test_the_calibration_servers_prefix_cache_is_read_and_cuts_ttft(tmp_path: Path) -> None:
    """A server with a known cache (16-token blocks): 2 prefixes of 64 tokens, 12 requests
    one at a time. The first use of each prefix finds nothing; every later one finds its
    64 tokens, and only the uncached prompt tokens cost prefill time."""
    server = calib(ttft_ms=2.0, ttft_per_prompt_token_ms=0.5, prefix_cache_block_tokens=16)
    out, store = run_against(
        server, tmp_path, shared_prefix="2x64", input_tokens=16, output_tokens=4,
        requests=12, concurrency=1,
    )  # fmt: skip
    assert out.summary.verdict == "valid", out.summary.problems
    recs = sorted(_records(store, out), key=lambda r: r.index)
    assert [r.cached_prompt_tokens for r in recs] == [0, 0] + [64] * 10
    cache = out.summary.prefix_cache
    assert cache is not None and cache.requests_reporting == 12
    assert cache.hit_fraction == (64 * 10) / (80 * 12)
    ttft = [r.t_first_ns - r.t_send_ns for r in recs if r.t_first_ns is not None]
    cold, warm = min(ttft[:2]), max(ttft[2:])
    # cold: 2 + 80 x 0.5 = 42 ms; warm: 2 + 16 x 0.5 = 10 ms
    assert cold > 35e6 and warm < 30e6, (cold, warm)


def test_sessions_on_chat_send_roles_and_their_template_is_counted_per_turn(
    tmp_path: Path,
) -> None:
    """A server whose template adds 10 tokens and 2 per message after the first (a role
    header): turn t sends 2t + 1 messages, so its count is its own tokens + 10 + 4t. With
    the server's /tokenize the template is counted per turn and every prompt agrees."""
    server = calib(chat_message_tokens=2)
    kw = {"sessions": {"turns": 3}, "requests": 12, "concurrency": 2, "output_tokens": 6,
          "input_tokens": 10, "endpoint": "chat"}  # fmt: skip
    out, store = run_against(server, tmp_path, text="server", **kw)  # type: ignore[arg-type]
    assert out.summary.verdict == "valid", out.summary.problems
    assert not [p for p in out.summary.problems if p.code.startswith("prompt_tokens")]
    recs = _records(store, out)
    for r in recs:
        t = (r.prompt_id or 0) % 3
        assert r.expected_prompt_tokens == 10 + 16 * t  # the content: history and own text
        assert r.prompt_tokens == r.expected_prompt_tokens + 10 + 4 * t  # + the template
    (check,) = [c for c in out.summary.witnesses.checks if c.witness == "prompts"]
    assert check.agreed == check.asked == 12
    ctx = store.run(out.run_id).context["context"]  # type: ignore[union-attr]
    assert ctx["chat_template_by_turn"] == [10, 14, 18]

    # a tokenizer that cannot count the template: each turn is held to its own offset
    (tmp_path / "words").mkdir()
    out2, _ = run_against(server, tmp_path / "words", **kw)  # type: ignore[arg-type]
    assert out2.summary.verdict == "valid", out2.summary.problems
    assert "prompt_tokens_inflated" not in codes(out2)
