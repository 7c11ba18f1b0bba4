"""Engines: one spec per engine (``specs``, listed by ``registry``), launch and lifecycle,
the effective settings read back from their logs.

Heavy work happens only when called: importing this package starts nothing.
"""

from __future__ import annotations

from crossover.engines.adapters import launch_spec
from crossover.engines.config import EngineConfig
from crossover.engines.effective import (
    Check,
    EffectiveSettings,
    Fact,
    LaunchRecord,
    check,
    detect_engine,
    effective_settings,
    expectations_from_plan,
    parse_expect,
)
from crossover.engines.lifecycle import RunningEngine, alaunch, launch, start
from crossover.engines.registry import ENGINES, UnknownEngine, engine_config
from crossover.engines.spec import EngineSpec, LaunchSpec, VersionProbe

__all__ = [
    "ENGINES",
    "Check",
    "EffectiveSettings",
    "EngineConfig",
    "EngineSpec",
    "Fact",
    "LaunchRecord",
    "LaunchSpec",
    "RunningEngine",
    "UnknownEngine",
    "VersionProbe",
    "alaunch",
    "check",
    "detect_engine",
    "effective_settings",
    "engine_config",
    "expectations_from_plan",
    "launch",
    "launch_spec",
    "parse_expect",
    "start",
]
