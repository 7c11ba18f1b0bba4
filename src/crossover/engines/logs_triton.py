"""tritonserver's startup log, read whole: its tables and crossover's model lines.

What one line cannot give alone: the model table (``| Model | Version | Status |``, every
model with its state), the backend table (``| Backend | Path | Config |``), the instances
each model started (``TRITONBACKEND_ModelInstanceInitialize: <model>_<group>_<n>``, one
line per instance), and the line crossover's Python-backend models print at start-up
(``crossover-triton-model: {json}``: the hosted engine, the settings it was started with,
and the model's config as Triton handed it over: backend, decoupled, instance count),
mapped to crossover's canonical settings by the hosted engine's spec (``triton_hosted``).

Origins: triton-inference-server/server ``src/server.cc`` (the tables),
python_backend ``src/python_be.cc`` (instance lines), ``crossover.plan.triton_python``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from crossover.engines.launchrec import Fact

_SERVER = "triton-inference-server/server src/server.cc (model and backend tables)"
_PY_BE = "triton-inference-server/python_backend src/python_be.cc"
_CROSSOVER = "crossover.plan.triton_python (the model's settings line)"
SETTINGS_PREFIX = "crossover-triton-model:"
_ROW = re.compile(r"^\|\s*([^|]+?)\s*\|\s*([^|]+?)\s*\|\s*([^|]*?)\s*\|")
_INSTANCE = re.compile(r"TRITONBACKEND_ModelInstanceInitialize: (\S+?)_(\d+)_(\d+) \(")


def _fact(setting: str, value: Any, line: int, evidence: str, origin: str) -> Fact:
    return Fact(
        setting=setting,
        value=value,
        basis="log",
        verified=True,
        evidence=evidence[:300],
        line=line,
        origin=origin,
    )


def _tables(lines: list[str]) -> tuple[list[tuple[int, str, str, str]], list[tuple[int, str]]]:
    """(model rows (line, name, version, status), backend rows (line, name))."""
    models: list[tuple[int, str, str, str]] = []
    backends: list[tuple[int, str]] = []
    table: str | None = None
    for no, line in enumerate(lines, start=1):
        m = _ROW.match(line)
        if m is None:
            if not line.startswith("+"):
                table = None
            continue
        a, b, c = m.groups()
        if not a.strip():
            # a status's continuation rows (a failed model's traceback, one row per
            # line): the state is its first line
            continue
        if (a, b) == ("Model", "Version"):
            table = "models"
        elif a == "Backend" and b == "Path":
            table = "backends"
        elif table == "models":
            models.append((no, a, b, c))
        elif table == "backends":
            backends.append((no, a))
    return models, backends


def read_triton_log(lines: list[str]) -> dict[str, Fact]:
    facts: dict[str, Fact] = {}
    models, backends = _tables(lines)
    if models:
        value = ", ".join(f"{name}:{version}:{status}" for _, name, version, status in models)
        no = models[0][0]
        facts["triton_models"] = _fact("triton_models", value, no, lines[no - 1], _SERVER)
    if backends:
        value = ", ".join(name for _, name in backends)
        no = backends[0][0]
        facts["backend"] = _fact("backend", value, no, lines[no - 1], _SERVER)
    instances: dict[str, set[tuple[str, str]]] = {}
    first: dict[str, tuple[int, str]] = {}
    for no, line in enumerate(lines, start=1):
        if m := _INSTANCE.search(line):
            instances.setdefault(m.group(1), set()).add((m.group(2), m.group(3)))
            first.setdefault(m.group(1), (no, line.strip()))
    if instances:
        counts = {model: len(ids) for model, ids in instances.items()}
        value_ic: int | str = (
            next(iter(counts.values()))
            if len(counts) == 1
            else ", ".join(f"{k}:{v}" for k, v in sorted(counts.items()))
        )
        no, line = min(first.values())
        facts["instance_count"] = _fact("instance_count", value_ic, no, line, _PY_BE)
    _hosted(lines, facts)
    return facts


def _hosted_settings(engine: str) -> Mapping[str, tuple[str, Callable[[Any], Any]]]:
    """The hosted engine's settings as its spec maps them (none for an engine unknown here)."""
    from crossover.engines import registry  # the registry holds the spec that reads this log

    spec = registry.ENGINES.get(engine)
    return spec.triton_hosted.settings if spec and spec.triton_hosted else {}


def _hosted(lines: list[str], facts: dict[str, Fact]) -> None:
    for no, line in enumerate(lines, start=1):
        at = line.find(SETTINGS_PREFIX)
        if at < 0:
            continue
        try:
            body = json.loads(line[at + len(SETTINGS_PREFIX) :])
        except ValueError:
            continue
        if not isinstance(body, dict):
            continue
        engine = str(body.get("engine"))
        evidence = line[at:].strip()
        facts.setdefault("hosted_engine", _fact("hosted_engine", engine, no, evidence, _CROSSOVER))
        triton = body.get("triton") or {}
        if isinstance(triton.get("decoupled"), bool):
            facts.setdefault(
                "decoupled", _fact("decoupled", triton["decoupled"], no, evidence, _CROSSOVER)
            )
        settings = body.get("settings") or {}
        hosted = _hosted_settings(engine)
        for key, raw in settings.items() if isinstance(settings, dict) else ():
            target = hosted.get(key)
            if target is None or raw is None:
                continue
            name, convert = target
            try:
                value = convert(raw)
            except (TypeError, ValueError):
                continue
            facts.setdefault(name, _fact(name, value, no, evidence, _CROSSOVER))
        return  # every instance prints the same settings: the first line says them
