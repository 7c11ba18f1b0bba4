"""The endpoint before a run: its API key headers (from the environment only) and a
probe that fails fast, with one line, when nothing answers."""

from __future__ import annotations

import os
import urllib.error
import urllib.request

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
