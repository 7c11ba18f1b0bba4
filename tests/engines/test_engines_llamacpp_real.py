"""The real llama-server (crossover.builds) serving the real Gemma 3 270M (crossover.models),
launched and stopped through crossover.engines. ``make test`` provides both."""

from __future__ import annotations

import http.client
import json
import os
from pathlib import Path

import pytest

from crossover.engines import engine_config, launch
from crossover.engines.processes import group_members

pytestmark = pytest.mark.llamacpp


def _server_and_model() -> tuple[Path, Path]:
    try:
        from crossover.builds.llamacpp import find_llama_server
        from crossover.models.gemma import find_gemma3_270m
    except ImportError as exc:  # pragma: no cover - only before those packages land
        pytest.skip(f"needs {exc.name}")
    server, model = find_llama_server(), find_gemma3_270m()
    if server is None or model is None:
        pytest.skip("no built llama-server or no Gemma model (make engines models)")
    return server, model


def test_real_llama_server_launch_settings_and_stop(tmp_path: Path) -> None:
    server, model = _server_and_model()
    config = engine_config(
        engine="llamacpp",
        model=str(model),
        executable=[str(server)],
        parallel=2,
        context_tokens=512,
        cuda_graphs=False,
        health_timeout_s=120.0,
    )
    with launch(config, tmp_path / "llama-server.log") as engine:
        assert engine.alive()
        assert engine.version  # /props build_info, else --version
        conn = http.client.HTTPConnection("127.0.0.1", engine.port, timeout=60)
        body = {"prompt": "Hello", "n_predict": 4, "ignore_eos": True}
        conn.request("POST", "/completion", json.dumps(body), {"Content-Type": "application/json"})
        response = conn.getresponse()
        assert response.status == 200
        assert json.loads(response.read())["tokens_predicted"] == 4
        conn.close()
        settings = engine.effective_settings()
        assert settings.value("parallel_slots") == 2
        assert settings.value("context_tokens") == 512
        fact = settings.facts["cuda_graphs"]
        assert fact.value is False  # CPU build: from the log; CUDA build: from the env
        assert fact.verified
        pid, pgid = engine.pid, engine.pgid
    assert not engine.alive()
    assert group_members(pgid) == []
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_real_llama_server_refusing_a_flag_names_it_and_whose_it_is(tmp_path: Path) -> None:
    """The pinned llama-server's own refusal (``error: invalid argument: ...``) read back:
    the start fails at once with the flag named as the target's, not a bare exit status."""
    from crossover.errors import EngineError

    server, model = _server_and_model()
    config = engine_config(
        engine="llamacpp",
        model=str(model),
        executable=[str(server)],
        extra_args=["--no-such-flag"],
        health_timeout_s=60.0,
    )
    with pytest.raises(EngineError) as info:
        launch(config, tmp_path / "llama-server.log")
    assert str(info.value).endswith(
        "before becoming healthy: this llama-server does not know --no-such-flag "
        "(from the target's extra_args)"
    )
    assert "invalid argument: --no-such-flag" in (info.value.log_tail or "")
