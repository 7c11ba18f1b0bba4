"""The launch command of any registered engine: its spec's builder, plus the user's
executable and environment.

Each engine's knowledge lives in its own module under ``crossover.engines.specs``
(``crossover.engines.registry`` lists them).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from crossover.engines import registry
from crossover.engines.config import EngineConfig
from crossover.engines.flags import GpuAsk
from crossover.engines.spec import EngineSpec, LaunchSpec, VersionProbe
from crossover.errors import UsageError

__all__ = ["EngineSpec", "LaunchSpec", "VersionProbe", "launch_gpus", "launch_spec"]


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


def launch_gpus(config: EngineConfig) -> GpuAsk | None:
    """The GPUs one launch of ``config`` uses, as its spec's ``launch_gpus`` reads the
    command its builder makes (``extra_args`` included): what the sweep's GPU check
    compares with those visible and what ``--ray`` asks Ray for. ``None`` where the
    engine has no count or the command does not build (a problem of its own, said where
    the command is built)."""
    spec = registry.get(config.engine)
    if spec.launch_gpus is None:
        return None
    try:
        built = launch_spec(config, config.port or 8000, Path(tempfile.gettempdir()))
    except UsageError:
        return None
    return spec.launch_gpus(built.argv)
