"""Engine adapters (launch command, health, version, metrics, log facts) and lifecycle.

Heavy work happens only when called: importing this package starts nothing.
"""

from __future__ import annotations

from crossover.engines.adapters import (
    ADAPTERS,
    EngineAdapter,
    LaunchSpec,
    VersionProbe,
    get_adapter,
    launch_spec,
)
from crossover.engines.config import ENGINE_NAMES, EngineConfig, engine_config
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

__all__ = [
    "ADAPTERS",
    "ENGINE_NAMES",
    "Check",
    "EffectiveSettings",
    "EngineAdapter",
    "EngineConfig",
    "Fact",
    "LaunchRecord",
    "LaunchSpec",
    "RunningEngine",
    "VersionProbe",
    "alaunch",
    "check",
    "detect_engine",
    "effective_settings",
    "engine_config",
    "expectations_from_plan",
    "get_adapter",
    "launch",
    "launch_spec",
    "parse_expect",
    "start",
]
