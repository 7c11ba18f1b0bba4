"""An engine's garbage collector frozen on request: SGLang's ``/freeze_gc``.

SGLang's front end (its tokenizer manager, one Python process) holds about a million
objects once serving; each full collection walks them all and stops the process for
0.5-0.74 s (measured on an H100, docs/engines.md), a pause every request in flight
waits out. A POST to the engine's freeze path (``EngineSpec.freeze_gc_path``) moves the
objects alive at that moment into Python's permanent generation (``gc.freeze``), so the
later full collections skip them. A sweep with ``freeze_gc: true`` asks before each level
(``crossover.sweep.level``).
"""

from __future__ import annotations

import http.client
from urllib.parse import urlsplit

#: SGLang answers once its scheduler was told and its own process froze: quick, but the
#: front end may be busy finishing the previous level's last requests
FREEZE_TIMEOUT_S = 30.0


def freeze_gc(url: str, path: str, timeout_s: float = FREEZE_TIMEOUT_S) -> str | None:
    """POST ``url + path``; ``None`` where it answered 200, else why not, in a few words
    (the status and the start of the body, or the connection's error)."""
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    conn = http.client.HTTPConnection(host, parts.port or 80, timeout=timeout_s)
    try:
        conn.request("POST", path, body=b"", headers={"Content-Length": "0"})
        resp = conn.getresponse()
        body = resp.read(200).decode("utf-8", errors="replace").strip()
    except (OSError, http.client.HTTPException) as exc:
        return f"no answer ({str(exc) or type(exc).__name__})"
    finally:
        conn.close()
    if resp.status == 200:
        return None
    # the server's words, untrusted: one line, printable characters only
    said = "".join(c if c.isprintable() else "?" for c in " ".join(body.split()))[:120]
    return f"status {resp.status}" + (f": {said}" if said else "")
