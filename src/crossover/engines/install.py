"""Where an engine's cached program is: the build or install ``crossover engines install``
made (the spec's ``install`` trait names the finder, resolved here on demand)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import cast

from crossover.engines.spec import EngineSpec


def cached_program(spec: EngineSpec) -> Path | None:
    """The engine's cached program, or None (none cached, or the engine is not installed
    by crossover)."""
    if spec.install is None:
        return None
    module, _, function = spec.install.find.partition(":")
    try:
        find = cast(Callable[[], Path | None], getattr(importlib.import_module(module), function))
    except ImportError:
        return None
    return find()


def install_hint(spec: EngineSpec) -> str:
    """``crossover engines install NAME``."""
    return f"crossover engines install {spec.name}"
