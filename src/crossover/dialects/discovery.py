"""Is the server at a URL an LLM server, and which models does it serve?

Asked before anything is measured (``crossover run``, each URL target of a sweep): a
plain web server answers ``/`` too, and measuring it produces a run of failed requests
and an HTML page in the error lines. Each dialect names its listings (``model_lists``):

* OpenAI-compatible servers (vLLM, SGLang, TensorRT-LLM's ``trtllm-serve``, llama.cpp,
  crossover's calibration server): ``GET /v1/models`` answers ``{"data": [{"id": ...}]}``
  (llama.cpp also answers ``GET /props`` with its ``model_path``, the fallback here);
* Triton: ``GET /v2/models/NAME`` answers the model's metadata (``{"name": ...}``), and
  without a name ``POST /v2/repository/index`` lists the repository's models;
* ``transformers serve``: ``/v1/models`` fails without an HF cache folder, so its
  ``/health`` answering JSON is taken as the server's word.

A server that answers none of them is refused with one line: the status and the first
characters of what it sent, on one line (never an HTML page over several).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from crossover.dialects.base import Dialect
from crossover.errors import UsageError

#: characters of an unexpected body quoted in the refusal
BODY_CHARS = 80
#: bytes read of any answer (a model list is small; an HTML page is cut)
READ_BYTES = 256 * 1024


class NotAnLLMServerError(UsageError):
    """The URL answers HTTP, but not as a server of the dialect asked for."""


@dataclass(frozen=True)
class _Answer:
    status: int | None  # None: nothing answered
    body: bytes
    reason: str = ""


def _fetch(url: str, headers: dict[str, str], timeout_s: float, post: bool = False) -> _Answer:
    data = b"{}" if post else None
    hdrs = {**headers, **({"Content-Type": "application/json"} if post else {})}
    req = urllib.request.Request(url, data=data, headers=hdrs)  # noqa: S310
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:  # noqa: S310
            return _Answer(int(resp.status), resp.read(READ_BYTES))
    except urllib.error.HTTPError as exc:
        try:
            body = exc.read(READ_BYTES)
        except OSError:
            body = b""
        return _Answer(exc.code, body, str(exc.reason or ""))
    except (urllib.error.URLError, OSError) as exc:
        return _Answer(None, b"", str(getattr(exc, "reason", exc)))


def one_line(body: bytes, limit: int = BODY_CHARS) -> str:
    """The start of a body on one line: whitespace collapsed, at most ``limit`` chars."""
    text = " ".join(body.decode("utf-8", "replace").split())
    if not text:
        return "(empty body)"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return None


def _openai_ids(doc: Any) -> list[str] | None:
    """Model ids of an OpenAI ``/v1/models`` answer; None when it is not one."""
    if not isinstance(doc, dict) or not isinstance(doc.get("data"), list):
        return None
    ids = [m.get("id") for m in doc["data"] if isinstance(m, dict)]
    return [i for i in ids if isinstance(i, str)]


def _props_ids(doc: Any) -> list[str] | None:
    """llama.cpp's ``/props``: the model it loaded (``model_alias`` or ``model_path``)."""
    if not isinstance(doc, dict) or "default_generation_settings" not in doc:
        return None
    for key in ("model_alias", "model_path"):
        if isinstance(doc.get(key), str) and doc[key]:
            return [doc[key]]
    return []


def _triton_index_ids(doc: Any) -> list[str] | None:
    if not isinstance(doc, list):
        return None
    names = [m.get("name") for m in doc if isinstance(m, dict)]
    return [n for n in names if isinstance(n, str)]


def _health_ids(doc: Any) -> list[str] | None:
    return [] if isinstance(doc, dict) else None


#: (path, POST, reader) of each listing a dialect names, the repository's without a model
_LISTS: dict[str, tuple[str, bool, Any]] = {
    "models": ("/v1/models", False, _openai_ids),
    "props": ("/props", False, _props_ids),
    "health": ("/health", False, _health_ids),
    "repository": ("/v2/repository/index", True, _triton_index_ids),
}


def _ask(kind: str, model: str | None) -> tuple[str, bool, Any]:
    if kind == "repository" and model:
        return (f"/v2/models/{model}", False, _triton_model(model))
    return _LISTS[kind]


def served_models(
    url: str,
    dialect: Dialect,
    model: str | None,
    headers: dict[str, str] | None = None,
    timeout_s: float = 10.0,
) -> list[str]:
    """The model names the server at ``url`` lists for ``dialect`` (empty where its answer
    names none, e.g. a health check); raises ``NotAnLLMServerError`` with one line when
    it answers, but not as such a server, and ``UsageError`` when nothing answers."""
    hdrs = headers or {}
    asks = [_ask(kind, model) for kind in dialect.model_lists]
    first: tuple[str, _Answer] | None = None
    for path, post, read in asks:
        ans = _fetch(url + path, hdrs, timeout_s, post=post)
        if ans.status is None:
            raise UsageError(f"cannot reach {url}: {ans.reason}")
        if ans.status == 200:
            ids = read(_json(ans.body))
            if ids is not None:
                return list(ids)
        if first is None:
            first = (path, ans)
    assert first is not None
    path, ans = first
    verb = "POST" if path == "/v2/repository/index" else "GET"
    metadata = "repository" in dialect.model_lists and model
    what = f"model {model!r}'s metadata" if metadata else "a model list"
    said = f"{ans.status}" + (f" {ans.reason}" if ans.reason else "")
    raise NotAnLLMServerError(
        f"{url} does not answer as an LLM server ({dialect.name} dialect): {verb} {path} "
        f"answered {said}, not {what}: {one_line(ans.body)}"
    )


def _triton_model(model: str) -> Any:
    def read(doc: Any) -> list[str] | None:
        if isinstance(doc, dict) and isinstance(doc.get("name"), str):
            return [doc["name"]]
        return None

    return read


def pick_model(url: str, listed: list[str], asked: str | None) -> tuple[str, str | None]:
    """(the model to send, a line saying it was picked or None when it was given).

    ``asked`` wins whenever given (servers accept aliases they do not list). Without it,
    the one model the server lists is used; none or several are refused with the list."""
    if asked:
        return asked, None
    if len(listed) == 1:
        return listed[0], f"model: {listed[0]} (the one model {url} lists)"
    if not listed:
        raise UsageError(f"--model is required: {url} lists no model name")
    shown = ", ".join(listed[:10]) + (f" and {len(listed) - 10} more" if len(listed) > 10 else "")
    raise UsageError(f"--model is required: {url} lists {len(listed)} models: {shown}")
