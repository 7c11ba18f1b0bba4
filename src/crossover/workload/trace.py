"""Replaying a request trace: arrival times and lengths from a file, the work still matched.

The format is Mooncake's (one JSON object per line)::

    {"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, ...]}

``timestamp`` is the arrival in milliseconds from the trace's start, ``input_length`` and
``output_length`` are token counts, and ``hash_ids`` (optional) name the prompt's blocks of
``block_tokens`` tokens (512 in Mooncake's traces): two requests that list the same id share
that block's text, so a prefix cache sees what it saw in production. Every engine replays the
same prompts at the same times (scaled by ``speed``), each request forced to its own output
length and verified against it; a request the client could not send on time keeps its
scheduled time, so ``queue_ms`` shows the delay.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import orjson

from crossover.errors import UsageError
from crossover.workload.prompts import Prompt, fit_to_tokens, random_words
from crossover.workload.tokenizers import Tokenizer


@dataclass(frozen=True, slots=True)
class TraceRequest:
    timestamp_ms: float
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class Trace:
    path: Path
    requests: tuple[TraceRequest, ...]

    def offsets_ns(self, speed: float = 1.0) -> list[int]:
        """Each request's send time after the first one's, at ``speed`` x the trace's pace."""
        t0 = self.requests[0].timestamp_ms
        return [int((r.timestamp_ms - t0) * 1e6 / speed) for r in self.requests]

    def mean_rate(self, speed: float = 1.0) -> float:
        """Requests per second over the trace's span (at ``speed``)."""
        span_s = (self.requests[-1].timestamp_ms - self.requests[0].timestamp_ms) / 1e3
        n = len(self.requests)
        return (n - 1) / span_s * speed if span_s > 0 and n > 1 else float(n) * speed

    def mean_output(self) -> int:
        return max(1, round(sum(r.output_length for r in self.requests) / len(self.requests)))

    def mean_input(self) -> int:
        return max(1, round(sum(r.input_length for r in self.requests) / len(self.requests)))


def _positive_int(obj: dict[str, object], key: str, where: str) -> int:
    v = obj.get(key)
    if type(v) is not int or v < 1:
        raise UsageError(f"{where}: {key!r} must be a positive integer, got {v!r}")
    return v


@lru_cache(maxsize=8)
def _read(path: Path, mtime_ns: int) -> Trace:
    try:
        lines = path.read_bytes().splitlines()
    except OSError as exc:
        raise UsageError(f"cannot read trace {path}: {exc.strerror}") from None
    out: list[TraceRequest] = []
    last = float("-inf")
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{n}"
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            raise UsageError(f"{where}: not a JSON object") from None
        if not isinstance(obj, dict):
            raise UsageError(f"{where}: not a JSON object")
        ts = obj.get("timestamp")
        if type(ts) not in (int, float) or ts < 0:  # type: ignore[operator]
            raise UsageError(f"{where}: 'timestamp' (ms) must be a number >= 0, got {ts!r}")
        assert isinstance(ts, int | float)
        if ts < last:
            raise UsageError(f"{where}: timestamps must not go back ({ts} after {last})")
        last = float(ts)
        ids = obj.get("hash_ids", [])
        if not isinstance(ids, list) or any(type(i) is not int for i in ids):
            raise UsageError(f"{where}: 'hash_ids' must be a list of integers")
        out.append(
            TraceRequest(
                float(ts),
                _positive_int(obj, "input_length", where),
                _positive_int(obj, "output_length", where),
                tuple(ids),
            )
        )
    if not out:
        raise UsageError(f"trace {path} holds no requests")
    return Trace(path, tuple(out))


def read_trace(path: Path) -> Trace:
    """The trace in ``path`` (read once per file version); a bad line is one clear error
    naming the file and line."""
    try:
        mtime = path.stat().st_mtime_ns
    except OSError as exc:
        raise UsageError(f"cannot read trace {path}: {exc.strerror}") from None
    return _read(path, mtime)


def trace_prompts(
    trace: Trace,
    count: int,
    seed: int,
    tokenizer: Tokenizer | None,
    block_tokens: int,
    first: int = 0,
) -> list[Prompt]:
    """Prompts ``first`` .. ``first + count - 1`` of the trace (cycled past its end): the
    texts of the request's blocks (the same text for the same id in every request), then
    its own words, cut to ``input_length`` tokens; ``output_tokens`` its output length."""
    blocks: dict[int, str] = {}

    def block(h: int) -> str:
        if h not in blocks:
            rng = random.Random(f"crossover-block:{seed}:{h}")
            text = random_words(rng, block_tokens)
            if tokenizer is not None:
                text = fit_to_tokens(text, block_tokens, tokenizer, rng)
            blocks[h] = text
        return blocks[h]

    prompts = []
    for i in range(first, first + count):
        req = trace.requests[i % len(trace.requests)]
        rng = random.Random(f"crossover:{seed}:{i}")
        head = " ".join(block(h) for h in req.hash_ids)
        own = max(0, req.input_length - len(req.hash_ids) * block_tokens)
        text = " ".join(x for x in (head, random_words(rng, max(own, 1))) if x)
        if tokenizer is None:
            words = text.split()[: req.input_length]
            prompts.append(Prompt(i, " ".join(words), None, req.output_length))
            continue
        fitted = fit_to_tokens(text, req.input_length, tokenizer, rng)
        prompts.append(Prompt(i, fitted, req.input_length, req.output_length))
    return prompts
