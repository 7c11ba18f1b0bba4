"""The response head the lean transport reads: its status and headers, an incomplete
head waited for, and what it refuses (not HTTP, a malformed length, codings it cannot
decode)."""

from __future__ import annotations

import pytest

from crossover.transport.head import HeadError, parse_head

# --- parse_head ---------------------------------------------------------------------------


def test_parse_head_reads_status_and_headers() -> None:
    got = parse_head(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n"
        b"Transfer-Encoding: gzip, chunked\r\nX-A: 1\r\nx-a: 2\r\n\r\ndata"
    )
    assert got is not None
    head, used = got
    assert (head.status, head.reason, used) == (200, "OK", 117)
    assert head.event_stream and head.chunked and head.keep_alive
    assert head.headers["x-a"] == "1, 2"
    assert head.content_length is None


def test_parse_head_waits_for_the_blank_line() -> None:
    assert parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n") is None


@pytest.mark.parametrize(
    "raw",
    [b"SPDY/3 200 OK\r\n\r\n", b"HTTP/1.1 abc OK\r\n\r\n", b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
     b"HTTP/1.1 200 OK\r\n bad: fold\r\n\r\n", b"x" * 70_000],
)  # fmt: skip
def test_parse_head_rejects_what_is_not_http(raw: bytes) -> None:
    with pytest.raises(HeadError):
        parse_head(raw)


def test_a_malformed_content_length_is_an_error() -> None:
    got = parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 1e3\r\n\r\n")
    assert got is not None
    with pytest.raises(HeadError):
        _ = got[0].content_length


@pytest.mark.parametrize("line", [b"Transfer-Encoding: gzip, chunked", b"Content-Encoding: gzip"])
def test_codings_the_prototype_cannot_decode_are_refused(line: bytes) -> None:
    got = parse_head(b"HTTP/1.1 200 OK\r\n" + line + b"\r\n\r\n")
    assert got is not None
    with pytest.raises(HeadError):
        got[0].check_codings()


# --- against a server --------------------------------------------------------------------
