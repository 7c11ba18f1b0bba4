"""An incremental Server-Sent Events parser that follows the WHATWG spec.

Events may be split anywhere across reads; lines end in CRLF, LF or CR; lines
starting with ``:`` are comments; several ``data:`` lines join with ``\\n``; an
event is dispatched on a blank line and only if its data is not empty (``data:`` alone,
a heartbeat some servers send, dispatches nothing).

A line ends the moment its end arrives: a CR that ends a read ends its line there (an
LF starting the next read is the rest of that CRLF and is skipped), so an event whose
last line ends in a bare CR is dispatched with the read that brought it, never with
the next one (its arrival stamp would be one event late). At the end of the stream, an
event still waiting for its blank line is dispatched (servers end on ``data: [DONE]``
with no blank line after it); the spec drops it, a benchmark would then lose the
response's last event.

The spec sets no size limit; this parser does: an event whose data, or a line still
waiting for its end, grows past ``max_event_bytes`` (default ``MAX_EVENT_BYTES``,
1 MiB) stops the parse with ``EventTooLarge``, so a server that never ends a line
cannot make the client hold an unbounded buffer. The checks run once per dispatched
event and once per ``feed``, never per line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_EOL = re.compile(rb"\r\n|\r|\n")

#: default cap on one event's data (or one unfinished line), bytes
MAX_EVENT_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class SSEEvent:
    data: bytes
    event: str | None = None
    id: str | None = None


class EventTooLarge(Exception):
    """An event, or a line without its end, passed the parser's cap.

    ``events`` are the events completed before it in the same ``feed``; the parser
    accepts nothing after it.
    """

    def __init__(self, size: int, limit: int, events: list[SSEEvent]) -> None:
        super().__init__(f"an event of at least {size} bytes, over the {limit}-byte cap")
        self.size = size
        self.limit = limit
        self.events = events


class SSEParser:
    """Feed it bytes as they arrive; it returns the events completed by them."""

    __slots__ = ("_buf", "_data", "_event", "_id", "_bom_checked", "_max", "_over", "_skip_lf")

    def __init__(self, max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        self._buf = b""
        self._data: list[bytes] = []
        self._event: str | None = None
        self._id: str | None = None
        self._bom_checked = False
        self._max = max_event_bytes
        #: (size, events dispatched before it) once an event passed the cap
        self._over: tuple[int, int] | None = None
        #: the last read ended in a CR: an LF first in the next read belongs to it
        self._skip_lf = False

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """The events completed by ``chunk``; ``EventTooLarge`` once the cap is passed."""
        if self._over is not None:
            raise EventTooLarge(self._over[0], self._max, [])
        buf = self._buf + chunk if self._buf else chunk
        if not self._bom_checked and buf:
            if buf.startswith(b"\xef\xbb\xbf"):
                buf = buf[3:]
            elif b"\xef\xbb\xbf".startswith(buf[:3]) and len(buf) < 3:
                self._buf = buf
                return []
            self._bom_checked = True
        if self._skip_lf and buf:
            self._skip_lf = False
            if buf[:1] == b"\n":
                buf = buf[1:]
        events: list[SSEEvent] = []
        if b"\r" not in buf:
            # the common case (LF only): one split instead of a regex search per line
            lines = buf.split(b"\n")
            self._buf = lines.pop()
            line_fn = self._line
            for line in lines:
                line_fn(line, events)
        else:
            pos = 0
            n = len(buf)
            search = _EOL.search
            while pos < n:
                m = search(buf, pos)
                if m is None:
                    break
                self._line(buf[pos : m.start()], events)
                pos = m.end()
                if pos == n and m.group() == b"\r":
                    # the line ended here; an LF first in the next read is its CRLF's rest
                    self._skip_lf = True
            self._buf = buf[pos:]
        if self._over is None and len(self._buf) <= self._max and not self._data:
            return events  # the common case: nothing pending, nothing over the cap
        return self._check(events)

    def _check(self, events: list[SSEEvent]) -> list[SSEEvent]:
        """The cap, on what is dispatched and what is still pending."""
        if self._over is None:
            pending = len(self._buf) + sum(map(len, self._data))
            if len(self._buf) <= self._max and pending - len(self._buf) <= self._max:
                return events
            self._over = (pending, len(events))
        size, before = self._over
        raise EventTooLarge(size, self._max, events[:before])

    def close(self) -> list[SSEEvent]:
        """End of stream: a last line without its end is a line, and an event still
        waiting for its blank line is dispatched (``EventTooLarge`` past the cap)."""
        if self._over is not None:
            return []
        events: list[SSEEvent] = []
        if self._buf:
            self._line(self._buf, events)
            self._buf = b""
        self._line(b"", events)  # the blank line the stream ended without
        if self._over is not None:
            raise EventTooLarge(self._over[0], self._max, events[: self._over[1]])
        return events

    @property
    def pending(self) -> bool:
        """Bytes or fields received that no dispatched event has consumed."""
        return bool(self._buf) or bool(self._data)

    def _line(self, line: bytes, events: list[SSEEvent]) -> None:
        if line[:6] == b"data: ":  # the hot path: exactly what the general case does
            self._data.append(line[6:])
            return
        if not line:
            data = self._data
            if data:
                joined = data[0] if len(data) == 1 else b"\n".join(data)
                if len(joined) > self._max and self._over is None:
                    self._over = (len(joined), len(events))
                if joined:  # the spec dispatches no event whose data is empty ("data:")
                    events.append(SSEEvent(joined, self._event, self._id))
                self._data = []
            self._event = None
            return
        if line[0] == 0x3A:  # ":" comment
            return
        colon = line.find(b":")
        if colon < 0:
            field, value = line, b""
        else:
            field = line[:colon]
            value = line[colon + 1 :]
            if value[:1] == b" ":
                value = value[1:]
        if field == b"data":
            self._data.append(value)
        elif field == b"event":
            self._event = value.decode("utf-8", "replace")
        elif field == b"id":
            if b"\x00" not in value:
                self._id = value.decode("utf-8", "replace")
        # "retry" and unknown fields are ignored: a benchmark client never reconnects.
