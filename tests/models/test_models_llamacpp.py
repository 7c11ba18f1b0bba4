"""The synthetic tiny model in the real llama-server: it loads, generates, and tokenizes
exactly as the HF tokenizer written beside it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from crossover.builds.llamacpp import find_llama_server
from crossover.models.synth import SynthResult, ensure_synth

pytestmark = pytest.mark.llamacpp

SAMPLES = [
    "Hello world",
    "The quick brown fox jumps over 13 lazy dogs, doesn't it? 3.14159 and 1234567!",
    "  leading spaces,\ttabs\nnew lines\n\n  and   runs   of spaces  ",
    "Unicode: café, naïve, 東京, emoji 🙂, math ∑x²",
    "<|begin_of_text|>special token text in the prompt",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _post(url: str, body: dict[str, Any]) -> Any:
    req = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read())


@pytest.fixture(scope="module")
def tiny() -> SynthResult:
    return ensure_synth("tiny-llama", ("gguf", "hf"))


@pytest.fixture(scope="module")
def server(tiny: SynthResult, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary = find_llama_server()
    assert binary is not None, "make test builds llama-server first"
    assert tiny.gguf is not None
    port = _free_port()
    log = tmp_path_factory.mktemp("server") / "llama-server.log"
    args = [str(binary), "-m", str(tiny.gguf), "--host", "127.0.0.1", "--port", str(port)]
    args += ["-c", "1024", "-np", "1", "-t", "2"]
    with log.open("w") as log_fh:
        proc = subprocess.Popen(
            args, stdout=log_fh, stderr=subprocess.STDOUT, start_new_session=True
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, f"llama-server exited: {log.read_text()[-2000:]}"
            try:
                with urllib.request.urlopen(base + "/health", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "llama-server did not become healthy"
            time.sleep(0.2)
        yield base
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_tiny_model_generates(server: str) -> None:
    out = _post(server + "/completion", {"prompt": "Hello", "n_predict": 8, "ignore_eos": True})
    assert out["tokens_predicted"] == 8


@pytest.fixture(scope="module")
def hf_tokenizer(tiny: SynthResult) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tiny.hf_dir))


@pytest.mark.parametrize("text", SAMPLES)
def test_hf_tokenizer_matches_llama_server(server: str, hf_tokenizer: Any, text: str) -> None:
    tok = hf_tokenizer
    plain = _post(server + "/tokenize", {"content": text})["tokens"]
    assert tok(text, add_special_tokens=False)["input_ids"] == plain
    with_bos = _post(server + "/tokenize", {"content": text, "add_special": True})["tokens"]
    assert tok(text)["input_ids"] == with_bos


def test_cached_synth_is_reused(tiny: SynthResult) -> None:
    started = time.monotonic()
    again = ensure_synth("tiny-llama", ("gguf", "hf"))
    assert time.monotonic() - started < 1.0
    assert again.gguf == tiny.gguf
    assert Path(str(again.hf_dir)).is_dir()
