"""The endpoint before a run: its API key headers (from the environment only), a probe
that fails fast, with one line, when nothing answers, and the model it serves
(:func:`served_model`: every replica an LLM server of the run's dialect)."""

from __future__ import annotations

import http.client
import os
import urllib.error
import urllib.request
from collections.abc import Callable

from crossover.errors import UsageError
from crossover.spec.run import RunConfig


def api_headers(config: RunConfig) -> dict[str, str]:
    """The API key comes from the environment only and is never stored."""
    name = config.api_key_env or "CROSSOVER_API_KEY"
    key = os.environ.get(name)
    if config.api_key_env and not key:
        raise UsageError(f"--api-key-env {name}: that environment variable is not set")
    return {"Authorization": f"Bearer {key}"} if key else {}


def probe(url: str, headers: dict[str, str], timeout_s: float = 10.0) -> None:
    """Fail fast, with one line, when nothing answers at ``url``."""
    for path in ("/health", "/v1/models", "/"):
        req = urllib.request.Request(url + path, headers=headers)  # noqa: S310
        try:
            with urllib.request.urlopen(req, timeout=timeout_s):  # noqa: S310
                return
        except urllib.error.HTTPError:
            return  # something answers HTTP: good enough
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            if path == "/":
                raise UsageError(f"cannot reach {url}: {reason}") from None


def served_model(config: RunConfig, model: str | None, say: Callable[[str], object]) -> RunConfig:
    """``config`` with the model to send: each replica probed and asked for its models (an
    LLM server of the run's dialect, or one line before anything runs); ``model`` where
    given, else the one model the first replica lists (``say`` is told it was picked)."""
    from crossover.dialects.discovery import pick_model, served_models
    from crossover.engines import registry

    for base in config.replica_urls:
        probe(base, api_headers(config))
        # an LLM server of this dialect, or one line and exit 2 before anything runs
        dialect = registry.dialect(config.dialect)
        listed = served_models(base, dialect, model, api_headers(config))
        if base == config.url:
            picked, said = pick_model(base, listed, model)
            if said is not None:
                say(said)
            config = config.model_copy(update={"model": picked})
    return config


def url_version(
    base_url: str, engine: str | None, headers: dict[str, str], timeout_s: float = 2.0
) -> str | None:
    """The version of the server at ``base_url`` (a URL target: not launched here) by the
    HTTP probes of ``engine``'s adapter (a dialect: the engine of that name; none known:
    ``GET /version``, vLLM's and SGLang's), the first that answers; ``None`` if none
    does. Only GETs are sent, with the requests' own headers (its API key)."""
    from crossover.engines import registry
    from crossover.engines.lifecycle import http_probe_text, probe_result
    from crossover.engines.spec import VersionProbe

    spec = registry.ENGINES.get(engine or "")
    generic = (VersionProbe("http", ("/version",), json_key="version"),)
    for probe in spec.version_probes if spec is not None else generic:
        if probe.kind != "http":
            continue
        req = urllib.request.Request(base_url.rstrip("/") + probe.target[0], headers=headers)  # noqa: S310
        try:
            with urllib.request.urlopen(req, timeout=timeout_s) as resp:  # noqa: S310
                body = resp.read(1 << 20)
        except (OSError, ValueError, http.client.HTTPException):  # an HTTPError too
            continue
        found = probe_result(http_probe_text(body, probe), probe)
        if found is not None:
            return found
    return None
