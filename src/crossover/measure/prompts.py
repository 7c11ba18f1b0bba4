"""A run's prompts: its tokenizer, the deterministic prompt sequence (synthetic, dataset,
trace or sessions), how many to build before the level, the feed that builds more as a
duration run goes (:class:`PromptFeed`), and the chat template's tokens per turn."""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Callable, Sequence
from dataclasses import replace

from crossover import defaults
from crossover.engines.registry import dialect as get_dialect
from crossover.spec.run import RunConfig
from crossover.workload import (
    Prompt,
    ServerTokenizer,
    Tokenizer,
    dataset_prompts,
    load_tokenizer,
    synthetic_prompts,
)


def choose_tokenizer(config: RunConfig) -> Tokenizer | None:
    if config.tokenizer:
        return load_tokenizer(config.tokenizer)
    if get_dialect(config.dialect).server_tokenize:
        server = ServerTokenizer(config.url, config.model)
        if server.available():
            return server
    return None


def build_prompts(
    config: RunConfig, tokenizer: Tokenizer | None, count: int, first: int = 0
) -> list[Prompt]:
    """Prompts ``first`` .. ``first + count - 1`` of the run's deterministic sequence."""
    if config.sessions is not None:
        from crossover.workload.sessions import session_prompts

        assert config.input_tokens is not None
        return session_prompts(
            config.sessions,
            count,
            config.input_tokens,
            config.output_tokens,
            config.seed,
            tokenizer,
            first,
            input_lengths=config.input_lengths,
            output_lengths=config.output_lengths,
        )
    if config.trace is not None:
        from crossover.workload.trace import read_trace, trace_prompts

        return trace_prompts(
            read_trace(config.trace),
            count,
            config.seed,
            tokenizer,
            config.trace_block_tokens,
            first,
        )
    if config.prompts_file is not None:
        out = config.output_lengths
        replies = out.max if out is not None and out.dist == "dataset" else None
        prompts = dataset_prompts(
            config.prompts_file,
            count,
            config.input_tokens,
            tokenizer,
            config.seed,
            first,
            reply_cap=replies,
        )
        if out is None or replies is not None:
            return prompts
        return [replace(p, output_tokens=out.draw(config.seed, "output", p.id)) for p in prompts]
    assert config.input_tokens is not None
    return synthetic_prompts(
        count,
        config.input_tokens,
        config.seed,
        tokenizer,
        first,
        input_lengths=config.input_lengths,
        output_lengths=config.output_lengths,
        shared_prefix=config.shared_prefix,
    )


#: a duration or rate run keeps at least this many measured prompts per stream built
#: ahead of the request it sends (a rate run builds what its duration needs before it)
PROMPTS_AHEAD = 16


class PromptFeed:
    """The measured prompts of a level, built ahead as a duration or rate run goes, so
    every measured request sends a prompt the run never sent before (a prefix-caching
    engine would serve a repeated one from its cache: TTFT 8 ms for a true 30 in issue
    43). ``build(count, first)`` makes more (prompts ``first`` on, in a thread); None
    where the prompts were given (a sweep's slice): past them a prompt is sent again,
    marked ``prompt_reused`` on its record and counted in ``reused``."""

    def __init__(
        self,
        prompts: list[Prompt],
        n_measured: int,
        build: Callable[[int, int], list[Prompt]] | None,
        ahead: int = PROMPTS_AHEAD,
    ) -> None:
        self.prompts = prompts
        self.n_measured = max(1, min(n_measured, len(prompts)))
        self.build = build
        self.ahead = ahead
        self.extra: list[Prompt] = []
        self.next_first = len(prompts)  # ids after the measured and warm-up prompts
        self.task: asyncio.Future[list[Prompt]] | None = None
        self.reused = 0

    def warmup(self, i: int) -> Prompt:
        return self.prompts[(self.n_measured + i) % len(self.prompts)]

    def measured(self, i: int) -> tuple[Prompt, bool]:
        """Measured request ``i``'s prompt, and whether it was sent before."""
        self._keep_ahead(i)
        if i < self.n_measured:
            return self.prompts[i], False
        k = i - self.n_measured
        if k < len(self.extra):
            return self.extra[k], False
        self.reused += 1  # not built in time (or none can be): sent again
        return self.prompts[i % self.n_measured], True

    def _keep_ahead(self, i: int) -> None:
        """Build the next prompts in a thread once fewer than ``ahead`` are left."""
        left = self.n_measured + len(self.extra) - i
        if self.build is None or self.task is not None or left > self.ahead:
            return
        count = 2 * self.ahead
        build, first = self.build, self.next_first
        self.next_first += count
        task = asyncio.ensure_future(asyncio.to_thread(build, count, first))

        def done(t: asyncio.Future[list[Prompt]]) -> None:
            self.task = None
            if not t.cancelled() and t.exception() is None:
                self.extra += t.result()

        task.add_done_callback(done)
        self.task = task

    async def close(self) -> None:
        """Wait for a build in flight (its thread cannot be stopped, and the tokenizer it
        uses is the one that re-counts the level's text next)."""
        if self.task is not None:
            with contextlib.suppress(Exception):
                await self.task


def prompts_needed(config: RunConfig) -> int:
    """Measured prompts to build before the level: ``--requests``, else what a rate run
    will send in its duration, else (a closed loop for a duration) 16 per stream; a
    duration run builds more as it goes (``PromptFeed``)."""
    if config.requests:
        return config.requests
    floor = defaults.timed_prompts(config.concurrency)
    if config.rate_rps and config.duration_s:
        return max(floor, math.ceil(config.rate_rps * config.duration_s * 1.1))
    return floor


def templates_by_turn(
    count: Callable[[Sequence[tuple[str, str]]], int | None], prompts: list[Prompt], turns: int
) -> list[int] | None:
    """The chat template's tokens around each turn's history (``count``: a tokenizer's
    ``chat_template_tokens``): turn t sends 2t + 1 messages, each with its role's header,
    so a template adds more the later the turn. None where a turn's cannot be counted."""
    out: list[int] = []
    for t in range(turns):
        p = next((p for p in prompts if p.id % turns == t and p.messages), None)
        if p is None:
            break  # fewer requests than turns: the later turns are never sent
        assert p.messages is not None
        n = count(p.messages)
        if n is None:
            return None
        out.append(n)
    return out or None
