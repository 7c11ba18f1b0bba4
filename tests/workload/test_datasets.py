"""Prompt files: ShareGPT replies as each request's output length (``dataset:MAX``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crossover.calibration.tokenizer import WordTokenizer
from crossover.errors import UsageError
from crossover.measure import build_prompts
from crossover.spec.run import RunConfig
from crossover.workload.datasets import dataset_prompts, read_conversations
from crossover.workload.shape import parse_length


def _sharegpt(tmp_path: Path) -> Path:
    convs = [
        [("human", "one two three"), ("gpt", "a b c d e")],  # reply: 5 words
        [("human", "no reply here")],  # left out with dataset lengths
        [("system", "be brief"), ("user", "four five"), ("assistant", " ".join("x" * 40))],
        [("human", "six"), ("gpt", "ok")],
    ]
    data = [{"conversations": [{"from": f, "value": v} for f, v in c]} for c in convs]
    path = tmp_path / "sharegpt.json"
    path.write_text(json.dumps(data))
    return path


def test_replies_are_read_after_their_prompt(tmp_path: Path) -> None:
    got = read_conversations(_sharegpt(tmp_path))
    assert got == [
        ("one two three", "a b c d e"),
        ("no reply here", None),
        ("four five", " ".join("x" * 40)),
        ("six", "ok"),
    ]
    line = tmp_path / "p.jsonl"
    line.write_text('{"prompt": "hi there", "response": "hello you two"}\n"bare"\n')
    assert read_conversations(line) == [("hi there", "hello you two"), ("bare", None)]


def test_each_prompt_asks_for_its_own_reply_length_capped(tmp_path: Path) -> None:
    path = _sharegpt(tmp_path)
    ps = dataset_prompts(path, 5, None, WordTokenizer(), reply_cap=32)
    # the prompt without a reply is left out; 40 words are capped at 32; cycled
    assert [(p.text, p.tokens, p.output_tokens) for p in ps] == [
        ("one two three", 3, 5),
        ("four five", 2, 32),
        ("six", 1, 1),
        ("one two three", 3, 5),
        ("four five", 2, 32),
    ]
    # through a run's config: the same list for every engine, whatever it runs on
    cfg = RunConfig(
        url="http://127.0.0.1:9", model="m", concurrency=1, output_tokens="dataset:32",
        input_tokens=None, prompts_file=path,
    )  # fmt: skip
    assert cfg.output_tokens == 32 and cfg.workload_shape() == {"output_lengths": "dataset:32"}
    again = build_prompts(cfg, WordTokenizer(), 3, first=1)
    assert [p.output_tokens for p in again] == [32, 1, 5]


def test_dataset_lengths_need_a_cap_a_file_and_a_tokenizer(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="need a cap: dataset:MAX"):
        parse_length("dataset")
    with pytest.raises(ValueError, match="prompt file's replies: give a prompt file"):
        RunConfig(url="http://h:1", model="m", concurrency=1, output_tokens="dataset:8")
    with pytest.raises(UsageError, match="count the replies with a tokenizer"):
        dataset_prompts(_sharegpt(tmp_path), 2, None, None, reply_cap=8)
    bare = tmp_path / "bare.jsonl"
    bare.write_text('"just a prompt"\n')
    with pytest.raises(UsageError, match="no prompt has a reply"):
        dataset_prompts(bare, 2, None, WordTokenizer(), reply_cap=8)
