"""The real llama-server (CPU build from crossover.builds) for the reliability tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from crossover.engines import RunningEngine, engine_config, launch


def llama_server() -> Path:
    from crossover.builds.llamacpp import find_llama_server

    server = find_llama_server()
    if server is None:
        pytest.skip("no built llama-server (make test builds it)")
    return server


@contextmanager
def serving(
    model: Path, log: Path, parallel: int = 2, extra_args: tuple[str, ...] = ()
) -> Iterator[RunningEngine]:
    config = engine_config(
        engine="llamacpp",
        model=str(model),
        executable=[str(llama_server())],
        parallel=parallel,
        context_tokens=512,
        # one thread: on a shared 2-core machine, spinning threads starve each other
        extra_args=["-t", "1", *extra_args],
        health_timeout_s=120.0,
    )
    with launch(config, log) as engine:
        yield engine
