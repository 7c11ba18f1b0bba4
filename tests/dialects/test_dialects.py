"""Every dialect's body carries its engine's matched-work fields and nothing else
that engine rejects (docs/metrics.md's table), and parses its chunks."""

from __future__ import annotations

import json

import pytest

from crossover.dialects import RequestSpec
from crossover.engines.registry import DIALECTS
from crossover.engines.registry import dialect as get_dialect
from crossover.errors import UsageError

SPEC = RequestSpec(model="m", prompt="hello", output_tokens=64)
CHAT = RequestSpec(model="m", prompt="hello", output_tokens=64, endpoint="chat")

# engine -> (fields that must be present with these values, fields that must be absent)
EXPECTED = {
    "openai": ({"max_tokens": 64}, {"ignore_eos", "min_tokens", "generation_config"}),
    "vllm": ({"max_tokens": 64, "min_tokens": 64, "ignore_eos": True}, {"generation_config"}),
    "sglang": ({"max_tokens": 64, "min_tokens": 64, "ignore_eos": True}, {"generation_config"}),
    "trtllm": ({"max_tokens": 64, "min_tokens": 64, "ignore_eos": True}, {"generation_config"}),
    "llamacpp": ({"max_tokens": 64, "ignore_eos": True}, {"min_tokens", "n_predict"}),
    # transformers serve answers 422 to ignore_eos, min_tokens, n_predict (seen on the H200)
    "transformers": ({"max_tokens": 64}, {"ignore_eos", "min_tokens", "n_predict"}),
}


@pytest.mark.parametrize("engine", sorted(EXPECTED))
def test_matched_work_fields(engine: str) -> None:
    must, absent = EXPECTED[engine]
    body = DIALECTS[engine].body(SPEC)
    for k, v in must.items():
        assert body[k] == v
    assert not absent & body.keys()
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["prompt"] == "hello"


def test_transformers_generation_config_is_a_json_string() -> None:
    body = DIALECTS["transformers"].body(SPEC)
    assert isinstance(body["generation_config"], str)
    assert json.loads(body["generation_config"]) == {"min_new_tokens": 64, "max_new_tokens": 64}


def test_trtllm_sends_only_fields_its_forbid_model_knows() -> None:
    # tensorrt_llm/serve/openai_protocol.py CompletionRequest (extra="forbid")
    known = {
        "model",
        "prompt",
        "max_tokens",
        "min_tokens",
        "ignore_eos",
        "stream",
        "stream_options",
    }
    assert set(DIALECTS["trtllm"].body(SPEC)) <= known


@pytest.mark.parametrize("engine", sorted(EXPECTED))
def test_chat_body(engine: str) -> None:
    d = DIALECTS[engine]
    body = d.body(CHAT)
    assert body["messages"] == [{"role": "user", "content": "hello"}]
    assert "prompt" not in body
    assert d.path(CHAT) == "/v1/chat/completions"
    assert d.path(SPEC) == "/v1/completions"


def test_triton_generate_stream() -> None:
    d = get_dialect("triton")
    assert d.path(SPEC) == "/v2/models/m/generate_stream"
    body = d.body(SPEC)
    assert body["text_input"] == "hello"
    assert body["max_tokens"] == 64 and body["min_tokens"] == 64
    assert "ignore_eos" not in body  # the ensemble has no such input
    assert not d.has_done_sentinel
    info = d.parse({"text_output": " hi", "num_output_tokens": 3}, "completions")
    assert info.text == " hi" and info.completion_tokens == 3


def test_parse_completion_chunk_and_usage() -> None:
    d = get_dialect("vllm")
    info = d.parse({"choices": [{"text": "ab", "finish_reason": None}]}, "completions")
    assert info.text == "ab" and info.finish_reason is None
    last = d.parse(
        {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 64}}, "completions"
    )
    assert last.text == "" and last.prompt_tokens == 5 and last.completion_tokens == 64


def test_parse_chat_role_only_chunk_carries_no_token() -> None:
    d = get_dialect("openai")
    assert d.parse({"choices": [{"delta": {"role": "assistant"}}]}, "chat").text == ""
    assert d.parse({"choices": [{"delta": {"content": ""}}]}, "chat").text == ""
    assert d.parse({"choices": [{"delta": {"reasoning_content": "x"}}]}, "chat").text == "x"


def test_parse_tolerates_odd_shapes() -> None:
    d = get_dialect("openai")
    for ev in (
        {},
        {"choices": None},
        {"choices": ["x"]},
        {"usage": "n/a"},
        {"choices": [{"text": 5, "finish_reason": 3}]},
    ):
        info = d.parse(ev, "completions")
        assert info.text == "" and info.finish_reason is None


def test_calibration_stamp_is_read() -> None:
    info = get_dialect("openai").parse(
        {"choices": [{"text": "a"}], "crossover_emit_ns": 12}, "completions"
    )
    assert info.emitted_ns == 12


def test_unknown_dialect_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="unknown engine dialect"):
        get_dialect("nope")


def test_parse_reads_json_as_json() -> None:
    """Integers written as floats are integers; null is absent; a fraction is no count."""
    d = get_dialect("vllm")
    usage = {"prompt_tokens": 5.0, "completion_tokens": 64.0, "total_tokens": 69.0}
    info = d.parse({"choices": [], "usage": usage}, "completions")
    assert (info.prompt_tokens, info.completion_tokens, info.total_tokens) == (5, 64, 69)
    odd = d.parse({"usage": {"completion_tokens": 64.5, "prompt_tokens": None}}, "completions")
    assert (odd.completion_tokens, odd.prompt_tokens) == (None, None)
    assert d.parse({"choices": [{"index": 0.0, "text": "a"}]}, "completions").text == "a"
    nulls = {"index": 0, "delta": {"content": "a", "role": None, "tool_calls": None}}
    assert d.parse({"choices": [nulls], "usage": None, "error": None}, "chat").text == "a"
    assert d.parse({"choices": [{"delta": None, "finish_reason": None}]}, "chat").text == ""


def test_parse_reads_every_choice() -> None:
    """Index 0 is the response (every entry of it); any other index is counted, not read."""
    d = get_dialect("openai")
    ev = {
        "choices": [
            {"index": 0, "text": "a"},
            {"index": 1, "text": "z", "finish_reason": "length"},
            {"index": 0, "text": "b", "finish_reason": "length"},
        ]
    }
    info = d.parse(ev, "completions")
    assert (info.text, info.finish_reason, info.other_choices) == ("ab", "length", 1)
    # no index: by position
    info2 = d.parse({"choices": [{"text": "a"}, {"text": "z"}]}, "completions")
    assert (info2.text, info2.other_choices) == ("a", 1)
    # another choice that carries nothing is nothing
    assert d.parse({"choices": [{"index": 1, "delta": {}}]}, "chat").other_choices == 0


def test_reasoning_sent_under_both_names_counts_once() -> None:
    d = get_dialect("vllm")
    both = {"choices": [{"delta": {"reasoning_content": "x", "reasoning": "x"}}]}
    assert d.parse(both, "chat").text == "x"
    two = {"choices": [{"delta": {"content": "a", "reasoning": "r"}}]}
    assert d.parse(two, "chat").text == "ar"


def test_logprobs_state_the_chunks_tokens() -> None:
    d = get_dialect("vllm")
    chat = {"choices": [{"delta": {"content": "ab"}, "logprobs": {"content": [{}, {}]}}]}
    assert d.parse(chat, "chat").n_tokens == 2
    comp = {"choices": [{"text": "ab", "logprobs": {"tokens": ["a", "b"]}}]}
    assert d.parse(comp, "completions").n_tokens == 2
    assert d.parse({"choices": [{"text": "a", "logprobs": None}]}, "completions").n_tokens is None
