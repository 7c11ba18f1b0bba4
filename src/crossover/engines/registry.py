"""The engine registry: the only list of engine names.

Each engine is one module under ``crossover.engines.specs`` exporting ``SPEC`` (an
``EngineSpec``); adding an engine is adding its module to ``_MODULES`` (docs/architecture.md,
"Adding an engine"). The registry is looked up where a name is used (``get``), never
imported by the modules the specs import, so there is no import cycle: a config is
checked against it where it is built (``engine_config``). An unknown name is one
``UnknownEngine`` error naming the known ones: no caller has an ``else`` branch for the
engines it forgot.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

from crossover.dialects import Dialect, OpenAIDialect
from crossover.engines.config import EngineConfig
from crossover.engines.spec import EngineSpec
from crossover.engines.specs import (
    llamacpp,
    lmdeploy,
    sglang,
    transformers,
    triton,
    trtllm,
    vllm,
)
from crossover.errors import UsageError, unknown_choice, validation_line

# The order is the order engines are listed in (the advisor's candidates among them).
_MODULES: tuple[ModuleType, ...] = (llamacpp, vllm, sglang, trtllm, transformers, triton, lmdeploy)


class UnknownEngine(UsageError):
    """An engine name the registry does not hold."""


def _collect() -> dict[str, EngineSpec]:
    out: dict[str, EngineSpec] = {}
    for module in _MODULES:
        spec: EngineSpec = module.SPEC
        if spec.name in out:
            raise RuntimeError(f"engine {spec.name!r} is registered twice")
        out[spec.name] = spec
    return out


ENGINES: dict[str, EngineSpec] = _collect()


def _dialects() -> dict[str, Dialect]:
    out: dict[str, Dialect] = {OpenAIDialect().name: OpenAIDialect()}
    for spec in ENGINES.values():
        known = out.setdefault(spec.dialect.name, spec.dialect)
        if known != spec.dialect:
            raise RuntimeError(f"two dialects are named {spec.dialect.name!r}")
    return out


#: every request dialect by name: the plain OpenAI one and each engine's (a run against a
#: URL names one with ``--engine``)
DIALECTS: dict[str, Dialect] = _dialects()


def dialect_of(name: str) -> str | None:
    """The dialect a URL target named ``name`` is spoken to in: a dialect's own name, or
    the one an engine speaks (``lmdeploy`` -> its spec's); None when neither knows it."""
    if name in DIALECTS:
        return name
    spec = ENGINES.get(name)
    return spec.dialect.name if spec is not None else None


#: what ``--engine`` accepts for a URL: every dialect and every engine (by its dialect)
ENGINE_OR_DIALECT: tuple[str, ...] = tuple(sorted({*DIALECTS, *ENGINES}))


def dialect(name: str) -> Dialect:
    """The dialect named ``name``, or the one the engine ``name`` speaks; a ``UsageError``
    naming the known ones."""
    known = dialect_of(name)
    if known is None:
        raise UsageError(unknown_choice("engine dialect", name, ENGINE_OR_DIALECT))
    return DIALECTS[known]


def names() -> tuple[str, ...]:
    """Every engine crossover can launch, in listing order."""
    return tuple(ENGINES)


def get(name: str, what: str = "engine") -> EngineSpec:
    """The spec of ``name``; ``UnknownEngine`` (a usage error) naming the known ones."""
    try:
        return ENGINES[name]
    except KeyError:
        raise UnknownEngine(unknown_choice(what, name, ENGINES)) from None


def specs() -> Iterator[EngineSpec]:
    return iter(ENGINES.values())


def with_trait(trait: str) -> tuple[str, ...]:
    """Names of the engines whose spec has ``trait`` (``plan``, ``advise``, ``quality``)."""
    return tuple(s.name for s in ENGINES.values() if getattr(s, trait) is not None)


def detect_order() -> list[EngineSpec]:
    """Specs in the order their log patterns are tried (``detect_first`` ones first)."""
    return sorted(ENGINES.values(), key=lambda s: not s.detect_first)


def counters() -> tuple[str, ...]:
    """The engines' generated-token counters (the witness), in listing order."""
    return tuple(s.counter for s in ENGINES.values() if s.counter is not None)


def metric_names() -> tuple[str, ...]:
    """Every Prometheus series a sweep keeps, over all engines."""
    return tuple(n for s in ENGINES.values() for n in s.metric_names)


def queue_series() -> tuple[tuple[str, str | None, str | None], ...]:
    """Each engine's waiting-requests gauge, its running-requests gauge and its KV-cache
    usage gauge (None where it has none), for the engines that declare a waiting gauge,
    in listing order."""
    return tuple(
        (s.waiting_metric, s.running_metric, s.kv_usage_metric)
        for s in ENGINES.values()
        if s.waiting_metric is not None
    )


def kv_series() -> tuple[tuple[str, str | None], ...]:
    """Each engine's KV-cache usage gauge and its waiting-requests gauge (None where it has
    none), for the engines that declare a usage gauge, in listing order."""
    return tuple(
        (s.kv_usage_metric, s.waiting_metric)
        for s in ENGINES.values()
        if s.kv_usage_metric is not None
    )


def engine_config(**fields: object) -> EngineConfig:
    """An ``EngineConfig`` of a known engine; a mistake is one ``UsageError`` line."""
    from pydantic import ValidationError

    get(str(fields.get("engine")))
    try:
        return EngineConfig.model_validate(fields)
    except ValidationError as exc:
        line = validation_line(exc, model=EngineConfig)
        raise UsageError(f"bad engine config: {line}") from None
