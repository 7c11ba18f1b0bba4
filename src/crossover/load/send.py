"""One prompt -> one streamed request -> one raw record: dialect and transport glued.

Shared by the in-process load and the worker processes, so a request is built,
timed and recorded the same way wherever it is sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from crossover.dialects import RequestSpec
from crossover.engines.registry import dialect as get_dialect
from crossover.records.model import RequestRecord
from crossover.spec.run import RunConfig
from crossover.transport.client import StreamOptions, Transport
from crossover.workload import Prompt


def _interrupted() -> str:
    return "interrupted"


def stream_options(config: RunConfig, keep_text: bool) -> StreamOptions:
    """How a run reads each response: its dialect, endpoint, timeouts and event cap."""
    return StreamOptions(
        get_dialect(config.dialect),
        config.endpoint,
        config.timeouts,
        keep_text,
        config.max_event_bytes,
    )


@dataclass(frozen=True, slots=True)
class PromptSender:
    """Sends prompts on a run's ``transport``: what every request of one load loop shares.

    A request cut off by cancellation (the engine died, Ctrl-C) after it was sent is
    marked failed (``cancel_reason()`` says why) and handed to ``on_cancel`` before the
    cancellation goes on, so requests sent always equal requests recorded. ``worker``:
    the worker process whose records these are."""

    transport: Transport
    config: RunConfig
    options: StreamOptions
    worker: int = 0
    on_cancel: Callable[[RequestRecord], None] | None = None
    cancel_reason: Callable[[], str] = _interrupted

    async def send(
        self,
        prompt: Prompt,
        index: int,
        warmup: bool,
        t_scheduled_ns: int | None,
        replica: int | None = None,
        reused: bool = False,
    ) -> RequestRecord:
        """Send ``prompt`` and return its record. ``replica`` (``config.replica_for``)
        picks the base URL among ``config.urls``; ``None``: ``config.url``. ``reused``:
        the prompt was sent before in the run (the record says so: ``prompt_reused``)."""
        config = self.config
        # its own N when the shape draws one; a warm-up request may ask for fewer
        n_out = prompt.output_tokens or config.output_tokens
        if warmup and config.warmup_output_tokens is not None:
            n_out = config.warmup_output_tokens
        spec = RequestSpec(config.model, prompt.text, n_out, config.endpoint, prompt.messages)
        rec = RequestRecord(
            index=index,
            worker=self.worker,
            warmup=warmup,
            prompt_id=prompt.id,
            expected_prompt_tokens=prompt.tokens,
            expected_output_tokens=n_out,
            t_scheduled_ns=t_scheduled_ns,
            t_send_ns=0,
            replica=replica,
            prompt_reused=reused,
        )
        base = config.url if replica is None else config.urls[replica]
        options = self.options
        dialect = options.dialect
        try:
            await self.transport.stream(base + dialect.path(spec), dialect.body(spec), rec, options)
        except asyncio.CancelledError:
            if rec.t_send_ns and self.on_cancel is not None:
                rec.error_kind = "connection_error"
                rec.error = f"cancelled: {self.cancel_reason()}"
                self.on_cancel(rec)
            raise
        return rec


async def open_replica_connections(transport: Transport, config: RunConfig, count: int) -> None:
    """``open_connections`` for ``count`` streams spread round robin over the replicas,
    each GET bounded by twice the connect timeout."""
    urls = config.replica_urls
    # a convenience, not a measurement: each GET is given up after twice the connect
    # timeout (to connect, and for its answer), so a server that accepts slowly holds
    # the run no longer than that (issue 43: 216 s with no read limit)
    limit_s = 2 * config.timeouts.connect_s
    for k, url in enumerate(urls):
        share = count // len(urls) + (1 if k < count % len(urls) else 0)
        if share:
            await transport.open_connections(url, share, limit_s=limit_s)
