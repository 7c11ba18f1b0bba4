"""The SSE parser against the spec's corner cases, and split at every byte."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crossover.transport.sse import MAX_EVENT_BYTES, EventTooLarge, SSEEvent, SSEParser


def parse_all(*chunks: bytes) -> list[SSEEvent]:
    p = SSEParser()
    out: list[SSEEvent] = []
    for c in chunks:
        out.extend(p.feed(c))
    out.extend(p.close())
    return out


CASES = [
    (b"data: a\n\n", [b"a"]),
    (b"data: a\r\n\r\n", [b"a"]),
    (b"data: a\r\r", [b"a"]),
    (b"data:a\n\n", [b"a"]),
    (b"data:  a\n\n", [b" a"]),  # only one leading space is removed
    (b": comment\ndata: a\n\n", [b"a"]),
    (b": ping\n\n", []),  # a comment alone dispatches nothing
    (b"data: a\ndata: b\n\n", [b"a\nb"]),
    # a field with no colon has an empty value; an event whose data is empty is not
    # dispatched (the spec's dispatch step), nor is "data:" alone, a heartbeat
    (b"data\n\n", []),
    (b"data:\n\ndata: \r\n\r\n", []),
    (b"data\ndata\n\n", [b"\n"]),
    (b"event: x\ndata: a\n\ndata: b\n\n", [b"a", b"b"]),
    # the stream ended without the blank line: dispatched at its end (a server that ends
    # on "data: [DONE]" with nothing after it)
    (b"data: a\n", [b"a"]),
    (b"data: a", [b"a"]),
    (b"data: a\r", [b"a"]),
    (b"Data: a\n\n", []),  # field names are case-sensitive: an unknown field
    (b'data: {"a":\ndata: 1}\n\n', [b'{"a":\n1}']),  # multi-line data joins with LF
    (b"data: a\rdata: b\r\r", [b"a\nb"]),  # CR alone ends lines
    (b"data: a\r\n\r\ndata: b\r\r", [b"a", b"b"]),  # mixed line ends
    (b"id: 1\nevent: x\nretry: 5\ndata: a\n\n", [b"a"]),
    (b"data: a\n\ndata: [DONE]", [b"a", b"[DONE]"]),
    (b": only a comment\n", []),
    (b"data: a\n\ndata: [DONE]\n\n", [b"a", b"[DONE]"]),
    (b"\xef\xbb\xbfdata: a\n\n", [b"a"]),  # BOM
    (b"id: 1\nretry: 10\nfoo: bar\ndata: a\n\n", [b"a"]),
    (b'data: {"x": "a:b"}\n\n', [b'{"x": "a:b"}']),
    (b"data: a\r\n\ndata: b\n\r\n", [b"a", b"b"]),
]


@pytest.mark.parametrize(("raw", "expected"), CASES)
def test_whole(raw: bytes, expected: list[bytes]) -> None:
    assert [e.data for e in parse_all(raw)] == expected


@pytest.mark.parametrize(("raw", "expected"), CASES)
def test_split_at_every_byte(raw: bytes, expected: list[bytes]) -> None:
    for cut in range(1, len(raw)):
        assert [e.data for e in parse_all(raw[:cut], raw[cut:])] == expected, cut


@pytest.mark.parametrize(("raw", "expected"), CASES)
def test_one_byte_at_a_time(raw: bytes, expected: list[bytes]) -> None:
    assert [e.data for e in parse_all(*[raw[i : i + 1] for i in range(len(raw))])] == expected


def test_event_name_and_id() -> None:
    (ev,) = parse_all(b"event: delta\nid: 7\ndata: x\n\n")
    assert ev.event == "delta"
    assert ev.id == "7"


def test_cr_at_end_of_read_waits_for_lf() -> None:
    p = SSEParser()
    assert p.feed(b"data: a\r") == []
    assert p.feed(b"\n") == []
    assert [e.data for e in p.feed(b"\r\n")] == [b"a"]


def test_pending_reports_an_unfinished_event() -> None:
    p = SSEParser()
    p.feed(b"data: half")
    assert p.pending


@given(
    st.lists(
        st.binary(min_size=0, max_size=30).filter(lambda b: b"\n" not in b and b"\r" not in b),
        max_size=8,
    ),
    st.sampled_from([b"\n", b"\r\n", b"\r"]),
    st.lists(st.integers(min_value=1, max_value=20), max_size=10),
)
def test_roundtrip_any_payload_any_split(
    payloads: list[bytes], eol: bytes, cuts: list[int]
) -> None:
    raw = b"".join(b"data: " + p + eol + eol for p in payloads)
    chunks, pos = [], 0
    for c in cuts:
        chunks.append(raw[pos : pos + c])
        pos += c
    chunks.append(raw[pos:])
    assert [e.data for e in parse_all(*chunks)] == [p for p in payloads if p]


@given(st.binary(max_size=300))
def test_never_raises_on_garbage(raw: bytes) -> None:
    parse_all(raw)


# --- the size cap ------------------------------------------------------------------------


def test_an_event_at_the_cap_is_accepted() -> None:
    p = SSEParser(max_event_bytes=16)
    assert [e.data for e in p.feed(b"data: " + b"a" * 16 + b"\n\n")] == [b"a" * 16]


def test_an_event_over_the_cap_stops_the_parse_after_the_events_before_it() -> None:
    p = SSEParser(max_event_bytes=16)
    with pytest.raises(EventTooLarge) as info:
        p.feed(b"data: ok\n\ndata: " + b"a" * 17 + b"\n\ndata: after\n\n")
    assert [e.data for e in info.value.events] == [b"ok"]
    assert info.value.size == 17 and info.value.limit == 16
    with pytest.raises(EventTooLarge) as again:  # nothing is accepted after it
        p.feed(b"data: more\n\n")
    assert again.value.events == []
    assert p.close() == []


def test_an_unfinished_line_over_the_cap_stops_the_parse() -> None:
    """A server that never ends a line cannot grow the buffer without bound."""
    p = SSEParser(max_event_bytes=1024)
    assert p.feed(b"data: " + b"x" * 1000) == []
    with pytest.raises(EventTooLarge) as info:
        p.feed(b"x" * 100)
    assert info.value.events == []
    assert info.value.size > 1024


def test_data_lines_of_one_event_count_together() -> None:
    p = SSEParser(max_event_bytes=20)
    assert p.feed(b"data: " + b"a" * 12 + b"\n") == []
    with pytest.raises(EventTooLarge):
        p.feed(b"data: " + b"b" * 12 + b"\n")


@pytest.mark.parametrize("cut", [1, 5, 9, 23, 30])
def test_the_cap_holds_however_the_event_is_split(cut: int) -> None:
    raw = b"data: ok\n\ndata: " + b"z" * 20 + b"\n\n"
    p = SSEParser(max_event_bytes=10)
    got: list[bytes] = []
    raised = None
    for part in (raw[:cut], raw[cut:]):
        try:
            got += [e.data for e in p.feed(part)]
        except EventTooLarge as exc:
            got += [e.data for e in exc.events]
            raised = exc
            break
    assert raised is not None
    assert got == [b"ok"]


def test_the_default_cap_is_one_mebibyte() -> None:
    assert MAX_EVENT_BYTES == 1024 * 1024
    big = b"data: " + b"y" * MAX_EVENT_BYTES + b"\n\n"
    assert len(SSEParser().feed(big)[0].data) == MAX_EVENT_BYTES
    with pytest.raises(EventTooLarge):
        SSEParser().feed(b"data: " + b"y" * (MAX_EVENT_BYTES + 1) + b"\n\n")


def test_an_event_ending_in_cr_is_dispatched_by_the_read_that_ends_it() -> None:
    """Its arrival is the read that brought its last CR, not the next read (an event
    dispatched one read late is stamped one event late)."""
    p = SSEParser()
    assert [e.data for e in p.feed(b"data: a\r\r")] == [b"a"]
    # an LF first in the next read is the rest of a CRLF: not a second blank line
    assert [e.data for e in p.feed(b"\ndata: b\r\r")] == [b"b"]
    p2 = SSEParser()
    assert p2.feed(b"data: a\r\n\r") == [SSEEvent(b"a")]
    assert p2.feed(b"\ndata: b\r\n\r\n") == [SSEEvent(b"b")]  # the LF closing the CRLF


def test_the_last_event_without_its_blank_line_is_dispatched_at_the_end() -> None:
    p = SSEParser()
    assert [e.data for e in p.feed(b"data: x\n\ndata: [DONE]")] == [b"x"]
    assert [e.data for e in p.close()] == [b"[DONE]"]
    q = SSEParser()
    q.feed(b"data: a\ndata: b")
    assert [e.data for e in q.close()] == [b"a\nb"]
