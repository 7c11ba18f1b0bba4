"""A run's summary around the load: its context, the samples kept beside its records
(the loop lag, the engine's counter), the counts witnessed after the level (the text
re-tokenized), and a stored run summarized again from its records (:func:`resummarize`)."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime

from crossover.engines.registry import dialect as get_dialect
from crossover.errors import UsageError
from crossover.metrics.run import RunContext, count_with_tokenizer, summarize
from crossover.metrics.summary import ClientFloor, EngineCounter, EngineInfo, LoopLag, RunSummary
from crossover.metrics.witness import CHUNK_ENCODES, retokenize
from crossover.records.database_file import damaged
from crossover.records.model import RequestRecord
from crossover.records.store import Store
from crossover.spec.run import RunConfig
from crossover.workload import ServerTokenizer, Tokenizer

#: the run's samples table keeps the loop lag under this source, for ``summarize``
LOOP_SAMPLE = "client_loop"


def make_context(
    config: RunConfig,
    tokenizer: Tokenizer | None,
    version: str | None,
    client_floor: ClientFloor | None = None,
    chat_template_tokens: int | None = None,
    chat_template_by_turn: list[int] | None = None,
) -> RunContext:
    return RunContext(
        mode=config.mode,
        output_tokens=config.output_tokens,
        endpoint=config.endpoint,
        engine=EngineInfo(name=config.dialect, url=config.url, model=config.model, version=version),
        started_at=datetime.now(UTC).isoformat(timespec="seconds"),
        concurrency=config.concurrency,
        rate_rps=config.rate_rps,
        input_tokens=config.input_tokens,
        prompts=(
            f"trace:{config.trace}"
            if config.trace
            else str(config.prompts_file)
            if config.prompts_file
            else "synthetic"
        ),
        seed=config.seed,
        arrival_seed=config.arrival_seed,
        tokenizer=tokenizer.name if tokenizer else None,
        expects_finish_reason=get_dialect(config.dialect).has_done_sentinel,
        allowed_failures=config.allowed_failures,
        slo=config.slo,
        client_floor=client_floor,
        workers=config.workers,
        transport=config.transport,
        chat_template_tokens=chat_template_tokens,
        chat_template_by_turn=chat_template_by_turn,
        shape=config.workload_shape(),
        turns=config.sessions.turns if config.sessions else None,
    )


#: the ``samples`` source holding a run's engine counter readings
ENGINE_COUNTER_SAMPLE = "engine_counter"


def count_and_retokenize(records: list[RequestRecord], tokenizer: Tokenizer) -> list[RequestRecord]:
    """After the level (in a thread): count what usage did not, re-tokenize what it did.

    A tokenizer that fails here (a server's ``/tokenize`` gone) leaves the rest without
    the text witness; returns the records it changed."""
    measured = [r for r in records if not r.warmup]
    missing = [r for r in measured if r.ok and r.completion_tokens is None]
    changed: list[RequestRecord] = []
    with contextlib.suppress(OSError, ValueError):
        count_with_tokenizer(missing, tokenizer.encode)
    changed += [r for r in missing if r.completion_tokens is not None]
    done: list[int] = []
    with contextlib.suppress(OSError, ValueError):
        # a local tokenizer encodes every chunk; a server's /tokenize is a round trip each
        server = isinstance(tokenizer, ServerTokenizer)
        budget = CHUNK_ENCODES if server else None
        # a local tokenizer counts the level's texts in one batch (the same counts)
        count_many = None if server else getattr(tokenizer, "count_many", None)
        retokenize(measured, tokenizer.encode, done, budget, count_many)
    changed += [measured[i] for i in done]
    return changed


def resummarize(store: Store, run_id: str) -> RunSummary:
    """Recompute a run's summary from its stored raw records."""
    row = store.run(run_id)
    if row is None:
        raise UsageError(f"no run {run_id} in {store.path}")
    engine = None
    loop: LoopLag | None = None
    try:
        ctx = RunContext.model_validate(row.context["context"])
        for source, _, data in store.samples(run_id):
            if source == ENGINE_COUNTER_SAMPLE:
                engine = EngineCounter.model_validate(data)
            elif source == LOOP_SAMPLE:
                loop = LoopLag.model_validate(data)
    except (KeyError, TypeError, ValueError) as exc:  # pydantic's ValidationError: a ValueError
        raise damaged(store.path, f"run {run_id}", exc) from None
    return summarize(store.records(run_id), ctx, engine, loop)


def run_title(key: str | None, s: RunSummary) -> tuple[str | None, str]:
    """(target, heading) of a stored run: a sweep's ``NAME|c=4|r=0`` names its target,
    level and repeat; a ``crossover run``'s names the engine and URL it measured."""
    if key and key.count("|") == 2:
        name, level, rep = key.split("|")
        return name, f"{name} {level} {rep}"
    return None, f"{s.engine.name} @ {s.engine.url}"
