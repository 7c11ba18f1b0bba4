"""Score candidates against a reference on the same prompts (``crossover quality``).

1. Each prompt is tokenized by the reference (its token ids are the context both sides
   get) and the reference generates ``max_tokens`` greedily, with top-K log-probs.
2. Each candidate generates from the same context, in windows (``FIRST_WINDOW``
   tokens, doubled while it agrees). Positions are compared while the greedy tokens
   agree; at the first disagreement that position is still scored (the context was the
   same), then the candidate is **re-anchored**: it continues from the reference's
   context up to and including the reference's token there (one more request). So
   every reference position is scored once, with the same context on both sides
   (teacher forcing through an API that has no prompt log-probs), and the first
   divergence of the free run is kept per prompt. A window's context reaches the engine
   as a prompt (prefill) where the reference decoded it token by token; the two paths'
   arithmetic differs a little, so even identical weights show a small KL: score the
   reference against a second server of itself to know that floor.
3. Per candidate: top-1 agreement and mean KL over all scored positions, 95% intervals
   by bootstrap over prompts, the median first-divergence position.

A reference that gives no token ids cannot re-anchor a candidate: its prompts are scored
up to the first divergence only (``reanchored`` false in the result).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

import aiohttp
from pydantic import BaseModel, Field

from crossover.quality.api import ApiError, Endpoint, complete, tokenize
from crossover.quality.score import (
    Position,
    PromptScore,
    agreement,
    bootstrap,
    compare_run,
    mean_kl,
)

SCHEMA = "crossover.quality/1"
#: re-anchors per prompt at most (a candidate that disagrees everywhere costs one
#: request per position otherwise)
MAX_REANCHORS = 512
#: tokens asked for after a re-anchor, doubled while the candidate agrees: a candidate
#: that diverges often generates at most this much past each divergence, one that agrees
#: gets long requests
FIRST_WINDOW = 16
MAX_WINDOW = 256


class EndpointInfo(BaseModel):
    name: str
    url: str
    engine: str
    model: str | None = None


class CandidateResult(BaseModel):
    name: str
    url: str
    engine: str
    model: str | None = None
    scored_tokens: int
    top1_agreement: float | None
    mean_kl: float | None = Field(description="nats/token; null where logprobs are missing")
    kl_tokens: int
    first_divergence_p50: float | None = Field(
        description="median over prompts that diverged of the first position that did"
    )
    prompts_diverged: int
    reanchors: int
    reanchored: bool
    interval: dict[str, list[float] | None] = Field(
        description="95% bootstrap intervals over prompts: top1_agreement, mean_kl"
    )
    errors: list[str] = Field(default_factory=list)


class QualityResult(BaseModel):
    schema_: str = Field(default=SCHEMA, alias="schema")
    created_at: str
    reference: EndpointInfo
    prompts: int
    max_tokens: int
    top_logprobs: int
    reference_tokens: int
    candidates: list[CandidateResult]
    wall_s: float

    model_config = {"populate_by_name": True}

    def to_json_dict(self) -> dict[str, object]:
        return self.model_dump(by_alias=True)


Progress = Callable[[str, int], None]  # (what, how many done)


async def _reference(
    session: aiohttp.ClientSession,
    ref: Endpoint,
    prompts: Sequence[str],
    max_tokens: int,
    k: int,
    gate: asyncio.Semaphore,
    progress: Progress | None,
) -> tuple[list[list[int]], list[list[Position]]]:
    contexts: list[list[int]] = [[] for _ in prompts]
    outs: list[list[Position]] = [[] for _ in prompts]

    async def one(i: int) -> None:
        async with gate:
            contexts[i] = await tokenize(session, ref, prompts[i])
            outs[i] = await complete(session, ref, contexts[i], max_tokens, k)
        if progress is not None:
            progress(ref.name, 1)

    await asyncio.gather(*(one(i) for i in range(len(prompts))))
    return contexts, outs


async def _candidate(
    session: aiohttp.ClientSession,
    cand: Endpoint,
    contexts: Sequence[list[int]],
    refs: Sequence[list[Position]],
    k: int,
    gate: asyncio.Semaphore,
    progress: Progress | None,
) -> tuple[list[PromptScore], bool, list[str]]:
    scores = [PromptScore() for _ in refs]
    errors: list[str] = []
    can_anchor = all(isinstance(p.token, int) for r in refs for p in r)

    async def one(i: int) -> None:
        ref = refs[i]
        s = scores[i]
        start = 0
        window = FIRST_WINDOW
        try:
            while start < len(ref):
                context = contexts[i] + [int(p.token) for p in ref[:start]]
                want = len(ref) - start if not can_anchor else min(window, len(ref) - start)
                async with gate:
                    got = await complete(session, cand, context, want, k)
                diverged = compare_run(s, start, ref, got)
                if diverged is None:
                    if len(got) < want or not can_anchor:
                        break  # the candidate stopped early: what came is scored
                    start += len(got)  # agreed: the context is still the reference's
                    window = min(window * 2, MAX_WINDOW)
                    continue
                if not can_anchor or s.reanchors >= MAX_REANCHORS:
                    break
                s.reanchors += 1
                start = diverged + 1
                window = FIRST_WINDOW
        except ApiError as exc:
            errors.append(f"prompt {i}: {exc}")
        if progress is not None:
            progress(cand.name, 1)

    await asyncio.gather(*(one(i) for i in range(len(refs))))
    return scores, can_anchor, errors


def summarize(
    cand: Endpoint, scores: Sequence[PromptScore], reanchored: bool, errors: list[str]
) -> CandidateResult:
    a = bootstrap(scores, "agreement")
    kl = bootstrap(scores, "kl")
    firsts = [s.first_divergence for s in scores if s.first_divergence is not None]
    return CandidateResult(
        name=cand.name,
        url=cand.url,
        engine=cand.engine,
        model=cand.model,
        scored_tokens=sum(s.scored for s in scores),
        top1_agreement=agreement(scores),
        mean_kl=mean_kl(scores),
        kl_tokens=sum(s.kl_n for s in scores),
        first_divergence_p50=statistics.median(firsts) if firsts else None,
        prompts_diverged=len(firsts),
        reanchors=sum(s.reanchors for s in scores),
        reanchored=reanchored,
        interval={
            "top1_agreement": [a.low, a.high] if a else None,
            "mean_kl": [kl.low, kl.high] if kl else None,
        },
        errors=errors[:20],
    )


async def measure_quality(
    ref: Endpoint,
    candidates: Sequence[Endpoint],
    prompts: Sequence[str],
    max_tokens: int = 256,
    top_logprobs: int = 5,
    concurrency: int = 4,
    progress: Progress | None = None,
    timeout_s: float = 600.0,
) -> QualityResult:
    t0 = time.perf_counter()
    gate = asyncio.Semaphore(concurrency)
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    headers = {"Content-Type": "application/json"}
    async with aiohttp.ClientSession(timeout=timeout, headers=headers) as session:
        contexts, refs = await _reference(
            session, ref, prompts, max_tokens, top_logprobs, gate, progress
        )
        results = []
        for cand in candidates:
            scores, anchored, errors = await _candidate(
                session, cand, contexts, refs, top_logprobs, gate, progress
            )
            results.append(summarize(cand, scores, anchored, errors))
    return QualityResult(
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        reference=EndpointInfo(name=ref.name, url=ref.url, engine=ref.engine, model=ref.model),
        prompts=len(prompts),
        max_tokens=max_tokens,
        top_logprobs=top_logprobs,
        reference_tokens=sum(len(r) for r in refs),
        candidates=results,
        wall_s=round(time.perf_counter() - t0, 1),
    )
