"""The answer shapes of the engines' completions with logprobs, and endpoint parsing."""

from __future__ import annotations

import pytest

from crossover.errors import UsageError
from crossover.quality.api import ApiError, parse_endpoint, parse_logprobs


def test_llama_server_shape_gives_ids() -> None:
    # the pinned llama-server's /v1/completions with "logprobs": 2 (seen here)
    lp = {
        "content": [
            {
                "id": 506, "token": " the", "bytes": [32, 116, 104, 101], "logprob": -1.54,
                "top_logprobs": [
                    {"id": 506, "token": " the", "logprob": -1.54},
                    {"id": 496, "token": " a", "logprob": -2.06},
                ],
            }
        ]
    }  # fmt: skip
    (p,) = parse_logprobs(lp)
    assert (p.token, p.logprob, p.top) == (506, -1.54, {506: -1.54, 496: -2.06})


def test_openai_legacy_shape_with_vllm_token_ids() -> None:
    # vLLM /v1/completions, "logprobs": 2, "return_tokens_as_token_ids": true
    lp = {
        "tokens": ["token_id:506", "token_id:5279"],
        "token_logprobs": [-1.5, -0.7],
        "top_logprobs": [{"token_id:506": -1.5, "token_id:496": -2.0}, {"token_id:5279": -0.7}],
        "text_offset": [0, 4],
    }
    a, b = parse_logprobs(lp)
    assert (a.token, a.top) == (506, {506: -1.5, 496: -2.0})
    assert (b.token, b.logprob) == (5279, -0.7)
    # without token ids the tokens are compared as text
    (c,) = parse_logprobs({"tokens": [" the"], "token_logprobs": [None], "top_logprobs": None})
    assert (c.token, c.logprob, c.top) == (" the", None, {})


def test_unknown_shape_is_an_api_error() -> None:
    with pytest.raises(ApiError):
        parse_logprobs({"something": []})


@pytest.mark.parametrize(
    ("text", "msg"),
    [
        ("nourl", "expected NAME=URL"),
        ("a=localhost:8080", "http://"),
        ("a=http://h:1/v1", "without /v1"),
        ("a=http://h:1,engine=foo", "engine must be one of"),
        ("a=http://h:1,color=red", "unknown setting"),
        ("a=http://h:99999", "not a TCP port; give 1 to 65535"),
        ("a=http://:8080", "not an http"),
    ],
)
def test_bad_endpoints_are_one_line(text: str, msg: str) -> None:
    with pytest.raises(UsageError, match=msg):
        parse_endpoint(text, "--candidate")
    ep = parse_endpoint("q8=http://127.0.0.1:8081/,engine=llamacpp,model=m", "--candidate")
    assert (ep.name, ep.url, ep.engine, ep.model) == (
        "q8",
        "http://127.0.0.1:8081",
        "llamacpp",
        "m",
    )
