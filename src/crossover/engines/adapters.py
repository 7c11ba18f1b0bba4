"""The launch command of any registered engine: its spec's builder, plus the user's
executable and environment.

Each engine's knowledge lives in its own module under ``crossover.engines.specs``
(``crossover.engines.registry`` lists them).
"""

from __future__ import annotations

from pathlib import Path

from crossover.engines import registry
from crossover.engines.config import EngineConfig
from crossover.engines.spec import EngineSpec, LaunchSpec, VersionProbe

__all__ = ["EngineSpec", "LaunchSpec", "VersionProbe", "launch_spec"]


def launch_spec(config: EngineConfig, port: int, workdir: Path) -> LaunchSpec:
    """The complete argv (executable included) and environment changes for ``config``."""
    spec = registry.get(config.engine)
    built = spec.build(config, port, workdir)
    env_set = {**built.env_set, **config.env}
    return LaunchSpec(
        argv=spec.executable(config) + built.argv,
        env_set=env_set,
        env_unset=tuple(k for k in built.env_unset if k not in config.env),
        files=built.files,
        metrics_port=built.metrics_port,
    )
