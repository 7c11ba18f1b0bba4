"""The two requests quality scoring needs, in each engine's real fields.

* token ids of a prompt: llama-server ``POST /tokenize {"content", "add_special"}``
  (tools/server of the pinned llama.cpp); vLLM and SGLang ``POST /tokenize {"model",
  "prompt", "add_special_tokens"}`` (vLLM's serving API). ``{"tokens": [...]}`` back.
* a greedy completion with top-K log-probabilities: ``POST /v1/completions`` with
  ``temperature: 0``, ``logprobs: K`` and the prompt as a list of token ids. Two answer
  shapes: llama-server's ``logprobs.content[] = {id, token, logprob, top_logprobs[]}``
  (seen here with the pinned build), and the OpenAI legacy shape vLLM returns,
  ``logprobs = {tokens[], token_logprobs[], top_logprobs[{token: logprob}]}``, where
  ``return_tokens_as_token_ids: true`` makes each token ``"token_id:N"``.
  ``ignore_eos`` (llama-server, vLLM, SGLang) keeps the reference going to the length
  asked for, so every prompt scores the same number of positions.

Every string from a server is untrusted: it is only compared, never interpreted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson

from crossover.engines import registry
from crossover.engines.spec import QualityAPI
from crossover.errors import UsageError
from crossover.quality.score import Position
from crossover.spec.run import base_url, parse_named_url

#: engines whose spec gives the quality API's fields, and a plain OpenAI server
ENGINES = (*registry.with_trait("quality"), "openai")


@dataclass(frozen=True)
class Endpoint:
    name: str
    url: str  # base URL, no /v1
    engine: str = "openai"
    model: str | None = None


def parse_endpoint(text: str, flag: str) -> Endpoint:
    """``NAME=URL[,engine=E,model=M]``; one line naming the flag when it is not."""
    name, url, fields = parse_named_url(text, flag)
    engine = fields.get("engine", "openai")
    if engine not in ENGINES:
        raise UsageError(f"{flag} {text!r}: engine must be one of {', '.join(ENGINES)}")
    url = url.rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"{flag} {text!r}: the URL must start with http:// or https://")
    if url.endswith("/v1"):
        raise UsageError(f"{flag} {text!r}: give the server's base URL, without /v1")
    if not name:
        raise UsageError(f"{flag} {text!r}: the name is empty")
    try:  # what run and sweep check too: a host, a port 1 to 65535 (:99999 was exit 1)
        url = base_url(url)
    except ValueError as exc:
        raise UsageError(f"{flag} {text!r}: {exc}") from None
    return Endpoint(name, url, engine, fields.get("model"))


class ApiError(Exception):
    """A server answered in a way scoring cannot use; the message names it."""


async def _post(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> Any:
    try:
        async with session.post(url, data=orjson.dumps(body)) as resp:
            raw = await resp.read()
            if resp.status != 200:
                text = raw[:200].decode("utf-8", "replace")
                raise ApiError(f"{url}: HTTP {resp.status}: {text}")
    except aiohttp.ClientError as exc:
        raise ApiError(f"{url}: {type(exc).__name__}: {exc}") from None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise ApiError(f"{url}: the answer is not JSON") from None


def _api(engine: str) -> QualityAPI:
    """The engine's quality fields; a plain OpenAI server gets vLLM's serving API shape."""
    spec = registry.ENGINES.get(engine)
    return spec.quality if spec is not None and spec.quality is not None else QualityAPI()


async def tokenize(session: aiohttp.ClientSession, ep: Endpoint, text: str) -> list[int]:
    if _api(ep.engine).tokenize_text_key == "content":  # llama-server's own fields
        body: dict[str, Any] = {"content": text, "add_special": True}
    else:
        body = {"prompt": text, "add_special_tokens": True}
        if ep.model:
            body["model"] = ep.model
    obj = await _post(session, ep.url + "/tokenize", body)
    tokens = obj.get("tokens") if isinstance(obj, dict) else None
    if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
        raise ApiError(f"{ep.url}/tokenize: no token ids in the answer")
    return tokens


async def complete(
    session: aiohttp.ClientSession, ep: Endpoint, prompt: list[int], max_tokens: int, k: int
) -> list[Position]:
    """Greedy continuation of ``prompt`` (token ids) with top-``k`` log-probabilities."""
    body: dict[str, Any] = {
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": 0,
        "logprobs": k,
        "stream": False,
    }
    if ep.model:
        body["model"] = ep.model
    body.update(_api(ep.engine).completion_fields)
    obj = await _post(session, ep.url + "/v1/completions", body)
    try:
        lp = obj["choices"][0]["logprobs"]
    except (KeyError, IndexError, TypeError):
        raise ApiError(f"{ep.url}/v1/completions: no logprobs in the answer") from None
    return parse_logprobs(lp)


def _token(value: Any) -> int | str:
    if isinstance(value, str) and value.startswith("token_id:") and value[9:].isdigit():
        return int(value[9:])
    if isinstance(value, int):
        return value
    return str(value)


def parse_logprobs(lp: Any) -> list[Position]:
    """Both answer shapes (module docstring) -> positions."""
    if isinstance(lp, dict) and isinstance(lp.get("content"), list):
        out = []
        for item in lp["content"]:
            tok = item.get("id", item.get("token"))
            top = {
                _token(t.get("id", t.get("token"))): float(t["logprob"])
                for t in item.get("top_logprobs") or []
                if isinstance(t, dict) and "logprob" in t
            }
            out.append(Position(_token(tok), _float(item.get("logprob")), top))
        return out
    if isinstance(lp, dict) and isinstance(lp.get("tokens"), list):
        tops = lp.get("top_logprobs") or [None] * len(lp["tokens"])
        lps = lp.get("token_logprobs") or [None] * len(lp["tokens"])
        return [
            Position(
                _token(t),
                _float(v),
                {_token(k): float(x) for k, x in (top or {}).items() if x is not None},
            )
            for t, v, top in zip(lp["tokens"], lps, tops, strict=False)
        ]
    raise ApiError("logprobs in a shape crossover does not know")


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None
