"""An HTTP/1.1 response body to SSE events in one incremental pass, with no socket.

The aiohttp transport hands each read through aiohttp's payload parser, a
``StreamReader`` and ``readchunk`` before ``SSEParser`` sees it (about 60% of the
client's CPU at 256 streams, ``docs/results/client_overhead.md``). This parser takes the
bytes of one ``data_received`` and its ``perf_counter_ns`` stamp and returns the events
they completed, each with that stamp: the stamp of the read that brought the event's
last byte (``bench/transport_parsers.py`` measures it against aiohttp's, httptools' and
h11's parsers).

Two layers, both ``bytes.find`` based:

* the body framing: ``Transfer-Encoding: chunked`` (RFC 9112 section 7.1: a hex size,
  extensions ignored, CRLF only, trailers skipped), ``Content-Length``, or a body that
  ends with the connection;
* SSE: while the stream is made only of ``data: ...`` lines each followed by a blank
  line, LF only (what vLLM, SGLang and the calibration server send), each event is one
  slice. The first thing outside that form (a CR, a comment, another field, a
  multi-line event, an event over the cap) hands the rest of the stream to
  ``SSEParser``, which follows the whole spec; it then parses everything after that
  point, so the events are exactly ``SSEParser``'s for every input.

Errors stop the parse and carry the events completed before them in the same ``feed``:
``MalformedChunk`` (a bad size line, a chunk not followed by CRLF, bytes after the last
chunk), ``OversizeEvent`` (an event, or an unfinished line, over ``max_event_bytes``) and
``TruncatedBody`` (``close`` before the body's end). The parser accepts nothing after
one.
"""

from __future__ import annotations

from typing import Final, Literal

from crossover.transport.sse import MAX_EVENT_BYTES, EventTooLarge, SSEEvent, SSEParser

#: (data, event type or None, last event id or None, arrival stamp in perf_counter_ns)
StampedEvent = tuple[bytes, str | None, str | None, int]

#: a chunk-size line longer than this is malformed (16 hex digits are 2**64; extensions
#: are allowed but bounded, so a server cannot make the client hold an unbounded line)
MAX_SIZE_LINE = 4096
#: trailer section cap after the last chunk, bytes
MAX_TRAILERS = 64 * 1024

_HEX: Final = frozenset(b"0123456789abcdefABCDEF")

BodyErrorKind = Literal["malformed_chunk", "event_too_large", "truncated"]


class BodyError(Exception):
    """The body broke its framing or a limit; ``events`` were completed before it."""

    kind: BodyErrorKind = "malformed_chunk"

    def __init__(self, message: str, events: list[StampedEvent] | None = None) -> None:
        super().__init__(message)
        self.events: list[StampedEvent] = events if events is not None else []


class MalformedChunk(BodyError):
    kind: BodyErrorKind = "malformed_chunk"

    def __init__(
        self, message: str, events: list[StampedEvent] | None = None, body: bytes = b""
    ) -> None:
        super().__init__(message, events)
        #: the body bytes of the breaking read before the break (their events are kept)
        self.body = body


class OversizeEvent(BodyError):
    kind: BodyErrorKind = "event_too_large"


class TruncatedBody(BodyError):
    kind: BodyErrorKind = "truncated"


# framing states
_SIZE, _DATA, _DATA_END, _TRAILERS, _DONE = range(5)


class ChunkedSSEParser:
    """Feed it each read of a response body with its arrival stamp; it returns the
    events completed by that read, stamped with it.

    ``chunked``: the body is chunked; else ``content_length`` bytes, or (None) every byte
    until the connection closes. ``done`` is True once the body has ended (the last
    chunk and its trailers, or ``content_length`` bytes); ``close`` at the connection's
    end returns an event still waiting for its blank line, or raises ``TruncatedBody``.
    """

    __slots__ = (
        "_state", "_left", "_line", "_sse_buf", "_slow", "_max", "_error", "_chunked",
        "_body_bytes", "_started", "_trailer_bytes", "_first",
    )  # fmt: skip

    def __init__(
        self,
        chunked: bool = True,
        content_length: int | None = None,
        max_event_bytes: int = MAX_EVENT_BYTES,
    ) -> None:
        self._chunked = chunked
        self._state = _SIZE if chunked else _DATA
        #: bytes left in the current chunk (or the Content-Length body; -1: until close)
        self._left = 0 if chunked else (-1 if content_length is None else content_length)
        self._line = b""  # an unfinished size line, trailer line or chunk-ending CRLF
        self._sse_buf = b""  # body bytes after the last complete event (fast path)
        self._slow: SSEParser | None = None  # the general parser, once the fast path ends
        self._max = max_event_bytes
        self._error: BodyError | None = None
        self._body_bytes = 0
        self._started = False  # any body byte seen (a BOM only counts at the start)
        self._trailer_bytes = 0
        self._first: bytes | None = None  # the first body bytes (up to 64), once any came
        if not chunked and content_length == 0:
            self._state = _DONE

    @property
    def done(self) -> bool:
        """The body has ended by its own framing (not by the connection closing)."""
        return self._state == _DONE

    @property
    def body_bytes(self) -> int:
        """Body bytes decoded so far (chunk framing excluded)."""
        return self._body_bytes

    @property
    def first_bytes(self) -> bytes | None:
        """Up to 64 bytes of the start of the body; None until a body byte came (tells a
        JSON body under an event-stream label from a stream, and a cut from no body)."""
        return self._first

    def body(self, data: bytes) -> bytes:
        """The body bytes of ``data``, framing removed, not read as SSE (a body that is
        no event stream: an error's text, a JSON answer); ``MalformedChunk`` stops it."""
        if self._error is not None:
            raise type(self._error)(str(self._error))
        if self._state == _DATA and self._left < 0:
            body = data
        else:
            try:
                body = self._unframe(data)
            except MalformedChunk as exc:
                self._error = exc
                raise
        self._body_bytes += len(body)
        return body

    def feed(self, data: bytes, t_ns: int) -> list[StampedEvent]:
        """The events ``data`` completed, stamped ``t_ns``; a ``BodyError`` stops the parse."""
        if self._error is not None:
            raise type(self._error)(str(self._error))
        if (
            self._state == _SIZE
            and self._started
            and not self._line
            and not self._sse_buf
            and self._slow is None
        ):
            # at a chunk boundary with nothing held: whole chunks of one event each (what
            # vLLM and SGLang write) are read here in one pass; the first chunk that is
            # anything else, and the rest of the read, go the general way below
            out: list[StampedEvent] = []
            pos = 0
            n = len(data)
            find = data.find
            limit = self._max + 8
            while pos < n:
                eol = find(b"\r\n", pos)
                if eol < 0 or eol - pos > 16:
                    break
                line = data[pos:eol]
                if not line.isalnum() or line[1:2] in (b"x", b"X"):
                    break
                try:
                    size = int(line, 16)
                except ValueError:
                    break
                start = eol + 2
                end = start + size
                # "data: " + at least one byte + "\n\n", one line, no CR, within the cap
                if (
                    size <= 8
                    or size > limit
                    or end + 2 > n
                    or data[end : end + 2] != b"\r\n"
                    or not data.startswith(b"data: ", start)
                    or find(b"\n", start, end) != end - 2
                    or data[end - 1] != 10
                    or find(b"\r", start, end) >= 0
                ):
                    break
                out.append((data[start + 6 : end - 2], None, None, t_ns))
                self._body_bytes += size
                pos = end + 2
            if pos:
                if pos == n:
                    return out
                try:
                    out.extend(self._feed(data[pos:], t_ns))
                except BodyError as exc:  # the events before the break come with it
                    exc.events = out + exc.events
                    raise
                return out
        return self._feed(data, t_ns)

    def _feed(self, data: bytes, t_ns: int) -> list[StampedEvent]:
        if self._state == _DATA and self._left < 0:
            body = data  # until close: every byte is body
        else:
            try:
                body = self._unframe(data)
            except MalformedChunk as exc:
                # the body bytes before the break still complete their events
                if self._first is None and exc.body:
                    self._first = exc.body[:64]
                try:
                    exc.events = self._events(exc.body, t_ns) if exc.body else []
                except BodyError as inner:
                    exc.events = inner.events
                self._error = exc
                raise
        if not body:
            return []
        self._body_bytes += len(body)
        if self._first is None:
            self._first = body[:64]
        return self._events(body, t_ns)

    def close(self, t_ns: int) -> list[StampedEvent]:
        """The connection ended at ``t_ns``: an event still waiting for its blank line is
        dispatched (as ``SSEParser.close`` does); ``TruncatedBody`` (no event) if the
        body's framing had not ended."""
        if self._error is not None:
            raise type(self._error)(str(self._error))
        if self._state != _DONE and (self._chunked or self._left >= 0):
            # an event cut by the close is not dispatched (the aiohttp transport never
            # sees it either: its payload error comes first)
            what = "the last chunk" if self._chunked else f"{self._left} more body bytes"
            self._error = TruncatedBody(f"the connection closed before {what}")
            raise self._error
        return self._finish(t_ns)

    # --- body framing ------------------------------------------------------------------

    def _unframe(self, data: bytes) -> bytes:
        """The body bytes in ``data``, framing removed."""
        pieces: list[bytes] = []
        pos = 0
        n = len(data)
        if self._line:
            data = self._line + data
            n = len(data)
            self._line = b""
        while pos < n:
            state = self._state
            if state == _SIZE:
                eol = data.find(b"\r\n", pos)
                if eol < 0:
                    if n - pos > MAX_SIZE_LINE:
                        raise self._bad("a chunk-size line without its end", pieces)
                    self._line = data[pos:]
                    break
                line = data[pos:eol]
                # the common line, bare hex digits: int() alone (isalnum excludes signs,
                # spaces, "_" and ";"; a second character x or X would be int's 0x prefix)
                if 0 < len(line) <= 16 and line.isalnum() and line[1:2] not in (b"x", b"X"):
                    try:
                        size = int(line, 16)
                    except ValueError:
                        size = self._size(line, pieces)
                else:
                    size = self._size(line, pieces)
                pos = eol + 2
                if not size:
                    self._state = _TRAILERS
                    continue
                end = pos + size
                if end + 2 <= n and data[end : end + 2] == b"\r\n":
                    # the whole chunk and its CRLF are here: one step
                    pieces.append(data[pos:end])
                    pos = end + 2
                    continue
                self._left = size
                self._state = _DATA
            elif state == _DATA:
                left = self._left
                end = pos + left
                if end >= n:
                    pieces.append(data[pos:] if pos else data)
                    self._left = left - (n - pos)
                    pos = n
                    if self._left == 0:
                        self._state = _DATA_END if self._chunked else _DONE
                    break
                pieces.append(data[pos:end])
                pos = end
                self._left = 0
                if not self._chunked:
                    self._state = _DONE
                    continue
                self._state = _DATA_END
            elif state == _DATA_END:
                if n - pos < 2:
                    if data[pos:] != b"\r"[: n - pos]:
                        raise self._bad("a chunk not followed by CRLF", pieces)
                    self._line = data[pos:]
                    break
                if data[pos : pos + 2] != b"\r\n":
                    raise self._bad("a chunk not followed by CRLF", pieces)
                pos += 2
                self._state = _SIZE
            elif state == _TRAILERS:
                eol = data.find(b"\r\n", pos)
                if eol < 0:
                    if self._trailer_bytes + n - pos > MAX_TRAILERS:
                        raise self._bad("trailers over the cap", pieces)
                    self._line = data[pos:]
                    break
                self._trailer_bytes += eol + 2 - pos
                if self._trailer_bytes > MAX_TRAILERS:
                    raise self._bad("trailers over the cap", pieces)
                if eol == pos:
                    self._state = _DONE  # the blank line ending the trailers
                pos = eol + 2
            else:  # _DONE
                raise self._bad(f"{n - pos} bytes after the end of the body", pieces)
        if not pieces:
            return b""
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    def _size(self, line: bytes, pieces: list[bytes]) -> int:
        semi = line.find(b";")
        digits = (line if semi < 0 else line[:semi]).rstrip(b" \t")
        if not digits or len(digits) > 16 or not _HEX.issuperset(digits):
            raise self._bad(f"a malformed chunk size {line[:40]!r}", pieces)
        return int(digits, 16)

    @staticmethod
    def _bad(message: str, pieces: list[bytes]) -> MalformedChunk:
        return MalformedChunk(message, body=b"".join(pieces))

    # --- SSE ------------------------------------------------------------------------

    def _events(self, body: bytes, t_ns: int) -> list[StampedEvent]:
        if self._slow is not None:
            return self._slow_feed(body, t_ns)
        buf = self._sse_buf + body if self._sse_buf else body
        if not self._started:
            if len(buf) < 6 and b"data: ".startswith(buf) and len(buf) <= self._max:
                self._sse_buf = buf  # too short to tell yet
                return []
            self._started = True
            if buf[:6] != b"data: ":  # a BOM, a comment, another field: the general case
                self._sse_buf = b""
                return self._handoff(buf, t_ns, [], prime=False)
        if b"\r" in body:
            self._sse_buf = b""
            return self._handoff(buf, t_ns, [], prime=True)
        out: list[StampedEvent] = []
        pos = 0
        limit = self._max + 6
        find = buf.find
        starts = buf.startswith
        while True:
            sep = find(b"\n\n", pos)
            if sep < 0:
                break
            # one "data: " line and its blank line, nothing else: the event is the slice
            if not starts(b"data: ", pos) or sep - pos > limit or find(b"\n", pos, sep) >= 0:
                self._sse_buf = b""
                return self._handoff(buf[pos:], t_ns, out, prime=True)
            if sep - pos > 6:  # "data: " alone dispatches nothing
                out.append((buf[pos + 6 : sep], None, None, t_ns))
            pos = sep + 2
        rest = buf[pos:] if pos else buf
        if len(rest) > self._max:  # the general parser decides, as it would have
            self._sse_buf = b""
            return self._handoff(rest, t_ns, out, prime=True)
        self._sse_buf = rest
        return out

    def _handoff(
        self, rest: bytes, t_ns: int, out: list[StampedEvent], prime: bool
    ) -> list[StampedEvent]:
        """From here on the general parser reads the stream, starting with ``rest``."""
        slow = self._slow = SSEParser(self._max)
        if prime:
            # a blank line at an event boundary dispatches nothing; it ends SSEParser's
            # check for a BOM, which belongs only at the start of the stream
            slow.feed(b"\n")
        if not rest:
            return out
        try:
            out.extend(self._slow_feed(rest, t_ns))
        except OversizeEvent as exc:
            exc.events = out + exc.events
            raise
        return out

    def _slow_feed(self, body: bytes, t_ns: int) -> list[StampedEvent]:
        assert self._slow is not None
        try:
            evs = self._slow.feed(body)
        except EventTooLarge as exc:
            got = [(e.data, e.event, e.id, t_ns) for e in exc.events]
            self._error = OversizeEvent(str(exc), got)
            raise self._error from None
        return [(e.data, e.event, e.id, t_ns) for e in evs]

    def _finish(self, t_ns: int) -> list[StampedEvent]:
        """End of stream for the SSE layer (``SSEParser.close``)."""
        if self._slow is None:
            if not self._sse_buf:
                return []
            rest, self._sse_buf = self._sse_buf, b""
            self._handoff(b"", t_ns, [], prime=True)
            assert self._slow is not None
            try:
                self._slow.feed(rest)
            except EventTooLarge as exc:  # pragma: no cover - the fast path checked the cap
                self._error = OversizeEvent(str(exc))
                raise self._error from None
        slow = self._slow
        assert slow is not None
        try:
            evs = slow.close()
        except EventTooLarge as exc:
            got = [(e.data, e.event, e.id, t_ns) for e in exc.events]
            self._error = OversizeEvent(str(exc), got)
            raise self._error from None
        return [(e.data, e.event, e.id, t_ns) for e in evs]


def as_sse_events(events: list[StampedEvent]) -> list[SSEEvent]:
    """The events as ``SSEParser`` returns them (stamps dropped): for comparisons."""
    return [SSEEvent(data, event, id_) for data, event, id_, _ in events]
