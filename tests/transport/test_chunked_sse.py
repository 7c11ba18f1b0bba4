"""The chunked SSE parser: the same events as SSEParser for every split of the bytes,
each stamped by the read that completed it; framing errors stop it with a clear error."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crossover.transport.chunked_sse import (
    BodyError,
    ChunkedSSEParser,
    MalformedChunk,
    OversizeEvent,
    StampedEvent,
    TruncatedBody,
    as_sse_events,
)
from crossover.transport.sse import EventTooLarge, SSEEvent, SSEParser


def chunked(body: bytes, sizes: list[int], ext: bool = False) -> tuple[bytes, list[int]]:
    """``body`` as chunks of the given sizes (cycled), the last chunk and no trailers;
    and, for each body byte, its offset in the wire bytes."""
    wire = bytearray()
    where: list[int] = []
    pos = i = 0
    while pos < len(body):
        size = max(1, sizes[i % len(sizes)]) if sizes else len(body)
        i += 1
        piece = body[pos : pos + size]
        wire += f"{len(piece):x}".encode() + (b";x=1" if ext else b"") + b"\r\n"
        where.extend(range(len(wire), len(wire) + len(piece)))
        wire += piece + b"\r\n"
        pos += len(piece)
    wire += b"0\r\n\r\n"
    return bytes(wire), where


def split(wire: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(wire) + 1) for c in cuts} | {0, len(wire)})
    return [wire[a:b] for a, b in itertools.pairwise(points)]


def run(reads: list[bytes], **kw: object) -> tuple[list[StampedEvent], ChunkedSSEParser]:
    p = ChunkedSSEParser(**kw)  # type: ignore[arg-type]
    out: list[StampedEvent] = []
    for i, r in enumerate(reads):
        out += p.feed(r, 1000 + i)
    return out, p


def feed_all(p: ChunkedSSEParser, reads: list[bytes], got: list[StampedEvent]) -> None:
    for i, r in enumerate(reads):
        got += p.feed(r, i)


def reference(body: bytes) -> list[SSEEvent]:
    p = SSEParser(max_event_bytes=1 << 30)
    return p.feed(body) + p.close()


def openai_body(n: int) -> tuple[bytes, list[bytes]]:
    datas = [
        b'{"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":" t%d"}]}' % i
        for i in range(n)
    ] + [b"[DONE]"]
    return b"".join(b"data: " + d + b"\n\n" for d in datas), datas


# --- equivalence and stamps ----------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(
    n=st.integers(0, 12),
    sizes=st.lists(st.integers(1, 300), max_size=6),
    cuts=st.lists(st.integers(0, 10_000), max_size=40),
)
def test_any_split_gives_the_events_stamped_by_the_read_that_completed_them(
    n: int, sizes: list[int], cuts: list[int]
) -> None:
    body, datas = openai_body(n)
    wire, where = chunked(body, sizes)
    reads = split(wire, cuts)
    got, p = run(reads)
    assert [e[0] for e in got] == datas
    assert p.done
    # the wire offset of each event's last byte (the second LF) -> the read holding it
    ends, off = [], 0
    for d in datas:
        off += 6 + len(d) + 2
        ends.append(where[off - 1])
    bounds, acc = [], 0
    for r in reads:
        acc += len(r)
        bounds.append(acc)
    expected = [1000 + next(i for i, b in enumerate(bounds) if e < b) for e in ends]
    assert [e[3] for e in got] == expected
    assert p.close(9999) == []


_LINES = [
    b"data: a",
    b"data:b",
    b'data: {"x": 1}',
    b"data",
    b"data: ",
    b": comment",
    b":",
    b"event: ping",
    b"event: error",
    b"id: 7",
    b"id",
    b"retry: 10",
    b"other: z",
    b"",
    b"",
    b"data: [DONE]",
]


@settings(max_examples=400, deadline=None)
@given(
    bom=st.booleans(),
    lines=st.lists(st.sampled_from(_LINES), max_size=25),
    eols=st.lists(st.sampled_from([b"\n", b"\n", b"\r\n", b"\r"]), min_size=1, max_size=5),
    last_eol=st.booleans(),
    sizes=st.lists(st.integers(1, 50), max_size=5),
    cuts=st.lists(st.integers(0, 5_000), max_size=30),
)
def test_every_sse_form_gives_what_sse_parser_gives(
    bom: bool,
    lines: list[bytes],
    eols: list[bytes],
    last_eol: bool,
    sizes: list[int],
    cuts: list[int],
) -> None:
    body = b"\xef\xbb\xbf" if bom else b""
    for i, line in enumerate(lines):
        body += line
        if i < len(lines) - 1 or last_eol:
            body += eols[i % len(eols)]
    wire, _ = chunked(body, sizes)
    got, p = run(split(wire, cuts), max_event_bytes=1 << 30)
    got += p.close(5)
    assert as_sse_events(got) == reference(body)


@settings(max_examples=200, deadline=None)
@given(n=st.integers(0, 8), cuts=st.lists(st.integers(0, 5_000), max_size=30))
def test_fast_path_events_then_a_comment_hand_over_to_the_general_parser(
    n: int, cuts: list[int]
) -> None:
    body, _ = openai_body(n)
    body = body[: -len(b"data: [DONE]\n\n")] + b": hb\n\nid: 3\ndata: x\n\ndata: [DONE]\n\n"
    wire, _ = chunked(body, [17, 5])
    got, p = run(split(wire, cuts))
    assert as_sse_events(got + p.close(0)) == reference(body)


@pytest.mark.parametrize("line", [b"A", b"a", b"00a", b"A ; name=value", b"a;x"])
def test_hex_sizes_in_either_case_with_zeros_and_extensions(line: bytes) -> None:
    wire = line + b"\r\ndata: xy\n\n\r\n0\r\n\r\n"
    for cut in range(len(wire) + 1):
        got, p = run([wire[:cut], wire[cut:]])
        assert [e[0] for e in got] == [b"xy"]
        assert p.done


def test_chunk_extensions_and_trailers_are_skipped() -> None:
    body, datas = openai_body(3)
    wire, _ = chunked(body, [40], ext=True)
    wire = wire[: -len(b"\r\n")] + b"X-Trailer: 1\r\n\r\n"
    got, p = run([wire])
    assert [e[0] for e in got] == datas and p.done


def test_a_last_event_without_its_blank_line_comes_at_close_with_its_stamp() -> None:
    p = ChunkedSSEParser(chunked=False)
    assert p.feed(b"data: a\n\ndata: [DONE]", 10) == [(b"a", None, None, 10)]
    assert p.close(20) == [(b"[DONE]", None, None, 20)]


def test_events_completed_by_one_read_share_its_stamp() -> None:
    p = ChunkedSSEParser(chunked=False)
    assert p.feed(b"data: a\n\ndata: b\n", 1) == [(b"a", None, None, 1)]
    assert p.feed(b"\ndata: c\n\n", 2) == [(b"b", None, None, 2), (b"c", None, None, 2)]


def test_content_length_body_ends_at_its_length() -> None:
    p = ChunkedSSEParser(chunked=False, content_length=10)
    assert p.feed(b"data: a\n\n", 1) == [(b"a", None, None, 1)]
    assert not p.done
    assert p.feed(b"x", 2) == [] and p.done
    assert p.close(3) == []  # "x" is a line: a field named x, ignored


def test_empty_data_dispatches_nothing() -> None:
    got, _ = run([b"7\r\ndata: \n\r\n0\r\n\r\n"[:5], b"7\r\ndata: \n\r\n0\r\n\r\n"[5:]])
    assert got == []


# --- errors ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "wire",
    [
        b"zz\r\ndata: a\n\n",
        b"\r\n",
        b"-1\r\n",
        b"0x5\r\nhello\r\n",
        b"0X5\r\nhello\r\n",
        b"1_0\r\n",
        b"+5\r\nhello\r\n",
        b"\xd9\xa5\r\nhello\r\n",
        b"11111111111111111\r\n",
        b"2\r\nabXY",
        b"1\r\na\n0\r\n\r\n",
    ],
)
def test_malformed_chunks_raise_a_clear_error(wire: bytes) -> None:
    p = ChunkedSSEParser()
    bytewise = [wire[i : i + 1] for i in range(len(wire))]  # the error whatever the split
    with pytest.raises(MalformedChunk) as info:
        feed_all(p, bytewise, [])
    assert info.value.kind == "malformed_chunk"
    with pytest.raises(MalformedChunk):
        p.feed(b"0\r\n\r\n", 99)  # nothing after an error


def test_malformed_chunk_keeps_the_events_before_it_in_the_same_read() -> None:
    p = ChunkedSSEParser()
    with pytest.raises(MalformedChunk, match="not followed by CRLF") as info:
        p.feed(b"9\r\ndata: a\n\nXX", 5)
    assert info.value.events == [(b"a", None, None, 5)]


def test_a_size_line_without_end_is_capped() -> None:
    p = ChunkedSSEParser()
    with pytest.raises(MalformedChunk, match="without its end"):
        p.feed(b"1;" + b"x" * 5000, 0)


def test_bytes_after_the_last_chunk_are_an_error() -> None:
    p = ChunkedSSEParser()
    with pytest.raises(MalformedChunk, match="after the end"):
        p.feed(b"0\r\n\r\nHTTP/1.1 200 OK\r\n", 0)


@pytest.mark.parametrize("cut", [0, 2, 5, 12, 14])
def test_a_body_cut_before_the_last_chunk_is_truncated(cut: int) -> None:
    wire = b"9\r\ndata: a\n\n\r\n0\r\n\r\n"[:cut]
    p = ChunkedSSEParser()
    if wire:
        p.feed(wire, 1)
    with pytest.raises(TruncatedBody) as info:
        p.close(2)
    assert info.value.kind == "truncated"


def test_a_content_length_body_cut_short_is_truncated() -> None:
    p = ChunkedSSEParser(chunked=False, content_length=100)
    p.feed(b"data: a\n\ndata: b", 1)
    with pytest.raises(TruncatedBody, match="84 more body bytes") as info:
        p.close(2)
    assert info.value.events == []  # "data: b" was cut: not an event


def test_a_body_until_close_is_never_truncated() -> None:
    p = ChunkedSSEParser(chunked=False)
    p.feed(b"data: a\n\n", 1)
    assert p.close(2) == []


@pytest.mark.parametrize("reads", [1, 3, 50])
def test_an_oversize_event_stops_the_parse_keeping_the_events_before_it(reads: int) -> None:
    body = b"data: ok\n\ndata: " + b"x" * 200 + b"\n\ndata: [DONE]\n\n"
    wire, _ = chunked(body, [64])
    step = max(1, len(wire) // reads)
    p = ChunkedSSEParser(max_event_bytes=100)
    got: list[StampedEvent] = []
    with pytest.raises(OversizeEvent) as info:
        feed_all(p, [wire[i : i + step] for i in range(0, len(wire), step)], got)
    got += info.value.events
    assert [e[0] for e in got] == [b"ok"]
    assert info.value.kind == "event_too_large"
    with pytest.raises(OversizeEvent):
        p.feed(b"", 0)


def test_a_line_that_never_ends_is_stopped_at_the_cap() -> None:
    p = ChunkedSSEParser(chunked=False, max_event_bytes=100)
    p.feed(b"data: " + b"x" * 90, 0)
    with pytest.raises(OversizeEvent):
        p.feed(b"x" * 20, 1)


@settings(max_examples=300, deadline=None)
@given(
    lens=st.lists(st.integers(0, 60), max_size=8),
    multi=st.booleans(),
    cap=st.integers(1, 50),
    cuts=st.lists(st.integers(0, 2_000), max_size=20),
)
def test_the_cap_stops_where_sse_parser_fed_the_same_reads_stops(
    lens: list[int], multi: bool, cap: int, cuts: list[int]
) -> None:
    body = b"".join(
        b"data: " + b"y" * n + (b"\ndata: z" if multi and n % 2 else b"") + b"\n\n" for n in lens
    )
    reads = split(body, cuts)
    ref = SSEParser(max_event_bytes=cap)
    want: list[bytes] = []
    ref_raised = False
    try:
        for r in reads:
            want += [e.data for e in ref.feed(r)]
        want += [e.data for e in ref.close()]
    except EventTooLarge as exc:
        want += [e.data for e in exc.events]
        ref_raised = True
    p = ChunkedSSEParser(chunked=False, max_event_bytes=cap)
    got: list[StampedEvent] = []
    raised = False
    try:
        feed_all(p, reads, got)
        got += p.close(0)
    except OversizeEvent as exc:
        got += exc.events
        raised = True
    assert ([e[0] for e in got], raised) == (want, ref_raised)


def test_an_empty_content_length_body_is_done_at_once() -> None:
    p = ChunkedSSEParser(chunked=False, content_length=0)
    assert p.done
    assert p.close(1) == []


def test_bytes_past_the_content_length_are_an_error_the_events_before_kept() -> None:
    p = ChunkedSSEParser(chunked=False, content_length=9)
    with pytest.raises(MalformedChunk, match="after the end") as info:
        p.feed(b"data: a\n\nHTTP/1.1", 3)
    assert info.value.events == [(b"a", None, None, 3)]
    assert p.body_bytes == 0  # the breaking read's body is not counted


def test_body_bytes_count_the_body_without_framing() -> None:
    _, p = run([b"3\r\nabc\r\n", b"2\r\nde\r\n0\r\n\r\n"])
    assert p.body_bytes == 5


@pytest.mark.parametrize("whole_line", [True, False])
def test_trailers_over_the_cap_are_an_error(whole_line: bool) -> None:
    p = ChunkedSSEParser()
    line = b"X-T: " + b"t" * 70_000 + (b"\r\n" if whole_line else b"")
    with pytest.raises(MalformedChunk, match="trailers over the cap"):
        p.feed(b"0\r\n" + line, 0)


def test_close_after_an_error_raises_it_again() -> None:
    p = ChunkedSSEParser()
    with pytest.raises(MalformedChunk):
        p.feed(b"zz\r\n", 0)
    with pytest.raises(MalformedChunk):
        p.close(1)


def test_an_event_over_the_cap_only_once_joined_at_close() -> None:
    p = ChunkedSSEParser(chunked=False, max_event_bytes=10)
    assert p.feed(b"data: aaaaaaaaa\ndata: b", 0) == []
    with pytest.raises(OversizeEvent):
        p.close(1)


# --- whole chunks of one event each (feed's one-pass path) -------------------------------

_UNITS = [
    b"data: tok\n\n",
    b'data: {"a": 1}\n\n',
    b"data: [DONE]\n\n",
    b"data: \n\n",
    b"data: a\ndata: b\n\n",
    b": c\n\n",
    b"data: x\r\n\r\n",
    b"data: y\n",
    b"\n",
    b"event: error\ndata: e\n\n",
    b"data:z\n\n",
    b"data: " + b"L" * 40 + b"\n\n",
]


def _general_path(
    reads: list[bytes], max_event_bytes: int
) -> tuple[list[StampedEvent], type[BaseException] | None]:
    """The same reads through ``feed``'s general path only (framing, then SSE): what
    ``feed`` gave before its one-pass path for whole one-event chunks."""
    p = ChunkedSSEParser(max_event_bytes=max_event_bytes)
    out: list[StampedEvent] = []
    try:
        for i, r in enumerate(reads):
            if p._error is not None:  # as feed: nothing is read after an error
                raise type(p._error)(str(p._error))
            out += p._feed(r, i)
        out += p.close(len(reads))
    except BodyError as exc:
        return out + exc.events, type(exc)
    return out, None


@settings(max_examples=400, deadline=None)
@given(
    units=st.lists(st.sampled_from(_UNITS), max_size=30),
    on_chunks=st.lists(st.booleans(), max_size=40),
    cuts=st.lists(st.integers(0, 3_000), max_size=10),
    cap=st.sampled_from([1 << 30, 8, 30]),
    tail=st.sampled_from([b"0\r\n\r\n", b"0\r\n", b"zz\r\n", b""]),
)
def test_whole_event_chunks_give_what_the_general_path_gives(
    units: list[bytes], on_chunks: list[bool], cuts: list[int], cap: int, tail: bytes
) -> None:
    chunks = [f"{len(u):x}".encode() + b"\r\n" + u + b"\r\n" for u in units] + [tail]
    # reads cut at chunk boundaries (where the one-pass path applies) and anywhere else
    reads: list[bytes] = []
    cur = b""
    for i, c in enumerate(chunks):
        cur += c
        if on_chunks[i % len(on_chunks)] if on_chunks else True:
            reads.append(cur)
            cur = b""
    if cur:
        reads.append(cur)
    if cuts:
        wire = b"".join(reads)
        bounds = set(itertools.accumulate(len(r) for r in reads)) | {
            c % (len(wire) + 1) for c in cuts
        }
        reads = split(wire, sorted(bounds))
    want, want_err = _general_path(reads, cap)
    p = ChunkedSSEParser(max_event_bytes=cap)
    got: list[StampedEvent] = []
    err: type[BaseException] | None = None
    try:
        for i, r in enumerate(reads):
            got += p.feed(r, i)
        got += p.close(len(reads))
    except BodyError as exc:
        got += exc.events
        err = type(exc)
    assert got == want
    assert err == want_err
