"""Both transports against the HTTP server vLLM and SGLang answer through: uvicorn (a
Starlette ``StreamingResponse``), with each of its HTTP/1.1 implementations (``h11``, pure
Python, and ``httptools``, the one uvicorn picks where it is installed, as vLLM installs
it). The event stream has vLLM's completions shape: one write per token, a usage event
with no choices, ``[DONE]``. Each transport must read every token as its own delivery,
across two rounds on one session, and record what the other records."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import orjson
import pytest

from crossover.engines.registry import dialect as get_dialect
from crossover.records.model import RequestRecord
from crossover.transport.client import StreamOptions, TransportName, make_client
from crossover.transport.http import Timeouts

uvicorn = pytest.importorskip("uvicorn")
starlette_requests = pytest.importorskip("starlette.requests")
starlette_responses = pytest.importorskip("starlette.responses")
starlette_applications = pytest.importorskip("starlette.applications")
starlette_routing = pytest.importorskip("starlette.routing")

TOKENS = 24
STREAMS = 16
ROUNDS = 2


def _event(i: int, n: int) -> bytes:
    obj = {
        "id": "cmpl-1", "object": "text_completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "text": f" w{i}", "logprobs": None,
                     "finish_reason": "length" if i == n - 1 else None, "stop_reason": None}],
        "usage": None,
    }  # fmt: skip
    return b"data: " + orjson.dumps(obj) + b"\n\n"


async def completions(request: Any) -> Any:
    body = await request.json()
    n = int(body["max_tokens"])

    async def stream() -> AsyncIterator[bytes]:
        for i in range(n):
            yield _event(i, n)
            await asyncio.sleep(0.002)  # one write per token, as an engine's decode steps
        usage = {"prompt_tokens": 3, "completion_tokens": n, "total_tokens": n + 3}
        done = {"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "m",
                "choices": [], "usage": usage}  # fmt: skip
        yield b"data: " + orjson.dumps(done) + b"\n\n"
        yield b"data: [DONE]\n\n"

    return starlette_responses.StreamingResponse(stream(), media_type="text/event-stream")


@pytest.fixture(scope="module", params=["h11", "httptools"])
def server(request: pytest.FixtureRequest) -> Iterator[str]:
    """A uvicorn server in its own thread, with the HTTP implementation asked for: its URL."""
    app = starlette_applications.Starlette(
        routes=[starlette_routing.Route("/v1/completions", completions, methods=["POST"])]
    )
    config = uvicorn.Config(app, host="127.0.0.1", port=0, http=request.param, log_level="error",
                      lifespan="off", loop="asyncio")  # fmt: skip
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    for _ in range(500):
        if srv.started:
            break
        threading.Event().wait(0.01)
    assert srv.started, "uvicorn did not start"
    port = srv.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(10)


def _fetch(transport: TransportName, url: str) -> list[RequestRecord]:
    async def go() -> list[RequestRecord]:
        out: list[RequestRecord] = []
        timeouts = Timeouts(first_token_s=10, gap_s=10, total_s=30)
        body = {"model": "m", "prompt": "hi", "max_tokens": TOKENS, "stream": True}
        async with make_client(transport) as session:
            for r in range(ROUNDS):  # the second round reuses the first round's connections
                recs = [
                    RequestRecord(index=r * STREAMS + i, expected_output_tokens=TOKENS, t_send_ns=0)
                    for i in range(STREAMS)
                ]

                def one(rec: RequestRecord) -> Any:
                    options = StreamOptions(get_dialect("vllm"), "completions", timeouts, True)
                    return session.stream(f"{url}/v1/completions", body, rec, options)

                await asyncio.gather(*(one(rec) for rec in recs))
                out += recs
        return out

    return asyncio.run(asyncio.wait_for(go(), 60))


def test_a_uvicorn_stream_reads_alike_on_both_transports(
    server: str, transport: TransportName
) -> None:
    records = _fetch(transport, server)
    want = "".join(f" w{i}" for i in range(TOKENS))
    for rec in records:
        assert rec.ok, (rec.error_kind, rec.error)
        assert rec.text == want
        # one delivery per token: uvicorn writes each yield as its own chunk
        assert len(rec.chunk_arrival_ns) == TOKENS
        assert rec.chunk_arrival_ns == sorted(rec.chunk_arrival_ns)
        assert rec.finish_reason == "length"
        assert (rec.completion_tokens, rec.prompt_tokens, rec.total_tokens) == (TOKENS, 3, 27)
        assert rec.saw_done
        assert rec.t_first_ns is not None and rec.t_done_ns is not None
        assert rec.t_first_ns <= rec.chunk_arrival_ns[-1] <= rec.t_done_ns
