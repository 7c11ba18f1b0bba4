"""The HTTP/1.1 response head, parsed from the bytes of the first reads of a response
(``parse_head``) for the lean transport (``leanhttp``), which feeds the body that
follows straight into ``ChunkedSSEParser``. What the head says the lean transport cannot
read (a Content-Encoding, a Transfer-Encoding other than chunked, not HTTP/1.x) is a
``HeadError``.

(This module was ``lean.py``, home of the prototype client measured in
``docs/results/transport_parsers.md``; the prototype became ``leanhttp`` and only the
head parser stayed here.)
"""

from __future__ import annotations

from dataclasses import dataclass

#: a response head longer than this is an error
MAX_HEAD_BYTES = 64 * 1024


class HeadError(Exception):
    """The response head is not HTTP/1.1 this client can read."""


@dataclass(frozen=True, slots=True)
class ResponseHead:
    status: int
    reason: str
    #: header names lower-cased; a repeated header's values joined with ", "
    headers: dict[str, str]
    #: an HTTP/1.0 response: its connection closes unless it says keep-alive
    http10: bool = False

    @property
    def chunked(self) -> bool:
        te = self.headers.get("transfer-encoding", "")
        return te.rsplit(",", 1)[-1].strip().lower() == "chunked"

    @property
    def content_length(self) -> int | None:
        value = self.headers.get("content-length")
        if value is None or self.chunked:
            return None
        if not value.strip().isdigit():
            raise HeadError(f"a malformed Content-Length {value[:40]!r}")
        return int(value)

    def check_codings(self) -> None:
        """``HeadError`` for a body coded other than chunked (the lean transport decodes none)."""
        te = self.headers.get("transfer-encoding")
        if te is not None and te.strip().lower() != "chunked":
            raise HeadError(f"Transfer-Encoding {te[:40]!r}: only chunked is read")
        ce = self.headers.get("content-encoding")
        if ce is not None and ce.strip().lower() != "identity":
            raise HeadError(f"Content-Encoding {ce[:40]!r}: the lean transport decodes none")

    @property
    def keep_alive(self) -> bool:
        connection = self.headers.get("connection", "").lower()
        return "keep-alive" in connection if self.http10 else "close" not in connection

    @property
    def event_stream(self) -> bool:
        ctype = self.headers.get("content-type", "")
        return ctype.split(";", 1)[0].strip().lower() == "text/event-stream"


def parse_head(buf: bytes) -> tuple[ResponseHead, int] | None:
    """The head at the start of ``buf`` and its length, or None while it is incomplete."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        if len(buf) > MAX_HEAD_BYTES:
            raise HeadError(f"no end of the response head in {MAX_HEAD_BYTES} bytes")
        return None
    lines = buf[:end].decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise HeadError(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise HeadError(f"a malformed header line: {line[:80]!r}")
        key = name.lower()
        value = value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    reason = parts[2] if len(parts) > 2 else ""
    return ResponseHead(int(parts[1]), reason, headers, parts[0] == "HTTP/1.0"), end + 4
