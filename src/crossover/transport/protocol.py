"""What the protocol says about a response that is not a good event stream.

Off the hot path: each function runs once per response, or once when an event breaks
it, never per chunk. ``stream_request`` (either transport's) turns the answers into a
failed record.
"""

from __future__ import annotations

import aiohttp
import orjson

from crossover.records.model import ErrorKind


def is_event_stream(resp: aiohttp.ClientResponse) -> bool:
    """A declared ``text/event-stream`` (parameters such as a charset allowed)."""
    return resp.headers.get("Content-Type") is not None and resp.content_type == "text/event-stream"


async def not_a_stream(resp: aiohttp.ClientResponse, limit: int) -> tuple[ErrorKind, str]:
    """Why a 200 to a streaming request is no event stream: one JSON body (the server
    ignored ``stream``), a JSON error, or another Content-Type. Reads at most a little
    over ``limit`` bytes, and only of a JSON body."""
    declared = resp.headers.get("Content-Type")
    if not is_json(declared, resp.content_type):
        return why_not_a_stream(declared, None, limit)
    body = b""
    while len(body) <= limit:  # the whole body, unless it is larger than the cap
        data = await resp.content.readany()
        if not data:
            break
        body += data
    return why_not_a_stream(declared, body, limit)


def media_type(declared: str | None) -> str:
    """The media type of a Content-Type value, lower-cased, parameters dropped (what
    aiohttp's ``content_type`` says; no header is ``application/octet-stream``)."""
    if not declared:
        return "application/octet-stream"
    return declared.split(";", 1)[0].strip().lower()


def is_json(declared: str | None, media: str) -> bool:
    """A declared ``application/json``: the only body ``not_a_stream`` reads."""
    return declared is not None and media == "application/json"


def why_not_a_stream(declared: str | None, body: bytes | None, limit: int) -> tuple[ErrorKind, str]:
    """``not_a_stream``'s answer from the Content-Type and the body read (None: not read,
    the Content-Type alone decides); shared by both transports so they say the same."""
    if body is None:
        return (
            "content_type",
            f"HTTP 200 with Content-Type {declared or '(none)'}, not text/event-stream",
        )
    obj: object = None
    if len(body) <= limit:
        try:
            obj = orjson.loads(body)
        except orjson.JSONDecodeError:
            obj = None
    if isinstance(obj, dict) and "error" in obj and not obj.get("choices"):
        return "error_event", f"HTTP 200 carrying an error: {obj['error']}"
    what = "a completion" if isinstance(obj, dict) and obj.get("choices") else "JSON"
    return (
        "not_streamed",
        f"the server answered the streaming request with one {what} body "
        f"(Content-Type {declared}), not an event stream",
    )


def starts_like_json(head: bytes | None) -> bool:
    """The body began as a JSON object: under an event-stream label, no event was sent."""
    return head is not None and head.lstrip()[:1] == b"{"


def bad_event(raw: bytes) -> tuple[ErrorKind, str]:
    """Why an event's data did not parse as a JSON object."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return (
            "undecodable",
            f"event data is not UTF-8 ({exc.reason} at byte {exc.start}): {raw[:80]!r}",
        )
    return "malformed", f"malformed event: {raw[:120]!r}"


def is_decoding_error(exc: BaseException) -> bool:
    """aiohttp's payload error for a body its Content-Encoding cannot decode."""
    from aiohttp.http_exceptions import ContentEncodingError

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ContentEncodingError) or "content-encoding" in str(seen).lower():
            return True
        seen = seen.__cause__
    return False
